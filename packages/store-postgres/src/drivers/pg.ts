import type { Driver, Listen, Subscription } from '../driver.js';
import { quoteIdent } from '../schema.js';

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

/** A `pg.Client` on which `connect()` was never called (nor is under way): its queries wait. */
function neverConnected(db: unknown): boolean {
  const client = db as { _connected?: unknown; _connecting?: unknown; _ending?: unknown };
  return (
    !isPool(db) &&
    client._connected === false &&
    client._connecting !== true &&
    client._ending !== true
  );
}

export function isListenClient(db: unknown): db is PgListenClient {
  const d = db as Partial<PgListenClient>;
  return (
    typeof d.query === 'function' &&
    typeof d.on === 'function' &&
    typeof d.removeListener === 'function'
  );
}

/**
 * `pg`: statements through `query(config)` (named when prepared), `LISTEN` on `listenClient`,
 * on a client of the store's own for a pool, or on the given `pg.Client`; a query-only object
 * cannot listen.
 */
export function pgDriver(db: PgQueryable, listenClient?: PgListenClient): Driver {
  const source = listenClient ?? (isPool(db) ? db : isListenClient(db) ? db : undefined);
  return {
    name: 'pg',
    // `db.query` is looked up at each call (a wrapper or a spy set later is honoured).
    query: ({ name, text, values }) =>
      neverConnected(db)
        ? Promise.reject(
            new Error(
              'the pg.Client was never connected (pg queues its queries until connect(), so the call would hang): call await client.connect() before the first call, or pass a pg.Pool, which connects by itself',
            ),
          )
        : db.query(name === undefined ? { text, values } : { name, text, values }),
    // No parameters: pg sends one simple-protocol message.
    script: async (text) => {
      await db.query({ text });
    },
    listen: source === undefined ? undefined : pgListen(source),
  };
}

/**
 * For a pool, a client of the store's own opened with the pool's settings (never one of the
 * pool's connections: a `LISTEN` held in a pool of `max: 1` would starve every query of the
 * store); a given client is listened on as it is. A pool-like without `Client` and `options`
 * cannot listen (the start fails: waiters poll).
 */
function pgListen(source: PgPoolLike | PgListenClient): Listen {
  return async (channel, onPayload, onLost): Promise<Subscription> => {
    let client: PgListenClient;
    let release: ((error?: Error) => void) | undefined;
    if (isPool(source)) {
      const Client = source.Client;
      if (typeof Client !== 'function' || source.options === undefined) {
        throw new Error('this pool offers no way to open a LISTEN connection of its own');
      }
      const own = new Client(source.options);
      // Errors after the connection was given up (or before it is attached) must not crash
      // the process; while listening, `lost` below handles them.
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
    let over = false;
    const onNotification = (message: PgNotification) => {
      if (!over && message.channel === channel && message.payload !== undefined) {
        onPayload(message.payload);
      }
    };
    const detach = () => {
      client.removeListener('notification', onNotification as () => void);
      client.removeListener('error', lost as () => void);
      client.removeListener('end', lost as () => void);
    };
    function lost(error?: Error) {
      if (over) return;
      over = true;
      detach();
      release?.(error ?? new Error('LISTEN connection ended'));
      onLost();
    }
    client.on('notification', onNotification);
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.query({ text: `LISTEN ${quoteIdent(channel)}` });
    } catch (error) {
      over = true;
      detach();
      release?.(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    return {
      stop: async () => {
        if (over) return;
        over = true;
        detach();
        try {
          await client.query({ text: `UNLISTEN ${quoteIdent(channel)}` });
          release?.();
        } catch (error) {
          release?.(error instanceof Error ? error : new Error(String(error)));
        }
      },
    };
  };
}
