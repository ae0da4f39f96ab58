/**
 * `node --import ./clock-preload.ts worker.ts`: this process's `Date.now` runs `offset` ms from
 * the machine's clock, stepped at run time by the harness (IPC `{ type: 'clock', offsetMs }`).
 * For the stores on the client's clock (SQLite, DynamoDB; PGlite's WASM PostgreSQL reads it
 * too): the machine's own clock is never touched. Monotonic clocks (`performance.now`, which
 * leases count on) are not shifted, as a real wall-clock step leaves them alone.
 */
const realNow = Date.now;
let offset = 0;
Date.now = () => realNow() + offset;
// The checker's own stamps (journal, vendor headers) stay on the machine's clock.
(globalThis as { __chaosRealNow?: () => number }).__chaosRealNow = realNow;
process.on('message', (message: { type?: string; offsetMs?: number }) => {
  if (message?.type === 'clock' && typeof message.offsetMs === 'number') offset = message.offsetMs;
});
