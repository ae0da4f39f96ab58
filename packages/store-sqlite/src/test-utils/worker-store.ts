/**
 * Store module for the multi-process race and crash workers of @idempotent-tools/testing:
 * `SQLITE_STORE_FILE` (required), `SQLITE_STORE_DRIVER` (`node:sqlite` | `better-sqlite3`),
 * `SQLITE_STORE_TABLE`.
 */
import { createSqliteStore, openSqliteStore, type SqliteStore } from '../index.js';

export async function createStore(): Promise<{ store: SqliteStore; close: () => Promise<void> }> {
  const file = process.env.SQLITE_STORE_FILE;
  if (file === undefined) throw new Error('SQLITE_STORE_FILE is not set');
  const table = process.env.SQLITE_STORE_TABLE ?? 'idempotency_records';
  if (process.env.SQLITE_STORE_DRIVER === 'better-sqlite3') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(file);
    const store = createSqliteStore(db, { table });
    return {
      store,
      close: async () => {
        await store.close();
        db.close();
      },
    };
  }
  const store = openSqliteStore(file, { table });
  return { store, close: () => store.close() };
}
