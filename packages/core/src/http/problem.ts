/**
 * The handler's error responses: RFC 9457 problem details (`application/problem+json`), shaped
 * as the IETF draft's examples (`type`, `title`, `detail`), with `status` and a stable `code`.
 */

/** The stable `code` of each problem `idempotentHandler` answers with. */
export type IdempotencyProblemCode =
  | 'idempotency_key_missing'
  | 'idempotency_key_invalid'
  | 'client_unidentified'
  | 'request_too_large'
  | 'idempotency_key_reused'
  | 'request_in_progress'
  | 'outcome_unknown'
  | 'outcome_not_stored'
  | 'request_failed'
  | 'record_integrity'
  | 'store_unavailable'
  | 'server_misconfigured';

/** Where the problem types are described when the server publishes no documentation of its own. */
export const PROBLEM_DOCS =
  'https://github.com/idempotent-tools/idempotent-tools/blob/main/packages/core/README.md';

export interface Problem {
  status: number;
  code: IdempotencyProblemCode;
  title: string;
  detail: string;
  /** Seconds, for 409 and 503. */
  retryAfter?: number | undefined;
}

/**
 * The problem as a response. `type` is `<documentation>#<code>` (the server's own idempotency
 * documentation, else this package's README); with `documentation`, a `Link: rel="describedby"`
 * points at it too, as the draft's examples show.
 */
export function problemResponse(problem: Problem, documentation: string | undefined): Response {
  const base = (documentation ?? PROBLEM_DOCS).split('#')[0];
  const headers = new Headers({
    'Content-Type': 'application/problem+json',
    'Content-Language': 'en',
    'Cache-Control': 'no-store',
  });
  if (documentation !== undefined) {
    headers.set('Link', `<${documentation}>; rel="describedby"; type="text/html"`);
  }
  if (problem.retryAfter !== undefined) headers.set('Retry-After', String(problem.retryAfter));
  const body = {
    type: `${base}#${problem.code.replaceAll('_', '-')}`,
    title: problem.title,
    status: problem.status,
    detail: problem.detail,
    code: problem.code,
  };
  return new Response(JSON.stringify(body), { status: problem.status, headers });
}
