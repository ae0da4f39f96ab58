/**
 * A Restate service (`shop.checkout`) served by this process on `PORT`: it charges the vendor at
 * `VENDOR` inside `idempotentRun` (or a plain `ctx.run` with `PLAIN=1`, the control), with the
 * SQLite store at `DB`. `CRASH=after-effect` kills this process right after the vendor answered
 * (before the store or Restate recorded anything); `CRASH=after-persist` right after the store
 * recorded the outcome, before Restate did. Only the first time (the file `MARK`): the attempt
 * Restate retries in the next process goes through.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import * as restate from '@restatedev/restate-sdk';
import {
  createIdempotency,
  type ExecutionContext,
  idempotencyHeaders,
  idempotentRun,
} from '../index.js';

const env = process.env;
const crashOnce = (at: string) => {
  if (env.CRASH !== at || existsSync(env.MARK as string)) return;
  writeFileSync(env.MARK as string, at);
  process.kill(process.pid, 'SIGKILL');
};

const store = openSqliteStore(env.DB as string);
const complete = store.complete.bind(store);
store.complete = async (...args) => {
  const done = await complete(...args);
  crashOnce('after-persist');
  return done;
};
const idempotency = createIdempotency({ store, lease: 1_000 });

interface Charge {
  id: string;
  key: string;
  amount: number;
}

async function charge(amount: number, headers: Record<string, string>): Promise<Charge> {
  const res = await fetch(`${env.VENDOR}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ amount }),
  });
  const made = (await res.json()) as Charge;
  crashOnce('after-effect');
  return made;
}

const policy = {
  ...(env.RECONCILE === '1'
    ? {
        reconcile: async ({ key }: { key: string }) => {
          const res = await fetch(`${env.VENDOR}/charges?key=${encodeURIComponent(key)}`);
          const found = (await res.json()) as Charge | null;
          return found === null
            ? { found: false as const }
            : { found: true as const, value: found };
        },
      }
    : {}),
  ...(env.REEXECUTE === '1' ? { onStale: 'reexecute' as const, vendorDedupes: true } : {}),
};

const shop = restate.service({
  name: 'shop',
  handlers: {
    checkout: async (ctx: restate.Context, order: { amounts: number[] }): Promise<Charge[]> => {
      const made: Charge[] = [];
      for (const amount of order.amounts) {
        made.push(
          env.PLAIN === '1'
            ? // What Restate's docs suggest: the invocation id (+ the step) as the vendor's key.
              await ctx.run('charge', () =>
                charge(amount, { 'Idempotency-Key': `${ctx.request().id}:charge` }),
              )
            : await idempotentRun(
                ctx,
                idempotency,
                'charge',
                (exec: ExecutionContext) => charge(amount, idempotencyHeaders(exec)),
                policy,
              ),
        );
      }
      return made;
    },
  },
});

restate.serve({ services: [shop], port: Number(env.PORT) });
