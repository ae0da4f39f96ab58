/**
 * Issue 16, finding 4: `idempotent-tools settle` decides a stuck record (its attempt died, its
 * effect looked up by hand): completed with the outcome found, or released. The real bin against
 * every real store: the settlement is replayed (or lets the call run), audited with its operator,
 * and never overrules a live attempt.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  type AuditLog,
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
} from '@idempotent-tools/core';
import { createPostgresAuditLog, createPostgresStore } from '@idempotent-tools/store-postgres';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteAuditLog, openSqliteStore } from '@idempotent-tools/store-sqlite';
import { serviceAvailable, uniqueKey } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { cli } from './test-utils/run-cli.js';

const MINUTE = 60_000;
const operator = { by: 'ops@example.com', reason: 'checked at the vendor: ch_9 exists' };

/** Until the store (on its own clock) calls the record stale: no timing assumed. */
async function untilStale(store: IdempotencyStore, key: string, toolName: string): Promise<void> {
  for (;;) {
    const page = await store.list!({ toolName, state: 'stale', limit: 1000 });
    if (page.records.some((r) => r.key === key)) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface Setup {
  store: IdempotencyStore;
  /** The CLI's store options. */
  args: string[];
  /** The audit log the CLI writes to, read from the test (undefined: Redis). */
  audit: () => AuditLog | undefined;
}

function settleChecks(label: string, setup: () => Setup) {
  describe(`${label}: settle`, () => {
    const tool = `charge-${randomUUID().slice(0, 8)}`;
    let turns = 0;

    /** A call whose attempt died: claimed with a lease of 1 ms (ttl minutes), now stale. */
    async function stuck(leaseMs = 1) {
      const { store } = setup();
      const idempotency = createIdempotency({ store });
      const call = { toolName: tool, turnId: `turn-${turns++}`, args: { amount: 5 } };
      const { key, fingerprint } = idempotency.keyOf(call);
      await store.claim({
        key,
        fingerprint,
        token: 'dead-process',
        leaseMs,
        ttlMs: 10 * MINUTE,
        meta: { toolName: tool, turnId: call.turnId },
      });
      if (leaseMs === 1) await untilStale(store, key, tool);
      return { idempotency, call, key };
    }

    /** The audit entries of `key` (SQL stores), or the event on stderr (Redis). */
    async function auditOf(key: string, stderr: string): Promise<IdempotencyEvent[]> {
      const audit = setup().audit();
      if (audit === undefined) {
        return stderr
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as IdempotencyEvent);
      }
      expect(stderr).toBe('');
      return (await audit.query({ key, outcome: 'settled' })).events;
    }

    test('--value: the stale record is completed, a later call replays it; audited with the operator', async () => {
      const { idempotency, call, key } = await stuck();
      const run = await cli([
        'settle',
        key,
        '--value',
        '{"id":"ch_9"}',
        '--by',
        operator.by,
        '--reason',
        operator.reason,
        ...setup().args,
      ]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`Settled ${key}: completed with the given outcome`);
      expect(run.stdout).toMatch(/^by\s+ops@example\.com$/m);
      const fn = vi.fn(async () => ({ id: 'ch_new' }));
      expect(await idempotency.run(call, fn)).toMatchObject({
        replayed: true,
        value: { id: 'ch_9' },
      });
      expect(fn).not.toHaveBeenCalled();
      expect(await auditOf(key, run.stderr)).toEqual([
        expect.objectContaining({
          key,
          outcome: 'settled',
          toolName: tool,
          turnId: call.turnId,
          operator: { ...operator, action: 'completed' },
        }),
      ]);
    });

    test('--released: the call may run again; --json says what was done', async () => {
      const { idempotency, call, key } = await stuck();
      const run = await cli([
        'settle',
        key,
        '--released',
        '--by',
        'ops',
        '--reason',
        'the vendor has no charge for this turn',
        '--json',
        ...setup().args,
      ]);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({
        key,
        action: 'released',
        by: 'ops',
        previous: { token: 'dead-process', meta: { toolName: tool, turnId: call.turnId } },
      });
      const fn = vi.fn(async () => 'ran');
      expect(await idempotency.run(call, fn)).toMatchObject({ outcome: 'executed', value: 'ran' });
      expect(fn).toHaveBeenCalledTimes(1);
      const [entry] = await auditOf(key, run.stderr);
      expect(entry?.operator).toEqual({
        by: 'ops',
        reason: 'the vendor has no charge for this turn',
        action: 'released',
      });
    });

    test('a live record is refused (exit 5), so is a finished one; a missing one exits 1; nothing changes', async () => {
      const { store } = setup();
      const { key } = await stuck(60 * MINUTE);
      const settle = (k: string) =>
        cli(['settle', k, '--released', '--by', 'ops', '--reason', 'r', ...setup().args]);
      const live = await settle(key);
      expect(live.code).toBe(5);
      expect(live.stderr).toContain('still held by a running attempt');
      expect(live.stderr).toContain('a live attempt is never overruled');
      expect(await store.get(key)).toMatchObject({ state: 'in_progress', token: 'dead-process' });

      const idempotency = createIdempotency({ store });
      const done = { toolName: tool, turnId: `turn-${turns++}`, args: {} };
      const finished = (await idempotency.run(done, async () => 1)).key;
      const refused = await cli([
        'settle',
        finished,
        '--value',
        '2',
        '--by',
        'ops',
        '--reason',
        'r',
        '--json',
        ...setup().args,
      ]);
      expect(refused.code).toBe(5);
      expect(JSON.parse(refused.stderr)).toMatchObject({
        error: { code: 'conflict', exitCode: 5 },
      });
      expect(refused.stderr).toContain('already completed');
      expect(await idempotency.run(done, async () => 3)).toMatchObject({ value: 1 });

      const missing = await settle(`v1_nothing-${randomUUID()}`);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('There is no live record at');
    });

    test('without --by or --reason, or without exactly one of --value / --released: exit 2, nothing changes', async () => {
      const { key } = await stuck();
      const cases: Array<[string[], RegExp]> = [
        [['--released', '--reason', 'r'], /settle needs --by \(who settles it\) and --reason/],
        [['--released', '--by', 'ops'], /settle needs --by \(who settles it\) and --reason/],
        [['--released', '--by', ' ', '--reason', 'r'], /settle needs --by/],
        [['--by', 'ops', '--reason', 'r'], /exactly one of --value/],
        [['--value', '1', '--released', '--by', 'ops', '--reason', 'r'], /exactly one of --value/],
        [['--value', '{id:1}', '--by', 'ops', '--reason', 'r'], /--value must be JSON/],
      ];
      for (const [options, message] of cases) {
        const run = await cli(['settle', key, ...options, ...setup().args]);
        expect(run.code).toBe(2);
        expect(run.stdout).toBe('');
        expect(run.stderr).toMatch(message);
      }
      const noKey = await cli([
        'settle',
        '--released',
        '--by',
        'o',
        '--reason',
        'r',
        ...setup().args,
      ]);
      expect(noKey.code).toBe(2);
      expect(noKey.stderr).toContain('settle takes exactly one key');
      expect(await setup().store.get(key)).toMatchObject({
        state: 'in_progress',
        token: 'dead-process',
      });
    });

    test('encrypted outcomes: --value is refused (no keys), --released still works', async () => {
      const { store } = setup();
      const encrypted = createIdempotency({
        store,
        encryption: { keys: { k1: randomBytes(32) }, current: 'k1' },
      });
      await encrypted.run({ toolName: tool, turnId: `turn-${turns++}`, args: {} }, async () => 1);
      const { key } = await stuck();
      const value = await cli([
        'settle',
        key,
        '--value',
        '{"id":"ch_9"}',
        '--by',
        'ops',
        '--reason',
        'r',
        ...setup().args,
      ]);
      expect(value.code).toBe(2);
      expect(value.stderr).toContain('The outcomes in this store are encrypted');
      expect(value.stderr).toContain('idempotency.settle(');
      expect(await store.get(key)).toMatchObject({ state: 'in_progress' });
      const released = await cli([
        'settle',
        key,
        '--released',
        '--by',
        'ops',
        '--reason',
        'r',
        ...setup().args,
      ]);
      expect(released.code).toBe(0);
      expect(await store.get(key)).toBeUndefined();
    });
  });
}

// ---- SQLite: always. No audit table before the first settle: it creates it. ----

const dir = mkdtempSync(join(tmpdir(), 'idempotent-cli-settle-'));
const sqliteFile = join(dir, 'settle.db');
const sqliteStore = openSqliteStore(sqliteFile);
afterAll(async () => {
  await sqliteStore.close();
  rmSync(dir, { recursive: true, force: true });
});

settleChecks('sqlite', () => ({
  store: sqliteStore,
  args: ['--store', `sqlite:${sqliteFile}`],
  audit: () => createSqliteAuditLog(new DatabaseSync(sqliteFile)),
}));

describe('sqlite: settle and the other commands', () => {
  test('no audit table yet: settle creates the one --audit-table names and writes the entry', async () => {
    const file = join(dir, 'no-audit.db');
    const store = openSqliteStore(file);
    const key = `v1_stuck-${randomUUID()}`;
    await store.claim({
      key,
      fingerprint: 'fp',
      token: 'dead',
      leaseMs: 1,
      ttlMs: 10 * MINUTE,
      meta: { toolName: 'deploy', turnId: 't' },
    });
    await untilStale(store, key, 'deploy');
    const tables = () =>
      (
        store.database
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
          .all() as Array<{
          name: string;
        }>
      ).map((t) => t.name);
    expect(tables()).not.toContain('ops_audit');
    const run = await cli([
      'settle',
      key,
      '--released',
      '--by',
      'ops',
      '--reason',
      'rolled back',
      '--store',
      `sqlite:${file}`,
      '--audit-table',
      'ops_audit',
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`written to ops_audit in ${file}`);
    expect(tables()).toContain('ops_audit');
    expect(store.database.prepare('SELECT key, outcome, operator FROM ops_audit').all()).toEqual([
      {
        key,
        outcome: 'settled',
        operator: JSON.stringify({ by: 'ops', reason: 'rolled back', action: 'released' }),
      },
    ]);
    await store.close();
  });

  test('an audit write that fails after the settlement: exit 3, the event on stderr', async () => {
    const file = join(dir, 'frozen-audit.db');
    const store = openSqliteStore(file);
    createSqliteAuditLog(store.database);
    store.database.exec(`CREATE TRIGGER frozen BEFORE INSERT ON idempotency_audit
      BEGIN SELECT RAISE(ABORT, 'the audit table is frozen'); END`);
    const key = `v1_stuck-${randomUUID()}`;
    await store.claim({
      key,
      fingerprint: 'fp',
      token: 'dead',
      leaseMs: 1,
      ttlMs: 10 * MINUTE,
      meta: { toolName: 'deploy', turnId: 't' },
    });
    await untilStale(store, key, 'deploy');
    const run = await cli([
      'settle',
      key,
      '--value',
      '"done"',
      '--by',
      'ops',
      '--reason',
      'seen',
      '--store',
      `sqlite:${file}`,
    ]);
    expect(run.code).toBe(3);
    expect(run.stdout).toBe('');
    const [line, message] = run.stderr.trimEnd().split('\n');
    expect(JSON.parse(line!)).toMatchObject({
      key,
      outcome: 'settled',
      operator: { by: 'ops', reason: 'seen', action: 'completed' },
    });
    expect(message).toContain(`Settled ${key}: completed with the given outcome`);
    expect(message).toContain('But its audit entry could not be written');
    expect(message).toContain('the audit table is frozen');
    expect(await store.get(key)).toMatchObject({ state: 'completed' });
    await store.close();
  });

  test('stats counts the settlement apart from calls; inspect shows who settled it', async () => {
    const file = join(dir, 'stats.db');
    const store = openSqliteStore(file);
    const audit = createSqliteAuditLog(store.database);
    const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
    const call = { toolName: 'charge', turnId: 't1', args: {} };
    await idempotency.run(call, async () => 1);
    await idempotency.run(call, async () => 1); // replayed
    await audit.close();
    const stuckCall = { ...call, turnId: 't2' };
    const { key, fingerprint } = idempotency.keyOf(stuckCall);
    await store.claim({
      key,
      fingerprint,
      token: 'dead',
      leaseMs: 1,
      ttlMs: 10 * MINUTE,
      meta: { toolName: 'charge', turnId: 't2' },
    });
    await untilStale(store, key, 'charge');
    await store.close();
    const args = ['--store', `sqlite:${file}`];
    const run = await cli([
      'settle',
      key,
      '--value',
      '7',
      '--by',
      'ops',
      '--reason',
      'seen',
      ...args,
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`audit              written to idempotency_audit in ${file}`);

    const stats = await cli(['stats', '--json', ...args]);
    const counts = JSON.parse(stats.stdout);
    expect(counts).toMatchObject({ calls: 2, replays: 1, replayRate: 0.5 });
    expect(counts.byOutcome).toMatchObject({ executed: 1, replayed: 1, settled: 1 });
    const text = await cli(['stats', ...args]);
    expect(text.stdout).toContain('by outcome   executed 1, replayed 1, settled 1');

    const inspect = await cli(['inspect', key, ...args]);
    expect(inspect.stdout).toMatch(/^state\s+completed$/m);
    expect(inspect.stdout).toMatch(/settled .* completed by ops: seen$/m);
    const json = JSON.parse((await cli(['inspect', key, '--json', ...args])).stdout);
    expect(json.auditTrail[0]).toMatchObject({
      outcome: 'settled',
      operator: { by: 'ops', reason: 'seen', action: 'completed' },
    });
  });
});

// ---- Redis: when it is up. No audit log: the event goes to stderr. ----

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
redis.on('error', () => {});
const redisUp = await serviceAvailable({
  name: 'Redis',
  url: redisUrl,
  probe: async () => {
    await redis.connect();
    return redis.ping();
  },
});
const redisPrefix = `${uniqueKey('idem-cli-settle')}:`;

describe.skipIf(!redisUp)('redis', () => {
  const store = createRedisStore(redis, { prefix: redisPrefix, notifications: 'off' });
  afterAll(async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  });

  settleChecks('redis', () => ({
    store,
    args: ['--store', redisUrl, '--prefix', redisPrefix],
    audit: () => undefined,
  }));
});

// ---- PostgreSQL: when it is up. Own tables; the audit table is created by the first settle. ----

const pgUrl = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const pool = new pg.Pool({ connectionString: pgUrl, max: 4, connectionTimeoutMillis: 5000 });
pool.on('error', () => {});
const pgUp = await serviceAvailable({
  name: 'PostgreSQL',
  url: pgUrl,
  probe: () => pool.query('SELECT 1'),
});
const pgSchema = `idt_settle_${randomUUID().replaceAll('-', '').slice(0, 12)}`;

describe.skipIf(!pgUp)('postgres', () => {
  const store = createPostgresStore(pool, {
    schema: pgSchema,
    table: 'settle_records',
    notifications: false,
  });
  beforeAll(() => store.ensureSchema());
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${pgSchema} CASCADE`);
    await pool.end();
  });

  settleChecks('postgres', () => ({
    store,
    args: [
      '--store',
      pgUrl,
      '--schema',
      pgSchema,
      '--table',
      'settle_records',
      '--audit-table',
      'settle_audit',
    ],
    audit: () => createPostgresAuditLog(pool, { schema: pgSchema, table: 'settle_audit' }),
  }));

  test('an audit table the role cannot prepare: exit 3 before anything changes', async () => {
    await pool.query(`CREATE TABLE ${pgSchema}.locked_audit (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text COLLATE "C" NOT NULL,
      tool_name text NOT NULL, scope text, turn_id text, outcome text NOT NULL, store text NOT NULL,
      started_at bigint NOT NULL, ended_at bigint NOT NULL, duration_ms bigint NOT NULL,
      waited_ms bigint, error_code text, args_fingerprint text NOT NULL, args_bytes bigint NOT NULL,
      result_bytes bigint)`);
    const role = `idt_settle_ops_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await pool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      await pool.query(`GRANT USAGE ON SCHEMA ${pgSchema} TO ${role}`);
      await pool.query(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${pgSchema}.settle_records, ${pgSchema}.locked_audit TO ${role}`,
      );
      const key = `v1_locked-${randomUUID()}`;
      await store.claim({
        key,
        fingerprint: 'fp',
        token: 'dead',
        leaseMs: 1,
        ttlMs: 10 * MINUTE,
        meta: { toolName: 'deploy', turnId: 't' },
      });
      await untilStale(store, key, 'deploy');
      const url = new URL(pgUrl);
      url.username = role;
      url.password = '';
      const run = await cli([
        'settle',
        key,
        '--released',
        '--by',
        'ops',
        '--reason',
        'r',
        '--store',
        url.href,
        '--schema',
        pgSchema,
        '--table',
        'settle_records',
        '--audit-table',
        'locked_audit',
      ]);
      expect(run.code).toBe(3);
      expect(run.stderr).toContain(`Could not prepare the audit table ${pgSchema}.locked_audit`);
      expect(run.stderr).toContain('Nothing was changed');
      expect(await store.get(key)).toMatchObject({ state: 'in_progress', token: 'dead' });
    } finally {
      await pool.query(`DROP OWNED BY ${role}`);
      await pool.query(`DROP ROLE ${role}`);
    }
  });

  test('an audit table of 0.1 (no operator column) gets it from settle, before anything changes', async () => {
    await pool.query(`CREATE TABLE ${pgSchema}.old_audit (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text COLLATE "C" NOT NULL,
      tool_name text NOT NULL, scope text, turn_id text, outcome text NOT NULL, store text NOT NULL,
      started_at bigint NOT NULL, ended_at bigint NOT NULL, duration_ms bigint NOT NULL,
      waited_ms bigint, error_code text, args_fingerprint text NOT NULL, args_bytes bigint NOT NULL,
      result_bytes bigint)`);
    const key = `v1_old-${randomUUID()}`;
    await store.claim({
      key,
      fingerprint: 'fp',
      token: 'dead',
      leaseMs: 1,
      ttlMs: 10 * MINUTE,
      meta: { toolName: 'deploy', turnId: 't' },
    });
    await untilStale(store, key, 'deploy');
    const run = await cli([
      'settle',
      key,
      '--released',
      '--by',
      'ops',
      '--reason',
      'rolled back by hand',
      '--store',
      pgUrl,
      '--schema',
      pgSchema,
      '--table',
      'settle_records',
      '--audit-table',
      'old_audit',
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`written to ${pgSchema}.old_audit`);
    const { rows } = await pool.query(`SELECT outcome, operator FROM ${pgSchema}.old_audit`);
    expect(rows).toEqual([
      {
        outcome: 'settled',
        operator: { by: 'ops', reason: 'rolled back by hand', action: 'released' },
      },
    ]);
  });
});
