import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  createIdempotency,
  type EventHandler,
  type IdempotencyStore,
  type ListedRecord,
  ReplayedFailureError,
} from '@idempotent-tools/core';
import {
  createPostgresAuditLog,
  createPostgresStore,
  type PostgresStore,
} from '@idempotent-tools/store-postgres';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteAuditLog, openSqliteStore } from '@idempotent-tools/store-sqlite';
import { serviceAvailable, uniqueKey } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { cli, cliJson } from './test-utils/run-cli.js';

const HOUR = 3_600_000;

/**
 * The same scenario in every store: three charges (one replayed by a retry), a terminal failure
 * replayed once, a running deploy, a stale deploy (its holder died an hour ago... as far as the
 * lease says) and an expired record. Returns the keys.
 */
async function seed(store: IdempotencyStore, onEvent: EventHandler | undefined, tool: string) {
  const idempotency = createIdempotency({
    store,
    ...(onEvent === undefined ? {} : { onEvent }),
    isTerminalError: (e) => (e as Error).message === 'card declined',
  });
  const charge = (turnId: string, amount: number) =>
    idempotency.run({ toolName: tool, turnId, scope: 'acme', args: { amount } }, async () => ({
      id: `ch_${amount}`,
    }));
  const completed = [(await charge('turn-1', 1)).key, (await charge('turn-2', 2)).key];
  completed.push((await charge('turn-3', 3)).key);
  await charge('turn-2', 2); // the retry: replayed
  const declined = { toolName: tool, turnId: 'turn-4', scope: 'acme', args: { amount: 4 } };
  const fail = () =>
    idempotency.run(declined, async () => {
      throw new Error('card declined');
    });
  await fail().catch(() => undefined);
  await expect(fail()).rejects.toSatisfy(ReplayedFailureError.isInstance);
  const failed = idempotency.keyOf(declined).key;

  // Records written directly: a live attempt, a stale one, an expired one.
  const running = `v1_running-${randomUUID()}`;
  const stale = `v1_stale-${randomUUID()}`;
  const expired = `v1_expired-${randomUUID()}`;
  const meta = (turnId: string) => ({ toolName: 'deploy', turnId, scope: 'ops' });
  await store.claim({
    key: running,
    fingerprint: 'fp',
    token: 't1',
    leaseMs: HOUR,
    ttlMs: 2 * HOUR,
    meta: meta('turn-9'),
  });
  await store.claim({
    key: stale,
    fingerprint: 'fp',
    token: 't2',
    leaseMs: 1,
    ttlMs: 2 * HOUR,
    meta: meta('turn-8'),
  });
  await store.claim({
    key: expired,
    fingerprint: 'fp',
    token: 't3',
    leaseMs: 1,
    ttlMs: 1,
    meta: meta('turn-7'),
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  return { completed, failed, running, stale, expired };
}

type Keys = Awaited<ReturnType<typeof seed>>;

/** The same checks against every store. */
function commonChecks(
  label: string,
  args: () => string[],
  keys: () => Keys,
  tool: () => string,
  withAudit: boolean,
) {
  describe(`${label}: list, stats, inspect, purge`, () => {
    test('list: a table for people, exit 0', async () => {
      const run = await cli(['list', ...args(), '--tool', tool()]);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('');
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^KEY\s+STATE\s+TOOL\s+TURN\s+SCOPE\s+CREATED\s+EXPIRES$/);
      for (const key of [...keys().completed, keys().failed]) {
        const line = lines.find((l) => l.startsWith(key));
        expect(line).toBeDefined();
        expect(line).toContain(tool());
        expect(line).toMatch(/ (completed|failed) /);
      }
      expect(lines.at(-1)).toBe('4 records');
    });

    test('list --json with filters by state, turn and scope', async () => {
      const keysOf = (r: { records: ListedRecord[] }) => r.records.map((x) => x.key).sort();
      expect(keysOf(await cliJson(['list', ...args(), '--state', 'stale']))).toEqual([
        keys().stale,
      ]);
      expect(keysOf(await cliJson(['list', ...args(), '--state', 'in_progress']))).toEqual([
        keys().running,
      ]);
      expect(keysOf(await cliJson(['list', ...args(), '--state', 'failed']))).toEqual([
        keys().failed,
      ]);
      expect(
        keysOf(await cliJson(['list', ...args(), '--tool', tool(), '--turn', 'turn-2'])),
      ).toEqual([keys().completed[1]]);
      const ops = await cliJson<{ records: ListedRecord[] }>(['list', ...args(), '--scope', 'ops']);
      expect(keysOf(ops)).toEqual([keys().running, keys().stale].sort());
      expect(ops.records.find((r) => r.key === keys().stale)).toMatchObject({
        state: 'in_progress',
        inspectionState: 'stale',
        meta: { toolName: 'deploy', turnId: 'turn-8', scope: 'ops' },
      });
    });

    test('list pages: --limit gives a cursor, --cursor the next page, --all everything', async () => {
      const first = await cliJson<{ records: ListedRecord[]; cursor?: string }>([
        'list',
        ...args(),
        '--tool',
        tool(),
        '--limit',
        '3',
      ]);
      expect(first.records).toHaveLength(3);
      expect(typeof first.cursor).toBe('string');
      const second = await cliJson<{ records: ListedRecord[]; cursor?: string }>([
        'list',
        ...args(),
        '--tool',
        tool(),
        '--limit',
        '3',
        '--cursor',
        first.cursor!,
      ]);
      const paged = [...first.records, ...second.records].map((r) => r.key).sort();
      expect(paged).toEqual([...keys().completed, keys().failed].sort());
      const all = await cliJson<{ records: ListedRecord[]; cursor?: string }>([
        'list',
        ...args(),
        '--all',
        '--limit',
        '2',
      ]);
      expect(all.cursor).toBeNull();
      expect(all.records).toHaveLength(6);
      const text = await cli(['list', ...args(), '--tool', tool(), '--limit', '3']);
      expect(text.stdout).toContain('; more: --cursor ');
    });

    test('stats: records by state, and calls and replay rate from the audit log', async () => {
      const stats = await cliJson<Record<string, unknown>>(['stats', ...args()]);
      expect(stats).toMatchObject({
        total: 6,
        inProgress: 1,
        stale: 1,
        completed: 3,
        failed: 1,
      });
      if (withAudit) {
        // 3 executed, 1 replayed, 1 failed, 1 replayed failure.
        expect(stats).toMatchObject({ calls: 6, replays: 2, auditNote: null });
        expect(stats.replayRate).toBeCloseTo(2 / 6);
        expect(stats.byOutcome).toMatchObject({ executed: 3, replayed: 1, failed: 2 });
      } else {
        expect(stats).toMatchObject({
          calls: null,
          replays: null,
          replayRate: null,
          byOutcome: null,
          audit: null,
        });
        expect(stats.auditNote).toMatch(/Redis keeps no audit log/);
      }
      const text = await cli(['stats', ...args()]);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/stale\s+1\n/);
      expect(text.stdout).toMatch(/in progress\s+1\n/);
      if (withAudit) {
        expect(text.stdout).toMatch(/replay rate\s+33\.3%/);
        expect(text.stdout).toContain('executed 3, replayed 1, failed 2');
      } else {
        expect(text.stdout).toContain('Calls and replay rate: unknown');
      }
      const mine = await cliJson<{ total: number }>(['stats', ...args(), '--tool', tool()]);
      expect(mine.total).toBe(4);
    });

    test('inspect: one record, its outcome only on request, its audit trail', async () => {
      const key = keys().completed[1]!;
      const run = await cli(['inspect', key, ...args()]);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(new RegExp(`^key\\s+${key}$`, 'm'));
      expect(run.stdout).toMatch(/^state\s+completed$/m);
      expect(run.stdout).toMatch(/^turn\s+turn-2$/m);
      expect(run.stdout).toMatch(/^outcome\s+\d+ bytes \(--show-outcome prints it\)$/m);
      expect(run.stdout).not.toContain('ch_2');
      const shown = await cli(['inspect', key, ...args(), '--show-outcome']);
      expect(shown.stdout).toContain('ch_2');
      const json = await cliJson<{
        key: string;
        found: boolean;
        record: Record<string, unknown>;
        outcome: unknown;
        audit: string | null;
        auditTrail: unknown[] | null;
      }>(['inspect', key, ...args()]);
      expect(json).toMatchObject({ key, found: true, outcome: null });
      expect(json.record).toMatchObject({ key, state: 'completed', inspectionState: 'completed' });
      expect(json.record).not.toHaveProperty('outcome');
      if (withAudit) {
        expect(run.stdout).toContain('Audit trail (newest first)');
        expect(json.audit).toMatch(/^idempotency_audit in |\.idempotency_audit$/);
        expect(json.auditTrail?.map((e) => (e as { outcome: string }).outcome)).toEqual([
          'replayed',
          'executed',
        ]);
      } else {
        expect(json.audit).toBeNull();
        expect(json.auditTrail).toBeNull();
      }
      const stale = await cli(['inspect', keys().stale, ...args()]);
      expect(stale.stdout).toMatch(
        /^state\s+stale \(in_progress, lease ran out: outcome unknown\)$/m,
      );
    });

    test('inspect: a missing key exits 1', async () => {
      const run = await cli(['inspect', 'v1_nothing-here', ...args()]);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain('No live record under v1_nothing-here');
      const json = await cli(['inspect', 'v1_nothing-here', ...args(), '--json']);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout)).toEqual({
        key: 'v1_nothing-here',
        found: false,
        record: null,
        outcome: null,
        audit: withAudit ? expect.any(String) : null,
        auditTrail: null,
      });
    });

    test('bad filters exit 2', async () => {
      for (const bad of [
        ['--state', 'running'],
        ['--limit', '0'],
        ['--limit', 'ten'],
        ['--cursor', 'not-a-cursor'],
      ]) {
        const run = await cli(['list', ...args(), ...bad]);
        expect(run.code).toBe(2);
        expect(run.stderr).toMatch(/^idempotent-tools: /);
      }
    });
  });
}

