/**
 * For adapters of a tool server that clients call over HTTP and connect to (MCP's `McpServer`):
 * a header of a call's HTTP request, whichever shape the server hands it in, and a process
 * warning to the developer given once (per client, say) however often the cause recurs.
 */

/** A request's headers as servers hand them: Fetch `Headers`, or Node's header record. */
export type RequestHeaders = { get(name: string): string | null } | Record<string, unknown>;

/**
 * A header of a request, by a name in any case (repeated values joined by `, `).
 * @returns undefined when the request has no such header, or there is no request
 */
export function requestHeader(
  headers: RequestHeaders | undefined,
  name: string,
): string | undefined {
  const value =
    typeof headers?.get === 'function'
      ? headers.get(name)
      : (headers as Record<string, unknown> | undefined)?.[name.toLowerCase()];
  if (Array.isArray(value)) return value.join(', ');
  return typeof value === 'string' ? value : undefined;
}

const warned = new Set<string>();

/**
 * A process warning with `code`, given once per `code` and `key` in this process (nothing where
 * the runtime has no `process.emitWarning`).
 */
export function warnOnce(code: string, key: string, message: string): void {
  const id = JSON.stringify([code, key]);
  if (warned.has(id)) return;
  warned.add(id);
  (
    globalThis as { process?: { emitWarning?: (m: string, o: object) => void } }
  ).process?.emitWarning?.(message, { code });
}
