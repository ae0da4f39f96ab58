import { describe, expect, test } from 'vitest';
import type { PubSub, PubSubEvents } from './driver.js';
import { Notifier } from './notifier.js';

/**
 * A subscriber connection whose answers the test gives, one command at a time: it records every
 * command sent and refuses (records as an overlap) one sent for a channel whose command before
 * it is not answered yet. node-redis keeps its own idea of what is subscribed, and loses the
 * subscription when a channel's commands overlap (see notifier.ts); on a loaded machine a
 * waiter's 50 ms first wait ends before its subscribe is answered, so they do.
 */
function scriptedSubscriber() {
  const sent: string[] = [];
  const overlaps: string[] = [];
  const unanswered = new Map<string, () => void>();
  let events: PubSubEvents | undefined;
  const command = (name: string) => (channel: string) => {
    sent.push(`${name} ${channel}`);
    if (unanswered.has(channel)) overlaps.push(`${name} ${channel}`);
    const { promise, resolve } = Promise.withResolvers<void>();
    unanswered.set(channel, () => {
      unanswered.delete(channel);
      resolve();
    });
    return promise;
  };
  const pubsub: PubSub = {
    subscribe: command('subscribe'),
    unsubscribe: command('unsubscribe'),
    close: () => {},
  };
  /** Answer the oldest command of `channel`, and let the notifier send its next one. */
  const answer = async (channel: string) => {
    const reply = unanswered.get(channel);
    if (reply === undefined) throw new Error(`nothing sent for ${channel} awaits an answer`);
    reply();
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  return {
    sent,
    overlaps,
    answer,
    connect: (given: PubSubEvents) => {
      events = given;
      return pubsub;
    },
    message: (channel: string) => events?.message(channel),
  };
}

describe('Notifier', () => {
  test("a channel's subscribe and unsubscribe never overlap: a waiter that gave up before its subscription was answered costs the next waiter nothing", async () => {
    const redis = scriptedSubscriber();
    const notifier = new Notifier({
      subscriber: redis.connect,
      settled: async () => false,
      // No timer wakes the second waiter within the test: only the message does.
      maxWaitMs: 2_000_000_000,
    });
    // The executor's capped first wait ends before the subscription is answered.
    await notifier.wait('k', 'ch', 1);
    expect(redis.sent).toEqual(['subscribe ch']);
    // The second wait (the whole lease) starts while the first subscribe is still on its way.
    let woken = false;
    const second = notifier.wait('k', 'ch', 2_000_000_000).then(() => {
      woken = true;
    });
    await redis.answer('ch'); // the first subscribe: now the first waiter's unsubscribe goes
    expect(redis.sent).toEqual(['subscribe ch', 'unsubscribe ch']);
    await redis.answer('ch'); // the unsubscribe: now the second waiter's subscribe goes
    expect(redis.sent).toEqual(['subscribe ch', 'unsubscribe ch', 'subscribe ch']);
    await redis.answer('ch');
    expect(redis.overlaps).toEqual([]);
    expect(woken).toBe(false);
    redis.message('ch');
    await second;
    expect(woken).toBe(true);
  });

  test('waiters of different channels are not held up by each other', async () => {
    const redis = scriptedSubscriber();
    const notifier = new Notifier({
      subscriber: redis.connect,
      settled: async () => false,
      maxWaitMs: 2_000_000_000,
    });
    const a = notifier.wait('a', 'ch-a', 2_000_000_000);
    const b = notifier.wait('b', 'ch-b', 2_000_000_000);
    expect(redis.sent).toEqual(['subscribe ch-a', 'subscribe ch-b']);
    await redis.answer('ch-b');
    redis.message('ch-b');
    await b;
    await redis.answer('ch-a');
    redis.message('ch-a');
    await a;
    expect(redis.overlaps).toEqual([]);
  });
});
