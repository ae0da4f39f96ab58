/**
 * Store module for the multi-process race and crash workers (`runWorkers` of
 * @idempotent-tools/testing): each worker process builds its own client and store, on the driver
 * `IDT_PG_DRIVER` names (`pg` or `postgres.js`; PGlite is one process and has no workers).
 */
import type { DriverName } from '../driver.js';
import { createPostgresStore } from '../postgres-store.js';
import { driverCases } from './drivers.js';

export async function createStore() {
  const name = (process.env.IDT_PG_DRIVER ?? 'pg') as DriverName;
  const opened = await driverCases[name].open({ label: 'worker', max: 4 });
  const store = createPostgresStore(opened.client, {
    driver: name,
    schema: process.env.IDT_PG_SCHEMA ?? 'public',
    table: process.env.IDT_PG_TABLE ?? 'idempotency_records',
  });
  return {
    store,
    close: async () => {
      await store.close();
      await opened.end();
    },
  };
}
