import type { PubSub, PubSubEvents } from './driver.js';

/** Waiters of one channel, and its subscription (resolves false when subscribing failed). */
interface Entry {
  channel: string;
  waiters: Set<() => void>;
  subscribed: Promise<boolean>;
}

/** Retry delay for a waiter whose subscription failed: it looks again soon, without spinning. */
const RESUBSCRIBE_MS = 50;

export interface NotifierOptions {
  /** Returns the connection for pub/sub, wired to `events` (created lazily; the store decides who closes it). */
  subscriber: (events: PubSubEvents) => PubSub;
  /** True when the record is finished (a waiter may stop waiting before any message). */
  settled: (key: string) => Promise<boolean>;
  maxWaitMs: number;
}

/**
 * Cross-process wake-ups: one subscription per waited-on key and process, shared by every waiter
 * of the key, dropped when the last one leaves. Pub/sub is at-most-once, so a waiter also checks
 * the record once its subscription is live (a change between the caller's claim and the
 * subscription would otherwise be missed), never sleeps longer than `maxWaitMs`, and is woken when
 * the subscriber's connection drops or comes back (messages sent meanwhile are lost).
 *
 * A channel's subscribe and unsubscribe are sent one after the other, each once the one before
 * it was answered. Clients keep their own idea of what is subscribed, and node-redis's goes
 * wrong when they overlap: a waiter that gave up while its `SSUBSCRIBE` was on the way sends
 * `SUNSUBSCRIBE`, the next waiter's subscribe finds the first one's listener (answered
 * meanwhile) and sends nothing, then the `SUNSUBSCRIBE` lands: the server has no subscription
 * and every message is lost until the waiter's timer (under load, every waiter of a storm).
 */
export class Notifier {
  readonly #options: NotifierOptions;
  readonly #entries = new Map<string, Entry>();
  /** The last subscribe or unsubscribe sent per channel, settled or not. */
  readonly #sent = new Map<string, Promise<unknown>>();
  #subscriber: PubSub | undefined;
  #closed = false;

  constructor(options: NotifierOptions) {
    this.#options = options;
  }

  wait(key: string, channel: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const { maxWaitMs, settled } = this.#options;
    if (signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.#closed) {
        setTimeout(resolve, timeoutMs);
        return;
      }
      const entry = this.#entry(channel);
      const timers: NodeJS.Timeout[] = [];
      const done = () => {
        for (const timer of timers) clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        if (!entry.waiters.delete(done)) return;
        if (entry.waiters.size === 0 && this.#entries.get(channel) === entry) {
          this.#entries.delete(channel);
          this.#unsubscribe(channel);
        }
        resolve();
      };
      entry.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
      timers.push(setTimeout(done, Math.min(timeoutMs, maxWaitMs)));
      entry.subscribed.then((ok) => {
        if (!entry.waiters.has(done)) return;
        if (!ok) {
          timers.push(setTimeout(done, Math.min(timeoutMs, RESUBSCRIBE_MS)));
          return;
        }
        settled(key).then(
          (yes) => yes && done(),
          () => done(), // The store is unreachable: let the caller claim again and see it.
        );
      });
    });
  }

  /** Wake every waiter and drop the subscriber. The store closes it when it created it. */
  close(): PubSub | undefined {
    this.#closed = true;
    this.#wakeAll();
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    return subscriber;
  }

  #entry(channel: string): Entry {
    const existing = this.#entries.get(channel);
    if (existing !== undefined) return existing;
    const subscriber = this.#connect();
    const command = this.#inTurn(channel, () => subscriber.subscribe(channel));
    const entry: Entry = {
      channel,
      waiters: new Set(),
      subscribed: command.then(
        () => true,
        () => {
          // Let the next waiter try again.
          if (this.#entries.get(channel) === entry) this.#entries.delete(channel);
          return false;
        },
      ),
    };
    this.#entries.set(channel, entry);
    return entry;
  }

  #unsubscribe(channel: string): void {
    const subscriber = this.#subscriber;
    if (subscriber === undefined) return;
    this.#inTurn(channel, () => subscriber.unsubscribe(channel)).catch(() => {
      // Gone with the connection; a resubscription after a reconnect only costs a spare message.
    });
  }

  /** Send `command` for `channel` once the one sent before it for the channel was answered. */
  #inTurn(channel: string, command: () => Promise<unknown>): Promise<unknown> {
    const before = this.#sent.get(channel);
    const sent = before === undefined ? command() : before.then(command, command);
    const settled = sent.then(
      () => {},
      () => {},
    );
    this.#sent.set(channel, settled);
    settled.then(() => {
      if (this.#sent.get(channel) === settled) this.#sent.delete(channel);
    });
    return sent;
  }

  #connect(): PubSub {
    if (this.#subscriber !== undefined) return this.#subscriber;
    // Messages published while the subscriber is away are lost: the driver resets (every
    // waiter wakes: they claim again, and fail fast if Redis is down) when its connection drops
    // and when it is back.
    this.#subscriber = this.#options.subscriber({
      message: (payload) => this.#wake(payload),
      reset: () => this.#wakeAll(),
    });
    return this.#subscriber;
  }

  /** The payload is the channel name as the store knows it (without the client's keyPrefix). */
  #wake(channel: string): void {
    const entry = this.#entries.get(channel);
    if (entry !== undefined) for (const done of [...entry.waiters]) done();
  }

  #wakeAll(): void {
    for (const entry of [...this.#entries.values()]) {
      for (const done of [...entry.waiters]) done();
    }
  }
}
