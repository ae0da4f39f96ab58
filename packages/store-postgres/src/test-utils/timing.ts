/**
 * Test-only helpers for clauses that involve real time, so that their verdict never depends on
 * how fast the machine is: wait for a condition instead of sleeping and hoping, and prove where
 * a wake-up came from instead of timing it.
 */
import { TIMER_SLACK_MS, waitFor } from '@idempotent-tools/testing';
import { expect } from 'vitest';
import type { PgQueryResult } from '../change-listener.js';
import { detectDriver } from '../resolve-driver.js';

/** One statement sent through `query(config)`, and its reply. */
export interface SentStatement {
  text: string;
  reply: Promise<PgQueryResult>;
}

/**
 * Record the statements sent through a client from now on: `db.query(config)` of a `pg.Pool`, a
 * `pg.Client` or a wrapper; `sql.unsafe(text, ...)` of postgres.js; `db.query(text, ...)` of
 * PGlite (its method is replaced by one that notes them). Returns the list, in order, each reply
 * as `{ rows, rowCount }`.
 */
export function recordStatements(db: unknown): SentStatement[] {
  const sent: SentStatement[] = [];
  const target = db as Record<string, unknown>;
  const method = detectDriver(db) === 'postgres.js' ? 'unsafe' : 'query';
  const original = (target[method] as (...args: unknown[]) => unknown).bind(db);
  target[method] = (...args: unknown[]) => {
    const result = original(...args);
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: unknown })?.text;
    if (typeof text === 'string' && result !== null && typeof result === 'object') {
      const reply = Promise.resolve(result as PromiseLike<unknown>).then((r) =>
        Array.isArray(r)
          ? {
              rows: [...r] as Record<string, unknown>[],
              rowCount: (r as { count?: number }).count ?? null,
            }
          : (r as PgQueryResult),
      );
      reply.catch(() => {});
      sent.push({ text, reply });
    }
    return result;
  };
  return sent;
}

/** The waiter's look at the record (after it listens and flags the row): `... AS running`. */
export const isLook = (statement: SentStatement) => /\bAS running\b/.test(statement.text);

/**
 * Start `waiter.waitForChange(key, timeoutMs)`, let it listen, flag the row and look at it (still
 * running), make the `change`, and prove that the NOTIFY woke it: before its timeout, without a
 * second look. `sent` records the waiter's statements (`recordStatements`). Returns the ms from
 * the change to the wake-up, to log.
 *
 * A waiter wakes on its timer, on its look finding the record changed, on a NOTIFY, or when its
 * LISTEN connection is lost. Once the look answered "running", an early wake-up with no second
 * look is the NOTIFY: that holds on any machine, where "woke within N ms" does not.
 */
export async function expectWokenByNotify(options: {
  waiter: { waitForChange?: ((key: string, timeoutMs: number) => Promise<void>) | undefined };
  sent: SentStatement[];
  key: string;
  timeoutMs: number;
  change: () => Promise<unknown>;
}): Promise<number> {
  const { waiter, sent, key, timeoutMs, change } = options;
  const before = sent.length;
  const looks = () => sent.slice(before).filter(isLook);
  const waitStarted = performance.now();
  let woken = false;
  const waiting = waiter.waitForChange!(key, timeoutMs).then(() => {
    woken = true;
  });
  await waitFor('the waiter to listen, flag the row and look at it', () => looks().length > 0);
  const look = await looks()[0]!.reply;
  expect(look.rows[0]?.running).toBe(true); // still running: the look did not end the wait
  expect(woken).toBe(false);
  const changedAt = performance.now();
  await change();
  await waiting;
  const wokeAt = performance.now();
  expect(looks()).toHaveLength(1);
  // Its timer fires timeoutMs after the wait began at the earliest: sooner, it was the NOTIFY.
  expect(wokeAt - waitStarted).toBeLessThan(timeoutMs - TIMER_SLACK_MS);
  return wokeAt - changedAt;
}
