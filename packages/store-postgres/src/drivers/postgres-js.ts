import { InvalidInputError } from '@idempotent-tools/core';
import type { Driver, Subscription } from '../driver.js';

/** The part of a postgres.js result the store reads: an array of rows with the tag's count. */
export interface PostgresJsResult extends ReadonlyArray<Record<string, unknown>> {
  count: number | null;
}

/**
 * What the store needs of a postgres.js instance (`postgres(url)`): `unsafe` for its statements
 * and `listen` for wake-ups. Typed here so that the package needs no postgres.js types.
 */
export interface PostgresJsSql {
  unsafe(
    query: string,
    parameters?: unknown[],
    queryOptions?: { prepare?: boolean },
  ): PromiseLike<PostgresJsResult>;
  listen(
    channel: string,
    onnotify: (value: string) => void,
    onlisten?: () => void,
  ): PromiseLike<{ unlisten(): Promise<void> }>;
  /** The parsed options (postgres.js exposes them). */
  options?: unknown;
}

export function isPostgresJs(client: unknown): client is PostgresJsSql {
  const c = client as Partial<PostgresJsSql> | undefined;
  return (
    typeof client === 'function' &&
    typeof c?.unsafe === 'function' &&
    typeof c.listen === 'function'
  );
}

/** A transform that renames columns or rewrites values: the store's rows would not read. */
function transforming(sql: PostgresJsSql): boolean {
  const t = (sql.options as { transform?: Record<string, { from?: unknown } | undefined> })
    ?.transform;
  return ['column', 'value', 'row'].some((part) => typeof t?.[part]?.from === 'function');
}

/**
 * postgres.js: statements through `sql.unsafe(text, values, { prepare })` (postgres.js names and
 * caches prepared statements per connection itself; `prepare: false` on the instance wins), and
 * `sql.listen`, which runs on a connection of postgres.js's own (outside the pool's `max`),
 * reconnects and listens again by itself: a second `onlisten` means the connection was lost
 * meanwhile, and is reported as lost (notifications may have been missed).
 */
export function postgresJsDriver(sql: PostgresJsSql): Driver {
  if (transforming(sql)) {
    throw new InvalidInputError({
      field: 'pool',
      message:
        'This postgres.js instance has a transform (column, value or row) that would rename the store\'s columns or rewrite its values: pass an instance without "transform" (e.g. postgres(url), besides the one your app uses).',
    });
  }
  const run = async (text: string, values: unknown[], prepare: boolean) => {
    const result = await sql.unsafe(text, values, { prepare });
    return { rows: [...result], rowCount: result.count ?? null };
  };
  return {
    name: 'postgres.js',
    query: ({ text, values, name }) => run(text, values, name !== undefined),
    // No parameters: postgres.js sends one simple-protocol message.
    script: async (text) => {
      await sql.unsafe(text);
    },
    listen: async (channel, onPayload, onLost): Promise<Subscription> => {
      let listens = 0;
      let over = false;
      let meta: { unlisten(): Promise<void> } | undefined;
      const end = () => {
        if (over) return;
        over = true;
        meta?.unlisten().catch(() => {});
        onLost();
      };
      meta = await sql.listen(
        channel,
        (payload) => {
          if (!over) onPayload(payload);
        },
        () => {
          // Listening again after a reconnect: whatever was sent in between was missed.
          if (++listens > 1) end();
        },
      );
      if (over) meta.unlisten().catch(() => {});
      return {
        stop: async () => {
          if (over) return;
          over = true;
          await meta?.unlisten();
        },
      };
    },
  };
}
