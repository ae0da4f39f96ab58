/**
 * Write contention: `CALLS` fresh calls (each a claim and a complete: two writes), all at once,
 * then a replay of each. Prints `{ executed, replayed, errors }` as one JSON line.
 */
import { createIdempotency, IdempotencyError } from '../index.js';
import { createStore } from './worker-store.js';

const calls = Number(process.env.CALLS ?? '250');
const startAt = Number(process.env.START_AT ?? '0');
const { store, close } = await createStore();
const idempotency = createIdempotency({ store });
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));

const errors: string[] = [];
const counts = { executed: 0, replayed: 0 };
const turns = Array.from({ length: calls }, () => `turn-${crypto.randomUUID()}`);
const call = async (turnId: string) => {
  try {
    const result = await idempotency.run(
      { toolName: 'load', turnId, args: { turnId } },
      async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return turnId;
      },
    );
    if (result.value !== turnId) errors.push(`wrong value for ${turnId}`);
    counts[result.replayed ? 'replayed' : 'executed']++;
  } catch (error) {
    errors.push(
      IdempotencyError.isInstance(error) ? `${error.code}: ${error.message}` : String(error),
    );
  }
};
await Promise.all(turns.map(call));
await Promise.all(turns.map(call));
process.stdout.write(`${JSON.stringify({ ...counts, errors })}\n`);
await close();
