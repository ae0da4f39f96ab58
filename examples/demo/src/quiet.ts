/**
 * Node 22 prints `ExperimentalWarning: SQLite is an experimental feature and might change at any
 * time` when `node:sqlite` loads (Node 24 does not). The demo's `start` script and the processes
 * it spawns pass `--disable-warning=ExperimentalWarning`; the root `pnpm demo` runs this file
 * with plain `tsx`, so the demo drops that one warning itself, before anything opens SQLite (the
 * store loads `node:sqlite` on first use). Every other warning is printed as usual.
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
