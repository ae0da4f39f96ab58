import type { Listen, Subscription } from './driver.js';

export type {
  PgListenClient,
  PgNotification,
  PgOwnClient,
  PgPoolLike,
  PgQueryable,
  PgQueryConfig,
  PgQueryResult,
} from './drivers/pg.js';

/** How often a waiter polls while `LISTEN` cannot be set up. */
const FALLBACK_POLL_MS = 250;

interface Connection {
  /** Notifications may have been missed since (the driver said so). */
  lost: boolean;
  subscription: Subscription | undefined;
}

/**
 * The waiters of one store and the one `LISTEN` they share (the driver's: see `Listen`), started
 * on the first wait. Listened on again after it was lost, stopped by `close()`. Without a way to
 * listen, or while listening fails, waiters poll.
 */
export class ChangeListener {
  readonly #listenFn: Listen | undefined;
  readonly #channel: string;
  readonly #waiters = new Map<string, Set<() => void>>();
  #connection: Promise<Connection> | undefined;
  #active: Connection | undefined;
  #closed = false;

  constructor(listen: Listen | undefined, channel: string) {
    this.#listenFn = listen;
    this.#channel = channel;
  }

  /**
   * Resolve on a notification for `key`, on `close()`, or after `timeoutMs`. Once listening it
   * calls `changedAlready` (true: resolve now): a change that committed before `LISTEN` was
   * active sent no notification this connection could hear. Never rejects.
   */
  wait(
    key: string,
    timeoutMs: number,
    changedAlready: () => Promise<boolean>,
    signal?: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve) => {
      if (this.#closed || signal?.aborted) {
        resolve();
        return;
      }
      let set = this.#waiters.get(key);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(key, set);
      }
      const waiters = set;
      let settled = false;
      const done = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(key) === waiters) this.#waiters.delete(key);
        resolve();
      };
      let timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      waiters.add(done);
      if (this.#listenFn === undefined) return;
      const deadline = performance.now() + timeoutMs;
      this.#listen().then(
        async () => {
          if (settled) return;
          // A failed look means the database is in trouble: the caller's next claim says so.
          if (await changedAlready().catch(() => true)) done();
        },
        () => {
          // LISTEN is impossible right now (database down?): poll instead.
          if (settled) return;
          clearTimeout(timer);
          timer = setTimeout(done, Math.min(FALLBACK_POLL_MS, deadline - performance.now()));
        },
      );
    });
  }

  /** Wake every waiter and stop listening. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeAll();
    const pending = this.#connection;
    this.#connection = undefined;
    this.#active = undefined;
    if (pending === undefined) return;
    try {
      await (await pending).subscription?.stop();
    } catch {
      // It never started, or it stopped itself on seeing the store closed.
    }
  }

  #listen(): Promise<Connection> {
    if (this.#connection === undefined) {
      const starting = this.#start();
      this.#connection = starting;
      starting.catch(() => {
        if (this.#connection === starting) this.#connection = undefined;
      });
    }
    return this.#connection;
  }

  async #start(): Promise<Connection> {
    const listen = this.#listenFn;
    if (listen === undefined || this.#closed) throw new Error('not listening');
    const connection: Connection = { lost: false, subscription: undefined };
    const subscription = await listen(
      this.#channel,
      (key) => this.#wake(key),
      () => this.#lost(connection),
    );
    if (connection.lost) throw new Error('LISTEN connection lost');
    if (this.#closed) {
      await subscription.stop().catch(() => {});
      throw new Error('closed');
    }
    connection.subscription = subscription;
    this.#active = connection;
    return connection;
  }

  /** The listening connection failed: wake everyone (they claim again), listen anew next time. */
  #lost(connection: Connection): void {
    if (connection.lost) return;
    connection.lost = true;
    if (this.#active === connection) {
      this.#active = undefined;
      this.#connection = undefined;
    }
    this.#wakeAll();
  }

  #wake(key: string): void {
    const waiters = this.#waiters.get(key);
    if (waiters !== undefined) for (const done of [...waiters]) done();
  }

  #wakeAll(): void {
    for (const waiters of [...this.#waiters.values()]) for (const done of [...waiters]) done();
  }
}
