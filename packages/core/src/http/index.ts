/**
 * `@idempotent-tools/core/http`: the server side of the IETF HTTPAPI `Idempotency-Key` draft
 * (draft-ietf-httpapi-idempotency-key-header-09) for fetch-style handlers.
 */

export { NotAnOutcome } from '../executor/not-an-outcome.js';
export {
  type IdempotencyPolicy,
  type IdempotentHandlerOptions,
  type IdempotentRequestHandler,
  idempotentHandler,
  type RequestFingerprint,
  SHARED_SCOPE,
} from './handler.js';
export { type KeyParseResult, parseIdempotencyKey, serializeSfString } from './header.js';
export { type IdempotencyProblemCode, PROBLEM_DOCS } from './problem.js';
export { BODY_OMITTED_HEADER, type StoredResponse } from './stored-response.js';
