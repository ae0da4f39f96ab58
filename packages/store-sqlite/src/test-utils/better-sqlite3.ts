import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { serviceAvailable } from '@idempotent-tools/testing';
import Database from 'better-sqlite3';
import { describe, test } from 'vitest';

const binding = join(
  dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')),
  'build/Release/better_sqlite3.node (or its prebuilds/)',
);

/**
 * Whether better-sqlite3's native binding loads (the package's prebuild for this platform, or one
 * built by `pnpm build:native`). `pnpm install` builds no native code; without a binding the
 * better-sqlite3 tests are skipped with one line saying how to build it, and with CI=true they
 * fail instead.
 */
export const betterSqlite3Loads = await serviceAvailable({
  name: 'better-sqlite3 native binding',
  url: binding,
  probe: async () => new Database(':memory:').close(),
  start: 'pnpm build:native',
});

/** A test that needs better-sqlite3 (also those that compare both drivers). */
export const betterTest: ReturnType<typeof test.skipIf> = test.skipIf(!betterSqlite3Loads);
/** A suite that needs better-sqlite3. */
export const betterDescribe: ReturnType<typeof describe.skipIf> = describe.skipIf(
  !betterSqlite3Loads,
);
/** The test of one driver's variant. */
export const driverTest = (
  driver: 'node:sqlite' | 'better-sqlite3',
): ReturnType<typeof test.skipIf> => (driver === 'better-sqlite3' ? betterTest : test);
