/**
 * `idempotentHandler`: the server side of the IETF HTTPAPI `Idempotency-Key` draft
 * (draft-ietf-httpapi-idempotency-key-header-09) for fetch-style handlers, on the executor: the
 * key is the call's business key, the request's fingerprint its args, the stored response its
 * outcome. Design: docs/design.md, "Tools served over HTTP".
 */

import {
  ConfigurationError,
  DriftError,
  InProgressError,
  InvalidInputError,
  OutcomeUnknownError,
  PersistFailedError,
  RecordIntegrityError,
  ReplayedFailureError,
  StoreUnavailableError,
} from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { createIdempotency, DEFAULTS, type Idempotency, type ToolPolicy } from '../executor.js';
import { KEY_LIMITS } from '../keys/derive-key.js';
import { sha256OfBytes } from '../runtime/index.js';
import type { IdempotencyStore } from '../store/store.js';
import { parseIdempotencyKey } from './header.js';
import { type Problem, problemResponse } from './problem.js';
import {
  captureResponse,
  isStoredResponse,
  replayResponse,
  type StoredResponse,
} from './stored-response.js';

/** The value of `scope` that shares one key space among all clients (read its risk first). */
export const SHARED_SCOPE = 'shared';

export interface IdempotentHandlerOptions<R extends Request = Request> {
  /** Where the stored responses live. Give this or `idempotency`. */
  store?: IdempotencyStore;
  /** An executor of your own (its `onEvent`, `encryption`, ...), instead of `store`. */
  idempotency?: Idempotency;
  /**
   * Who sent the request: the client identity the keys belong to (API key id, user, tenant),
   * read from the request's headers (its body is readable too). The same key from two clients is
   * two operations: one client's response is never replayed to another. A request for which it
   * returns `undefined` (or `''`) is refused with 403 (`client_unidentified`); nothing runs.
   * `'shared'`: every client shares one key space, and a client that sends (or guesses) another
   * client's key gets that client's response. Only for a server with one client, or keys the
   * server itself made unguessable and bound to the client. Required: there is no default.
   */
  scope: ((request: R) => string | undefined | Promise<string | undefined>) | typeof SHARED_SCOPE;
  /**
   * How long a key and its response are kept, in ms: the expiry policy to publish in your API's
   * documentation. A request with the key after it runs as a new one.
   * @default 86400000 (24 h)
   */
  ttl?: number;
  /** The methods guarded; other requests pass through untouched. @default ['POST', 'PATCH'] */
  methods?: readonly string[];
  /**
   * A guarded request without the key is refused with 400 (`idempotency_key_missing`). With
   * `false` it runs unguarded (no record, no replay: a retry runs it again).
   * @default true
   */
  required?: boolean;
  /** The request header holding the key. @default 'Idempotency-Key' */
  header?: string;
  /** Longest key accepted, in characters; a longer one is 400. At most 511. @default 255 */
  maxKeyLength?: number;
  /** Largest request body read (it is hashed into the fingerprint); a bigger one is 413. @default 10485760 (10 MiB) */
  maxBodyBytes?: number;
  /**
   * Largest response body stored, in bytes. The first caller always gets the whole body; a
   * replay of a bigger one has its status and headers, an empty body and
   * `Idempotent-Replay-Body-Omitted: true` (the effect is not run again).
   * @default 1048576 (1 MiB)
   */
  maxResponseBytes?: number;
  /**
   * A request with the key of a request still running: `undefined` answers 409
   * (`request_in_progress`) with `Retry-After` at once, as the draft says; a number of ms waits
   * that long for the first one's response and replays it (then 409).
   * @default undefined (no wait)
   */
  waitTimeout?: number;
  /** `Retry-After` of a 409 and a 503, in seconds. @default 1 */
  retryAfter?: number;
  /** The header set to `true` on a replayed response. @default 'Idempotent-Replayed' (Stripe's) */
  replayHeader?: string;
  /**
   * Responses of the handler that are returned but not stored: the key is freed and a retry runs
   * the handler again. Only for responses that certainly come before any effect (a 503 of an
   * overload check, a 429 of a rate limiter). Every other response, 4xx and 5xx included, is
   * stored and replayed (the draft: "success or an error"; Stripe does the same).
   * @default () => false
   */
  retryable?: (response: Response) => boolean;
  /**
   * The URL of your API's idempotency documentation (the key format, `ttl`, what is stored): the
   * problem `type`s are `<documentation>#<code>` and every problem carries
   * `Link: <documentation>; rel="describedby"`.
   * @default undefined (problem types point at this package's README)
   */
  documentation?: string;
  /** The key space's name in the store (the records' tool name). @default 'http' */
  name?: string;
}

