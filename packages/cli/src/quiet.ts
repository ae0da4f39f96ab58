/**
 * On Node 22, loading `node:sqlite` prints `ExperimentalWarning: SQLite is an experimental
 * feature and might change at any time` (Node 24 does not): noise the CLI's user did not ask for.
 * Drop that one warning; every other warning is printed as usual.
 */
export function quietSqliteWarning(): void {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const options = rest[0];
    const type =
      typeof options === 'string'
        ? options
        : typeof options === 'object' && options !== null && 'type' in options
          ? (options as { type?: unknown }).type
          : typeof warning === 'string'
            ? undefined
            : warning.name;
    const text = typeof warning === 'string' ? warning : warning.message;
    if (type === 'ExperimentalWarning' && /^SQLite is an experimental feature/.test(text)) return;
    return Reflect.apply(emitWarning, process, [warning, ...rest]);
  } as typeof process.emitWarning;
}
