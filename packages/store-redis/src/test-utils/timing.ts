/**
 * Test-only helpers for clauses that involve real time, so that their verdict never depends on
 * how fast the machine is: wait for a condition instead of sleeping and hoping, prove where a
 * wake-up came from instead of timing it, and run a clause that needs a window of real time
 * again with longer durations when a loaded machine slept past it.
 */
import { TIMER_SLACK_MS, waitFor } from '@idempotent-tools/testing';
import type { Redis } from 'ioredis';
import { expect } from 'vitest';

/** Subscribers of a sharded channel (`PUBSUB SHARDNUMSUB`) on a single node. */
export async function shardSubscribers(redis: Redis, channel: string): Promise<number> {
  return ((await redis.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1];
}

// The `settled` looks of a waiter (the store reads the record's state with one `GETRANGE key 0 0`
// once its subscription is live) are recorded per client family: `TestDriver.recordSettledLooks`.
//
// A waiter wakes on its timer (`maxWaitMs`, its timeout), on that look finding the record
// finished, on a message, or when its subscriber connection drops. Once the look has answered
// "still running", a wake-up before `maxWaitMs` that made no second look can only be the message:
// that proves the push, on any machine, where a "woke within N ms" check proves nothing.

/**
 * Start `waiter.waitForChange(key, maxWaitMs)`, let it subscribe and look at the record (still
 * running), make the `change`, and prove that the message woke it: before its `maxWaitMs` timer
 * could (the store's `maxWaitMs` must be the one given), without a second look. `looks` records
 * the waiter's client (`TestDriver.recordSettledLooks`). Returns the ms from the change to the wake-up, to
 * log: how fast is the machine's business, what woke the waiter is the test's.
 */
export async function expectWokenByPush(options: {
  waiter: { waitForChange?: ((key: string, timeoutMs: number) => Promise<void>) | undefined };
  looks: Promise<string>[];
  key: string;
  maxWaitMs: number;
  change: () => Promise<unknown>;
}): Promise<number> {
  const { waiter, looks, key, maxWaitMs, change } = options;
  const before = looks.length;
  const waitStarted = performance.now();
  let woken = false;
  const waiting = waiter.waitForChange!(key, maxWaitMs).then(() => {
    woken = true;
  });
  await waitFor('the waiter to subscribe and look at the record', () => looks.length > before);
  expect(await looks[before]).toBe('P'); // still running: the look did not end the wait
  expect(woken).toBe(false);
  const changedAt = performance.now();
  await change();
  await waiting;
  const wokeAt = performance.now();
  expect(looks.length).toBe(before + 1);
  // Its timer fires maxWaitMs after the wait began at the earliest: sooner, it was the message.
  expect(wokeAt - waitStarted).toBeLessThan(maxWaitMs - TIMER_SLACK_MS);
  return wokeAt - changedAt;
}