/** The policy a wrapped handler enforces, for your API documentation. */
export interface IdempotencyPolicy {
  header: string;
  methods: readonly string[];
  required: boolean;
  /** Keys and responses are kept this long, in ms. */
  ttl: number;
  maxKeyLength: number;
  maxBodyBytes: number;
  maxResponseBytes: number;
  replayHeader: string;
  waitTimeout: number | undefined;
  documentation: string | undefined;
}

/** The wrapped handler, with the policy it enforces. */
export type IdempotentRequestHandler<R extends Request, Rest extends unknown[]> = ((
  request: R,
  ...rest: Rest
) => Promise<Response>) & { readonly policy: IdempotencyPolicy };

const OPTION_NAMES: readonly (keyof IdempotentHandlerOptions)[] = [
  'store',
  'idempotency',
  'scope',
  'ttl',
  'methods',
  'required',
  'header',
  'maxKeyLength',
  'maxBodyBytes',
  'maxResponseBytes',
  'waitTimeout',
  'retryAfter',
  'replayHeader',
  'retryable',
  'documentation',
  'name',
];

/** A key's canonical JSON (the executor's business key) must fit `KEY_LIMITS.businessKey`. */
const MAX_KEY_LENGTH = Math.floor((KEY_LIMITS.businessKey - 2) / 2);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

function configError(option: string, message: string, cause?: unknown): ConfigurationError {
  return new ConfigurationError({ option, message: `idempotentHandler: ${message}`, cause });
}

function wholeNumber(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw configError(
      option,
      `${option} must be a whole number from ${min} to ${max}, got ${String(value)}.`,
    );
  }
  return value;
}

function headerName(option: string, value: unknown): string {
  if (typeof value !== 'string' || !TOKEN.test(value)) {
    throw configError(option, `${option} must be a header name, got ${String(value)}.`);
  }
  return value;
}

