/**
 * The clients the store runs on, for table-driven tests: open a client the way a user of each
 * would, and say which clauses each engine can run. PGlite is one PostgreSQL session inside this
 * process: no second process or connection reaches it, so no cross-process race or crash, no
 * network outage, no lost reply, no pool.
 */
import { PGlite } from '@electric-sql/pglite';
import postgres from 'postgres';
import type { DriverName } from '../driver.js';
import type { PostgresClient } from '../resolve-driver.js';
import { DATABASE_URL, testPool, uniqueName } from './pg.js';

export interface OpenedClient {
  client: PostgresClient;
  /** Its `application_name` on the server (network clients). */
  applicationName: string | undefined;
  end(): Promise<void>;
}

export interface DriverCase {
  name: DriverName;
  /** Reaches the shared PostgreSQL server (`DATABASE_URL`); PGlite is in-process. */
  network: boolean;
  /**
   * `failFast`: fail statements while the server is away rather than queue them (postgres.js
   * waits `backoff` between reconnects, up to 20 s by default, and queues statements meanwhile).
   */
  open(options?: {
    max?: number;
    label?: string;
    url?: string;
    failFast?: boolean;
  }): Promise<OpenedClient>;
}

export const pgCase: DriverCase = {
  name: 'pg',
  network: true,
  open: async (options = {}) => {
    const pool = testPool({
      label: options.label ?? 'pg',
      max: options.max ?? 8,
      ...(options.url === undefined ? {} : { connectionString: options.url }),
    });
    return { client: pool, applicationName: pool.applicationName, end: () => pool.end() };
  },
};

export const postgresJsCase: DriverCase = {
  name: 'postgres.js',
  network: true,
  open: async (options = {}) => {
    const applicationName = uniqueName(`idt_${options.label ?? 'pgjs'}`);
    const sql = postgres(options.url ?? DATABASE_URL, {
      max: options.max ?? 8,
      connect_timeout: 5,
      onnotice: () => {},
      connection: { application_name: applicationName },
      ...(options.failFast === true ? { backoff: () => 0.05 } : {}),
    });
    return { client: sql, applicationName, end: () => sql.end({ timeout: 5 }) };
  },
};

export const pgliteCase: DriverCase = {
  name: 'pglite',
  network: false,
  open: async () => {
    const db = await PGlite.create();
    return { client: db, applicationName: undefined, end: () => db.close() };
  },
};

export const driverCases: Record<DriverName, DriverCase> = {
  pg: pgCase,
  'postgres.js': postgresJsCase,
  pglite: pgliteCase,
};

/** Run SQL on an opened client, whatever its driver (for test setup and raw looks). */
export async function sqlOn(
  opened: OpenedClient,
  text: string,
  values: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  const c = opened.client as unknown as {
    unsafe?: (t: string, v: unknown[]) => Promise<Record<string, unknown>[]>;
    exec?: unknown;
    query: (...args: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;
  };
  if (c.unsafe !== undefined) return [...(await c.unsafe(text, values))];
  if (c.exec !== undefined) return (await c.query(text, values)).rows;
  return (await c.query({ text, values })).rows;
}
