import { randomUUID } from 'node:crypto';
import { serviceAvailable } from '@idempotent-tools/testing';
import pg from 'pg';

/** Where the service tests find PostgreSQL. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';

/** A lower-case identifier no other test run uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
}

/** A pool with an application name of its own (to find its backends) that survives outages. */
export function testPool(
  options: { label?: string; max?: number; connectionString?: string } = {},
): pg.Pool & { applicationName: string } {
  const applicationName = uniqueName(`idt_${options.label ?? 'test'}`);
  const pool = new pg.Pool({
    connectionString: options.connectionString ?? DATABASE_URL,
    application_name: applicationName,
    max: options.max ?? 8,
    connectionTimeoutMillis: 5_000,
  });
  // Idle connections killed by an outage emit 'error': without a handler the process dies.
  pool.on('error', () => {});
  return Object.assign(pool, { applicationName });
}

/** True when PostgreSQL answers; skips (or fails with CI=true) otherwise. */
export function postgresUp(pool: pg.Pool): Promise<boolean> {
  return serviceAvailable({
    name: 'PostgreSQL',
    url: DATABASE_URL,
    probe: () => pool.query('SELECT 1'),
  });
}
