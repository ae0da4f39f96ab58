/**
 * The agent's tool as a Restate service, served by this process on `PORT`: `agent.refund` pays
 * a refund at the bank (`BANK`, an HTTP API that takes an `Idempotency-Key`) inside
 * `idempotentRun`, or inside a plain `ctx.run` when `PLAIN=1` (the comparison). With
 * `CRASH_ONCE=<file>` the process kills itself (SIGKILL) the first time, after the refund was
 * paid (and, in idempotentRun, its outcome stored) and before Restate recorded the run: Restate retries the run in
 * the process started again.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { idempotencyHeaders, idempotentRun } from '@idempotent-tools/restate';
import { createIdempotency, openSqliteStore } from '@idempotent-tools/store-sqlite';
import * as restate from '@restatedev/restate-sdk';

const { PORT, BANK, DB, CRASH_ONCE, PLAIN } = process.env;
const store = openSqliteStore(DB ?? '.demo-data/idempotency.sqlite');
const crashOnce = () => {
  if (!CRASH_ONCE || existsSync(CRASH_ONCE)) return;
  writeFileSync(CRASH_ONCE, 'crashed');
  process.kill(process.pid, 'SIGKILL');
};
if (PLAIN !== '1') {
  // The crash point: the refund paid and its outcome stored, Restate not told yet.
  const complete = store.complete.bind(store);
  store.complete = async (...args) => {
    const done = await complete(...args);
    crashOnce();
    return done;
  };
}
const idempotency = createIdempotency({ store });

type Refund = { refundId: string; amount: number };

async function payRefund(amount: number, headers: Record<string, string>): Promise<Refund> {
  const res = await fetch(`${BANK}/refunds`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ amount }),
  });
  const refund = (await res.json()) as Refund;
  // The plain run dies right after the effect (it has nothing to store).
  if (PLAIN === '1') crashOnce();
  return refund;
}

const agent = restate.service({
  name: 'agent',
  handlers: {
    refund: async (ctx: restate.Context, request: { amount: number }) => {
      const refund =
        PLAIN === '1'
          ? await ctx.run('refund', () =>
              payRefund(request.amount, { 'Idempotency-Key': `${ctx.request().id}` }),
            )
          : await idempotentRun(ctx, idempotency, 'refund', (exec) =>
              payRefund(request.amount, idempotencyHeaders(exec)),
            );
      return { status: 'refunded', ...refund };
    },
  },
});

restate.serve({ services: [agent], port: Number(PORT) });
