import { quoteIdent } from './schema.js';

/** One parameterised statement, as `pg` takes it. */
export interface PgQueryConfig {
  text: string;
  values?: unknown[];
  /** Name of a prepared statement (prepared once per connection). */
  name?: string;
}

/** The part of a `pg` result the store reads. */
export interface PgQueryResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** What the store needs of a `pg.Pool`, `pg.Client` or `PoolClient`: `query(config)`. */
export interface PgQueryable {
  query(config: PgQueryConfig): Promise<PgQueryResult>;
}

/** A `pg` notification (`LISTEN`/`NOTIFY`). */
export interface PgNotification {
  channel: string;
  payload?: string | undefined;
}

/** A connected `pg.Client` (or `PoolClient`) the store may `LISTEN` on. */
export interface PgListenClient extends PgQueryable {
  on(event: 'notification', listener: (message: PgNotification) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  removeListener(event: 'notification' | 'error' | 'end', listener: () => void): unknown;
}

/** A `pg.Client` that the store creates, connects and ends itself (the `LISTEN` connection). */
export interface PgOwnClient extends PgListenClient {
  connect(): Promise<unknown>;
  end(): Promise<void>;
}

/**
 * A `pg.Pool`. The store never holds one of its connections for `LISTEN`: it opens a client of
 * its own with the pool's `Client` class and settings (`pool.Client`, `pool.options`).
 */
export interface PgPoolLike extends PgQueryable {
  connect(): Promise<PgListenClient & { release(error?: Error | boolean): void }>;
  idleCount: number;
  /** pg-pool: the class of its clients. */
  Client?: new (
    options: unknown,
  ) => PgOwnClient;
  /** pg-pool: the settings it creates its clients with. */
  options?: unknown;
}

export function isPool(db: unknown): db is PgPoolLike {
  const d = db as Partial<PgPoolLike>;
  return typeof d.connect === 'function' && typeof d.idleCount === 'number';
}

export function isListenClient(db: unknown): db is PgListenClient {
  const d = db as Partial<PgListenClient>;
  return (
    typeof d.query === 'function' &&
    typeof d.on === 'function' &&
    typeof d.removeListener === 'function'
  );
}

/** How often a waiter polls while `LISTEN` cannot be set up. */
const FALLBACK_POLL_MS = 250;

interface Connection {
  client: PgListenClient;
  /** The connection failed or ended. */
  lost: boolean;
  detach: () => void;
  /** End the store's own client (opened for a pool); undefined for clients the user gave. */
  release: ((error?: Error) => void) | undefined;
}

/**
 * The waiters of one store and the one `LISTEN` connection they share: for a pool, a client of
 * the store's own opened with the pool's settings on the first wait (never one of the pool's
 * connections: a `LISTEN` held in a pool of `max: 1` would starve every query of the store); a
 * given client is listened on as it is. Listened on again after it fails, ended (or, when given,
 * unlistened) by `close()`. Without a source, or when the pool offers no way to open a client
 * (a pool-like without `Client` and `options`), waiters poll.
 */
export class ChangeListener {
  readonly #source: PgPoolLike | PgListenClient | undefined;
  readonly #channel: string;
  readonly #waiters = new Map<string, Set<() => void>>();
  #connection: Promise<Connection> | undefined;
  #active: Connection | undefined;
  #closed = false;

  constructor(source: PgPoolLike | PgListenClient | undefined, channel: string) {
    this.#source = source;
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
      if (this.#source === undefined) return;
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

  /** Wake every waiter, `UNLISTEN` and give the connection back. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wakeAll();
    const pending = this.#connection;
    this.#connection = undefined;
    this.#active = undefined;
    if (pending === undefined) return;
    try {
      await this.#stop(await pending);
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
    const source = this.#source;
    if (source === undefined || this.#closed) throw new Error('not listening');
    let client: PgListenClient;
    let release: Connection['release'];
    if (isPool(source)) {
      const Client = source.Client;
      if (typeof Client !== 'function' || source.options === undefined) {
        throw new Error('this pool offers no way to open a LISTEN connection of its own');
      }
      const own = new Client(source.options);
      // Errors after the connection was given up (or before it is attached) must not crash
      // the process; while listening, `onLost` below handles them.
      own.on('error', () => {});
      try {
        await own.connect();
      } catch (error) {
        own.end().catch(() => {});
        throw error;
      }
      // The LISTEN socket alone never keeps the process alive (waiters' timers do, while they
      // wait): forgetting `close()` before exiting must not hang the exit.
      (own as { connection?: { stream?: { unref?: () => void } } }).connection?.stream?.unref?.();
      client = own;
      let released = false;
      release = () => {
        if (released) return;
        released = true;
        own.end().catch(() => {});
      };
    } else {
      client = source;
    }
    const onNotification = (message: PgNotification) => {
      if (message.channel === this.#channel && message.payload !== undefined) {
        this.#wake(message.payload);
      }
    };
    const onLost = (error?: Error) => this.#lost(connection, error);
    client.on('notification', onNotification);
    client.on('error', onLost);
    client.on('end', onLost);
    const connection: Connection = {
      client,
      lost: false,
      release,
      detach: () => {
        client.removeListener('notification', onNotification as () => void);
        client.removeListener('error', onLost as () => void);
        client.removeListener('end', onLost as () => void);
      },
    };
    try {
      await client.query({ text: `LISTEN ${quoteIdent(this.#channel)}` });
    } catch (error) {
      connection.detach();
      release?.(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    if (connection.lost) throw new Error('LISTEN connection lost');
    if (this.#closed) {
      await this.#stop(connection);
      throw new Error('closed');
    }
    this.#active = connection;
    return connection;
  }

  /** The listening connection failed: wake everyone (they claim again), listen anew next time. */
  #lost(connection: Connection, error?: Error): void {
    connection.lost = true;
    connection.detach();
    connection.release?.(error ?? new Error('LISTEN connection ended'));
    if (this.#active === connection) {
      this.#active = undefined;
      this.#connection = undefined;
    }
    this.#wakeAll();
  }

  async #stop(connection: Connection): Promise<void> {
    connection.detach();
    try {
      await connection.client.query({ text: `UNLISTEN ${quoteIdent(this.#channel)}` });
      connection.release?.();
    } catch (error) {
      connection.release?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #wake(key: string): void {
    const waiters = this.#waiters.get(key);
    if (waiters !== undefined) for (const done of [...waiters]) done();
  }

  #wakeAll(): void {
    for (const waiters of [...this.#waiters.values()]) for (const done of [...waiters]) done();
  }
}