// ---- SQLite: always ----

const dir = mkdtempSync(join(tmpdir(), 'idempotent-cli-'));
const sqliteFile = join(dir, 'agent.db');
const sqliteTool = `charge-${randomUUID().slice(0, 8)}`;
let sqliteKeys: Keys;

beforeAll(async () => {
  const store = openSqliteStore(sqliteFile);
  const audit = createSqliteAuditLog(store.database);
  sqliteKeys = await seed(store, audit.onEvent, sqliteTool);
  await audit.close();
  await store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

commonChecks(
  'sqlite',
  () => ['--store', `sqlite:${sqliteFile}`],
  () => sqliteKeys,
  () => sqliteTool,
  true,
);

describe('sqlite: store URL, purge, errors', () => {
  test('the store from IDEMPOTENT_TOOLS_STORE; sqlite:// works too', async () => {
    const fromEnv = await cli(['stats', '--json'], {
      IDEMPOTENT_TOOLS_STORE: `sqlite:${sqliteFile}`,
    });
    expect(fromEnv.code).toBe(0);
    expect(JSON.parse(fromEnv.stdout).total).toBe(6);
    const slashes = await cli(['stats', '--store', `sqlite://${sqliteFile}`]);
    expect(slashes.code).toBe(0);
  });

  test('purge --expired deletes the expired record only; purge alone is a usage error', async () => {
    const file = join(dir, 'purge.db');
    const store = openSqliteStore(file);
    await seed(store, undefined, 'x');
    await store.close();
    const count = () => {
      const db = new DatabaseSync(file);
      const n = (db.prepare('SELECT count(*) AS n FROM idempotency_records').get() as { n: number })
        .n;
      db.close();
      return n;
    };
    expect(count()).toBe(7);
    const bare = await cli(['purge', '--store', `sqlite:${file}`]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('--expired');
    const run = await cli(['purge', '--expired', '--store', `sqlite:${file}`]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('Deleted 1 expired record.\n');
    expect(count()).toBe(6);
    expect(await cliJson(['purge', '--expired', '--store', `sqlite:${file}`])).toEqual({
      deletedRecords: 0,
      deletedAuditEvents: null,
    });
  });

  test('purge --audit-retention also deletes old audit events', async () => {
    const file = join(dir, 'audit-purge.db');
    const store = openSqliteStore(file);
    const audit = createSqliteAuditLog(store.database);
    await seed(store, audit.onEvent, 'x');
    await audit.close();
    await store.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const json = await cliJson([
      'purge',
      '--expired',
      '--audit-retention',
      '10ms',
      '--store',
      `sqlite:${file}`,
    ]);
    expect(json).toEqual({ deletedRecords: 1, deletedAuditEvents: 6 });
  });

  test('a store without an audit table: stats says where calls would come from', async () => {
    const file = join(dir, 'no-audit.db');
    const store = openSqliteStore(file);
    await seed(store, undefined, 'x');
    await store.close();
    const run = await cli(['stats', '--store', `sqlite:${file}`]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'Calls and replay rate: unknown (no audit table idempotency_audit',
    );
  });

  test('usage errors exit 2: no store, bad URL, unknown command or option, missing key', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['list'], /No store: pass --store URL or set IDEMPOTENT_TOOLS_STORE/],
      [['list', '--store', 'mysql://x'], /Unsupported store URL "mysql:\/\/x"/],
      [['list', '--store', 'not a url'], /Unsupported store URL/],
      [['list', '--store', 'sqlite:'], /sqlite: needs a file path/],
      [['frobnicate', '--store', `sqlite:${sqliteFile}`], /unknown command frobnicate\n/],
      [['list', '--frob', '--store', `sqlite:${sqliteFile}`], /unknown option --frob\n/],
      [['inspect', '--store', `sqlite:${sqliteFile}`], /inspect takes exactly one key/],
      [
        ['purge', '--expired', '--tool', 'x', '--store', `sqlite:${sqliteFile}`],
        /--tool does not apply to purge/,
      ],
      [
        ['list', '--timeout', 'soon', '--store', `sqlite:${sqliteFile}`],
        /--timeout must be a duration/,
      ],
      [['list', '--table', 'a-b', '--store', `sqlite:${sqliteFile}`], /--table must match/],
    ];
    for (const [args, message] of cases) {
      const run = await cli(args);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(message);
    }
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage:');
  });

  test('--help and --version exit 0', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes: 0 ok, 1 not found (inspect, settle), 2 usage');
    const version = await cli(['--version']);
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  test('an unusable store exits 3: missing file, missing table', async () => {
    const missing = await cli(['list', '--store', `sqlite:${join(dir, 'nope.db')}`]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('No SQLite file at');
    const other = join(dir, 'other.db');
    new DatabaseSync(other).close();
    const noTable = await cli(['list', '--store', `sqlite:${other}`]);
    expect(noTable.code).toBe(3);
    expect(noTable.stderr).toContain('has no table idempotency_records');
  });

  test('--json errors are JSON on stderr', async () => {
    const run = await cli(['list', '--json', '--store', 'mysql://x']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(JSON.parse(run.stderr)).toMatchObject({ error: { code: 'usage', exitCode: 2 } });
  });
});

// ---- Redis: when it is up ----

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
const redisPrefix = `${uniqueKey('idem-cli')}:`;
const redisTool = `charge-${randomUUID().slice(0, 8)}`;
let redisKeys: Keys;

describe.skipIf(!redisUp)('redis', () => {
  beforeAll(async () => {
    const store = createRedisStore(redis, { prefix: redisPrefix, notifications: 'off' });
    redisKeys = await seed(store, undefined, redisTool);
  });
  afterAll(async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  });

  commonChecks(
    'redis',
    () => ['--store', redisUrl, '--prefix', redisPrefix],
    () => redisKeys,
    () => redisTool,
    false,
  );

  test('purge --expired runs (Redis expires records itself)', async () => {
    const run = await cli(['purge', '--expired', '--store', redisUrl, '--prefix', redisPrefix]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Deleted \d+ expired records?\.\n$/);
  });
});

describe('unreachable servers exit 3, and passwords never show', () => {
  test('redis', async () => {
    const run = await cli([
      'list',
      '--store',
      'redis://user:hunter2@127.0.0.1:1',
      '--timeout',
      '2s',
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain('Redis is unreachable at redis://user:***@127.0.0.1:1');
    expect(run.stderr).not.toContain('hunter2');
  });

  test('postgres', async () => {
    const run = await cli([
      'stats',
      '--store',
      'postgres://root:hunter2@127.0.0.1:1/test',
      '--json',
    ]);
    expect(run.code).toBe(3);
    const { error } = JSON.parse(run.stderr);
    expect(error).toMatchObject({ code: 'unavailable', exitCode: 3 });
    expect(error.message).toContain(
      'PostgreSQL is unreachable at postgres://root:***@127.0.0.1:1/test',
    );
    expect(run.stderr).not.toContain('hunter2');
  });
});

// ---- PostgreSQL: when it is up ----

const pgUrl = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const pool = new pg.Pool({ connectionString: pgUrl, max: 4, connectionTimeoutMillis: 5000 });
pool.on('error', () => {});
const pgUp = await serviceAvailable({
  name: 'PostgreSQL',
  url: pgUrl,
  probe: () => pool.query('SELECT 1'),
});
const pgSchema = `idt_cli_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
const pgTool = `charge-${randomUUID().slice(0, 8)}`;
let pgKeys: Keys;

describe.skipIf(!pgUp)('postgres', () => {
  let store: PostgresStore;
  beforeAll(async () => {
    store = createPostgresStore(pool, { schema: pgSchema, notifications: false });
    await store.ensureSchema();
    const audit = createPostgresAuditLog(pool, { schema: pgSchema });
    await audit.ensureSchema();
    pgKeys = await seed(store, audit.onEvent, pgTool);
    await audit.close();
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${pgSchema} CASCADE`);
    await pool.end();
  });

  commonChecks(
    'postgres',
    () => ['--store', pgUrl, '--schema', pgSchema],
    () => pgKeys,
    () => pgTool,
    true,
  );

  test('purge --expired deletes the expired row', async () => {
    expect(await cliJson(['purge', '--expired', '--store', pgUrl, '--schema', pgSchema])).toEqual({
      deletedRecords: 1,
      deletedAuditEvents: null,
    });
  });

  test('a missing table exits 3 and says how to create it', async () => {
    const run = await cli([
      'list',
      '--store',
      pgUrl,
      '--schema',
      pgSchema,
      '--table',
      'nothing_here',
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`No table ${pgSchema}.nothing_here`);
    expect(run.stderr).toContain('ensureSchema');
  });
});