/** The request body, read once and bounded; null when the request has none. */
async function readBody(request: Request, max: number): Promise<Uint8Array | null | 'too-large'> {
  if (request.body === null) return null;
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (declared > max) {
    await request.body.cancel().catch(() => {});
    return 'too-large';
  }
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      return 'too-large';
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/**
 * The request again, with the body already read: of the request's own class when it can be
 * built that way (Next.js's `NextRequest` keeps `nextUrl` and `cookies`), else a `Request`.
 */
function withBody<R extends Request>(request: R, body: Uint8Array | null): R {
  // A body-less request was not read: it is passed on as it is.
  if (body === null) return request;
  const Ctor = request.constructor as new (input: Request, init: RequestInit) => R;
  if (Ctor !== Request) {
    try {
      const copy = new Ctor(request, { body });
      if (copy instanceof Request) return copy;
    } catch {
      // Not constructible as (request, init): a plain Request below.
    }
  }
  return new Request(request, { body }) as R;
}

const isResponse = (value: unknown): value is Response =>
  value instanceof Response ||
  (value !== null &&
    typeof value === 'object' &&
    typeof (value as Response).status === 'number' &&
    (value as Response).headers instanceof Headers);

function keyRules(maxKeyLength: number): string {
  return `an RFC 8941 String ("...", as the IETF draft says) or a raw key (Stripe's form: printable ASCII without spaces, quotes, backslashes, commas or semicolons), 1 to ${maxKeyLength} characters; a UUID is a good key`;
}

function hours(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : `${ms / 1000} s`;
}

/** The problem for an error of the executor (nothing here comes from the handler itself). */
function problemFor(error: unknown, policy: IdempotencyPolicy, retryAfter: number): Problem {
  if (DriftError.isInstance(error)) {
    return {
      status: 422,
      code: 'idempotency_key_reused',
      title: 'Idempotency-Key is already used',
      detail: `This ${policy.header} was already used for a different request (another method, path, query, content type or body). Nothing ran. Send the original request to get its response, or use a new key for a new request.`,
    };
  }
  if (InProgressError.isInstance(error)) {
    return {
      status: 409,
      code: 'request_in_progress',
      title: 'A request is outstanding for this Idempotency-Key',
      detail: `A request with this ${policy.header} is still being processed. Nothing ran again. Retry the same request with the same key after ${retryAfter} s to get its response.`,
      retryAfter,
    };
  }
  if (OutcomeUnknownError.isInstance(error)) {
    return {
      status: 500,
      code: 'outcome_unknown',
      title: 'The outcome of the first request is unknown',
      detail: `An earlier request with this ${policy.header} started and never finished (the server stopped mid-way): its effect may or may not have happened. It was not run again. Check whether it took effect before sending it with a new key.`,
    };
  }
  if (StoreUnavailableError.isInstance(error)) {
    return {
      status: 503,
      code: 'store_unavailable',
      title: 'Idempotency store unavailable',
      detail: `The server cannot check this ${policy.header} now, so the request did not run. Retry the same request with the same key later.`,
      retryAfter,
    };
  }
  if (
    ReplayedFailureError.isInstance(error) &&
    error.originalName !== 'ResponseReadError' &&
    error.originalName !== 'PersistFailedError'
  ) {
    return {
      status: 500,
      code: 'request_failed',
      title: 'The first request with this Idempotency-Key failed',
      detail: `The request with this ${policy.header} failed on the server after it started (${error.originalName}), so its effect may have happened. It is not run again under this key. Check whether it took effect before sending it with a new key.`,
    };
  }
  if (PersistFailedError.isInstance(error) || ReplayedFailureError.isInstance(error)) {
    return {
      status: 500,
      code: 'outcome_not_stored',
      title: 'The response could not be stored',
      detail: `The request with this ${policy.header} was processed, but its response could not be stored, so it cannot be replayed. Do not send it again with a new key before checking whether it took effect.`,
    };
  }
  if (RecordIntegrityError.isInstance(error)) {
    return {
      status: 500,
      code: 'record_integrity',
      title: 'The stored response failed its integrity check',
      detail: `The stored response for this ${policy.header} cannot be read, so it is not replayed and the request did not run again. Do not retry; contact the API's operator.`,
    };
  }
  return {
    status: 500,
    code: 'server_misconfigured',
    title: 'Idempotency misconfigured on the server',
    detail: `The server could not process this ${policy.header} (${(error as Error).message}). Nothing ran. Contact the API's operator.`,
  };
}

/**
 * Serve a fetch-style handler (Hono, Next.js route handlers, Bun, Deno, Node with a fetch
 * adapter) with the `Idempotency-Key` rules of the IETF HTTPAPI draft: a POST or PATCH carrying a
 * key runs once per client and key; a retry gets the stored response (status, headers, body)
 * with `Idempotent-Replayed: true`; the same key with another request is 422, while the first is
 * running 409 with `Retry-After`, without a key 400. Error responses are RFC 9457 problems.
 *
 * ```ts
 * export const POST = idempotentHandler(createTicket, {
 *   store,
 *   scope: (request) => apiKeyId(request.headers.get('authorization')),
 * });
 * ```
 *
 * @throws ConfigurationError at wrap time: `scope` missing, a misspelt or bad option
 */
export function idempotentHandler<R extends Request = Request, Rest extends unknown[] = []>(
  handler: (request: R, ...rest: Rest) => Response | Promise<Response>,
  options: IdempotentHandlerOptions<R>,
): IdempotentRequestHandler<R, Rest> {
  if (typeof handler !== 'function') {
    throw configError('handler', 'the first argument must be the handler, (request) => Response.');
  }
  if (options === null || typeof options !== 'object') {
    throw configError(
      'scope',
      'pass options: idempotentHandler(handler, { store, scope: (request) => clientId }).',
    );
  }
  const unknown = unknownOption(options, OPTION_NAMES);
  if (unknown !== undefined) throw configError(unknown.name, `${unknown.message}.`);
  const { scope } = options;
  if (scope !== SHARED_SCOPE && typeof scope !== 'function') {
    throw configError(
      'scope',
      `scope is required: (request) => the client's identity (API key id, user, tenant), so that the same key from two clients never replays one client's response to the other. A server with a single client may pass scope: '${SHARED_SCOPE}' (every client shares one key space).`,
    );
  }
  if ((options.store === undefined) === (options.idempotency === undefined)) {
    throw configError(
      options.store === undefined ? 'store' : 'idempotency',
      'pass either store (e.g. createMemoryStore()) or idempotency (an executor of your own), not both.',
    );
  }
  const methods = (options.methods ?? ['POST', 'PATCH']).map((m) =>
    headerName('methods', m).toUpperCase(),
  );
  if (methods.length === 0) throw configError('methods', 'methods must name at least one method.');
  const required = options.required ?? true;
  if (typeof required !== 'boolean') throw configError('required', 'required must be a boolean.');
  const header = headerName('header', options.header ?? 'Idempotency-Key');
  const replayHeader = headerName('replayHeader', options.replayHeader ?? 'Idempotent-Replayed');
  const maxKeyLength = wholeNumber('maxKeyLength', options.maxKeyLength ?? 255, 1, MAX_KEY_LENGTH);
  const maxBodyBytes = wholeNumber(
    'maxBodyBytes',
    options.maxBodyBytes ?? 10 * 1024 * 1024,
    0,
    MAX_RESPONSE_BYTES,
  );
  const maxResponseBytes = wholeNumber(
    'maxResponseBytes',
    options.maxResponseBytes ?? 1024 * 1024,
    0,
    MAX_RESPONSE_BYTES,
  );
  const retryAfter = wholeNumber('retryAfter', options.retryAfter ?? 1, 0, 86_400);
  const { retryable, documentation, waitTimeout } = options;
  if (retryable !== undefined && typeof retryable !== 'function') {
    throw configError('retryable', 'retryable must be a function (response) => boolean.');
  }
  if (documentation !== undefined && !URL.canParse(documentation)) {
    throw configError(
      'documentation',
      `documentation must be an absolute URL, got ${documentation}.`,
    );
  }
  const name = options.name ?? 'http';
  const idempotency =
    options.idempotency ??
    createIdempotency({
      store: options.store as IdempotencyStore,
      // Base64 of the body, and room for the status and headers.
      maxResultBytes: Math.ceil(maxResponseBytes / 3) * 4 + 64 * 1024,
    });

  type Args = { idempotencyKey: string; request: RequestFingerprint };
  const policy: ToolPolicy<Args, StoredResponse> = {
    businessKey: (args) => args.idempotencyKey,
    onDrift: 'reject',
    onInProgress: waitTimeout === undefined ? 'reject' : 'wait',
    ...(waitTimeout === undefined ? {} : { waitTimeout }),
    // Always set, so the published expiry is this one whatever the executor's default.
    ttl: options.ttl ?? DEFAULTS.ttl,
    // Pinned whatever the given executor's defaults (they may suit its tools, not this handler):
    // a store outage refuses the request (never runs it unguarded), a request whose server died
    // mid-way is outcome-unknown (never run again), and once the handler started, whatever it
    // throws (after committing a row, say), or a response that cannot be read, is kept as the
    // outcome: a retry is answered from it and never runs the handler again. A handler that
    // knows nothing happened throws `new NotAnOutcome(response)` to free the key.
    onStoreUnavailable: 'fail-closed',
    onStale: 'outcome-unknown',
    vendorDedupes: false,
    onToolError: 'keep',
    isTerminalError: () => true,
  };
  try {
    idempotency.checkPolicy(policy as unknown as ToolPolicy<never, never>);
    idempotency.keyOf({ toolName: name, args: {} }, { businessKey: () => 'k' });
  } catch (error) {
    const field = InvalidInputError.isInstance(error) ? error.field : 'name';
    throw configError(field === 'toolName' ? 'name' : field, (error as Error).message, error);
  }
  const described: IdempotencyPolicy = Object.freeze({
    header,
    methods: Object.freeze([...methods]),
    required,
    ttl: policy.ttl as number,
    maxKeyLength,
    maxBodyBytes,
    maxResponseBytes,
    replayHeader,
    waitTimeout,
    documentation,
  });
  const problem = (p: Problem) => problemResponse(p, documentation);

  const wrapped = async (request: R, ...rest: Rest): Promise<Response> => {
    if (!methods.includes(request.method.toUpperCase())) return handler(request, ...rest);
    const raw = request.headers.get(header);
    if (raw === null) {
      if (!required) return handler(request, ...rest);
      return problem({
        status: 400,
        code: 'idempotency_key_missing',
        title: 'Idempotency-Key is missing',
        detail: `This operation is idempotent and requires the ${header} header: ${keyRules(maxKeyLength)}. Keys are kept ${hours(described.ttl)}. Send one unique key per operation, and the same key on every retry of it.`,
      });
    }
    const parsed = parseIdempotencyKey(raw, maxKeyLength);
    if (!parsed.ok) {
      return problem({
        status: 400,
        code: 'idempotency_key_invalid',
        title: 'Idempotency-Key is invalid',
        detail: `The ${header} header is not a valid key: ${parsed.reason}. Send ${keyRules(maxKeyLength)}. Nothing ran.`,
      });
    }
    const body = await readBody(request, maxBodyBytes);
    if (body === 'too-large') {
      return problem({
        status: 413,
        code: 'request_too_large',
        title: 'Request body too large',
        detail: `The request body is over ${maxBodyBytes} bytes, the most this server reads for an idempotent request. Nothing ran.`,
      });
    }
    let client: string | undefined;
    if (scope !== SHARED_SCOPE) {
      client = await scope(withBody(request, body));
      if (client !== undefined && typeof client !== 'string') {
        throw configError(
          'scope',
          `scope returned ${typeof client}; return a string or undefined.`,
        );
      }
      if (client === undefined || client === '') {
        return problem({
          status: 403,
          code: 'client_unidentified',
          title: 'Client not identified',
          detail: `This server keeps ${header} per client, and this request does not say which client sent it (authenticate it). Nothing ran.`,
        });
      }
    }
    const url = new URL(request.url);
    const args: Args = {
      idempotencyKey: parsed.key,
      request: {
        method: request.method.toUpperCase(),
        path: url.pathname,
        query: url.search,
        contentType: request.headers.get('content-type'),
        body: sha256OfBytes(body ?? new Uint8Array()),
      },
    };
    const fresh = withBody(request, body);
    let live: Response | undefined;
    let thrown: { error: unknown } | undefined;
    const run = async (): Promise<StoredResponse> => {
      try {
        const response = await handler(fresh, ...rest);
        if (!isResponse(response)) {
          throw new TypeError(
            `idempotentHandler: the handler returned ${typeof response}, not a Response.`,
          );
        }
        if (retryable?.(response) === true) throw new NotAnOutcome(response);
        let captured: Awaited<ReturnType<typeof captureResponse>>;
        try {
          captured = await captureResponse(response, maxResponseBytes, replayHeader);
        } catch (cause) {
          // The handler returned: its effect happened. A body that fails to read is stored as a
          // failure (a retry gets 500 outcome_not_stored), never released to run again.
          throw new ResponseReadError(cause);
        }
        live = captured.live;
        return captured.stored;
      } catch (error) {
        if (!NotAnOutcome.isInstance(error)) thrown = { error };
        throw error;
      }
    };
    try {
      const result = await idempotency.run({ toolName: name, scope: client, args }, run, policy);
      if (!result.replayed && live !== undefined) return live;
      if (!isStoredResponse(result.value)) {
        throw new TypeError(
          `idempotentHandler: the record of this ${header} is not a stored response (another tool wrote under the name '${name}'?).`,
        );
      }
      return replayResponse(result.value, replayHeader);
    } catch (error) {
      // The handler's own errors reach the framework as they are (its error page, its logs).
      if (thrown !== undefined && error === thrown.error) throw error;
      if (NotAnOutcome.isInstance(error)) return error.value as Response;
      if (error instanceof TypeError) throw error;
      return problem(problemFor(error, described, retryAfter));
    }
  };
  return Object.assign(wrapped, { policy: described });
}

/** The body of a response the handler returned could not be read (its effect happened). */
class ResponseReadError extends Error {
  constructor(cause: unknown) {
    super(
      `idempotentHandler: the handler's response body could not be read: ${String((cause as Error)?.message ?? cause)}`,
      { cause },
    );
    this.name = 'ResponseReadError';
  }
}

/** What makes two requests with one key the same request. */
export interface RequestFingerprint {
  method: string;
  /** The path as sent (percent-encoding kept). */
  path: string;
  /** The query string as sent, with its `?`; `''` when there is none. */
  query: string;
  contentType: string | null;
  /** SHA-256 of the body bytes, base64url. */
  body: string;
}
