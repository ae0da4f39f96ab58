import type { Driver, Subscription } from '../driver.js';
import { quoteIdent } from '../schema.js';

/** The part of a PGlite result the store reads. */
export interface PgliteResult {
  rows: Record<string, unknown>[];
  affectedRows?: number;
  rowCount?: number;
}

/**
 * What the store needs of a PGlite instance (`new PGlite()`, `PGlite.create()`, or a
 * `PGliteWorker`): `query`, `exec`, `listen` / `unlisten`. Typed here so that the package needs
 * no PGlite types.
 */
export interface PgliteLike {
  query(query: string, params?: unknown[]): Promise<PgliteResult>;
  exec(query: string): Promise<unknown>;
  listen(channel: string, callback: (payload: string) => void): Promise<unknown>;
  unlisten(channel: string, callback?: (payload: string) => void): Promise<void>;
  readonly waitReady: Promise<void>;
}

export function isPgliteLike(client: unknown): client is PgliteLike {
  const c = client as Partial<PgliteLike> | null | undefined;
  return (
    c != null &&
    typeof c.query === 'function' &&
    typeof c.exec === 'function' &&
    typeof c.listen === 'function' &&
    typeof c.unlisten === 'function' &&
    'waitReady' in c
  );
}

/**
 * PGlite: one in-process PostgreSQL session. Statements through `query(text, params)` (PGlite
 * has no named statements: each is parsed on its way), DDL through `exec`, wake-ups through
 * `listen` on that same session (a NOTIFY of this process reaches it; no connection to lose).
 */
export function pgliteDriver(db: PgliteLike): Driver {
  return {
    name: 'pglite',
    query: async ({ text, values }) => {
      const result = await db.query(text, values);
      // `rowCount` is the command tag's (SELECT n / UPDATE n ...); older PGlite has only
      // `affectedRows` (rows changed) beside the rows returned.
      const rowCount = result.rowCount ?? (result.rows.length || (result.affectedRows ?? 0));
      return { rows: result.rows, rowCount };
    },
    script: async (text) => {
      await db.exec(text);
    },
    listen: async (channel, onPayload): Promise<Subscription> => {
      // Quoted: PGlite sends the name as given (ours has dots) and strips the quotes to match.
      const quoted = quoteIdent(channel);
      const callback = (payload: string) => onPayload(payload);
      await db.listen(quoted, callback);
      return { stop: () => db.unlisten(quoted, callback) };
    },
  };
}
