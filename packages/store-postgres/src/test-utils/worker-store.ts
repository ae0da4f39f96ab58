/**
 * Store module for the multi-process race and crash workers (`runWorkers` of
 * @idempotent-tools/testing): each worker process builds its own pool and store.
 */
import { createPostgresStore } from '../postgres-store.js';
import { testPool } from './pg.js';

export async function createStore() {
  const pool = testPool({ label: 'worker', max: 4 });
  const store = createPostgresStore(pool, {
    schema: process.env.IDT_PG_SCHEMA ?? 'public',
    table: process.env.IDT_PG_TABLE ?? 'idempotency_records',
  });
  return {
    store,
    close: async () => {
      await store.close();
      await pool.end();
    },
  };
}
