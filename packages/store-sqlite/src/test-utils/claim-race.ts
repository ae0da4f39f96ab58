/**
 * Raw claim race: claim `KEYS` keys (`key-0` ... in order) as fast as possible from `START_AT`,
 * print the keys this process acquired as one JSON line.
 */
import { randomUUID } from 'node:crypto';
import { createStore } from './worker-store.js';

const keys = Number(process.env.KEYS ?? '500');
const startAt = Number(process.env.START_AT ?? '0');
const { store, close } = await createStore();
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
const acquired: string[] = [];
for (let i = 0; i < keys; i++) {
  const key = `key-${i}`;
  const result = await store.claim({
    key,
    fingerprint: 'fp',
    token: randomUUID(),
    leaseMs: 60_000,
    ttlMs: 60_000,
  });
  if (result.status === 'acquired') acquired.push(key);
}
process.stdout.write(`${JSON.stringify({ acquired })}\n`);
await close();
