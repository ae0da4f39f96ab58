import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import Database from 'better-sqlite3';
import { afterAll, describe, expect } from 'vitest';
import {
  createIdempotency,
  createSqliteStore,
  IdempotencyError,
  type SqliteStore,
} from './index.js';
import { betterTest, driverTest } from './test-utils/better-sqlite3.js';

const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-outage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const codeOf = (error: unknown) => (IdempotencyError.isInstance(error) ? error.code : error);

/** One connection and its store; `reopen` brings the file back after an outage. */
interface Harness {
  store: SqliteStore;
  /** The outage: the connection goes away. */
  close(): void;
  /** Back: the same store again (node:sqlite `db.open()`), or a new connection and store. */
  reopen(): SqliteStore;
  end(): void;
}

function harness(driver: 'node:sqlite' | 'better-sqlite3', file: string): Harness {
  if (driver === 'node:sqlite') {
    const db = new DatabaseSync(file);
    const store = createSqliteStore(db);
    return {
      store,
      close: () => db.close(),
      reopen: () => {
        db.open();
        return store;
      },
      end: () => db.isOpen && db.close(),
    };
  }
  let db = new Database(file);
  return {
    store: createSqliteStore(db),
    close: () => db.close(),
    reopen: () => {
      db = new Database(file);
      return createSqliteStore(db);
    },
    end: () => db.open && db.close(),
  };
}

describe('sqlite store outage', () => {
  for (const driver of ['node:sqlite', 'better-sqlite3'] as const) {
    driverTest(driver)(
      `connection closed mid-run (${driver}): store_unavailable, the tool does not run; reopened, nothing is lost`,
      async () => {
        const file = join(dir, `${randomUUID()}.db`);
        const h = harness(driver, file);
        let idempotency = createIdempotency({ store: h.store, lease: 1_000 });
        let runs = 0;
        const tool = (args: { n: number }) => {
          runs++;
          return { n: args.n, at: runs };
        };
        const call = (turn: string, n: number) => ({
          toolName: 'charge',
          turnId: turn,
          args: { n },
        });

        const done = await Promise.all(
          Array.from({ length: 20 }, (_, n) => idempotency.run(call('done', n), tool)),
        );
        expect(runs).toBe(20);

        // A call is running when the connection goes away: its outcome cannot be stored. The
        // connection goes once the tool runs (its claim is in), not after a guessed delay.
        const running = Promise.withResolvers<void>();
        const gate = Promise.withResolvers<void>();
        const inFlight = idempotency
          .run(call('in-flight', 0), async (args) => {
            running.resolve();
            await gate.promise;
            return tool(args);
          })
          .catch((e: unknown) => e);
        await running.promise;
        h.close();
        gate.resolve();
        expect(codeOf(await inFlight)).toBe('persist_failed');
        expect(runs).toBe(21);

        // While it is down every call fails closed: fresh calls and replays alike.
        const down = await Promise.all([
          ...Array.from({ length: 10 }, (_, n) =>
            idempotency.run(call('fresh', n), tool).catch((e: unknown) => e),
          ),
          idempotency.run(call('done', 0), tool).catch((e: unknown) => e),
        ]);
        expect(down.map(codeOf)).toEqual(Array(11).fill('store_unavailable'));
        expect(runs).toBe(21);

        // Back: every completed record is still there and replays; the failed calls run once.
        idempotency = createIdempotency({ store: h.reopen(), lease: 1_000 });
        const replays = await Promise.all(
          Array.from({ length: 20 }, (_, n) => idempotency.run(call('done', n), tool)),
        );
        expect(replays.map((r) => [r.replayed, r.value])).toEqual(done.map((r) => [true, r.value]));
        const fresh = await Promise.all(
          Array.from({ length: 10 }, (_, n) => idempotency.run(call('fresh', n), tool)),
        );
        expect(fresh.every((r) => !r.replayed)).toBe(true);
        expect(runs).toBe(31);
        // The attempt cut off mid-run is never re-run blindly.
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const unknown = await idempotency.run(call('in-flight', 0), tool).catch((e: unknown) => e);
        expect(codeOf(unknown)).toBe('outcome_unknown');
        expect(runs).toBe(31);
        h.end();
      },
    );
  }

  betterTest(
    'the write lock held by another process past busyTimeoutMs: store_unavailable, then back',
    async () => {
      const file = join(dir, `${randomUUID()}.db`);
      const db = new Database(file);
      const store = createSqliteStore(db, { busyTimeoutMs: 200 });
      const idempotency = createIdempotency({ store });
      let runs = 0;
      const tool = () => ++runs;
      const done = await idempotency.run({ toolName: 't', turnId: 'done', args: {} }, tool);

      // Another process takes the write lock and keeps it until told to let go.
      const locker = spawn(
        process.execPath,
        [
          '-e',
          `const db = new (require('node:sqlite').DatabaseSync)(process.argv[1]);
         db.exec('BEGIN IMMEDIATE'); console.log('locked');
         process.stdin.on('data', () => { db.exec('COMMIT'); db.close(); process.exit(0); });`,
          file,
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      await new Promise((resolve) => locker.stdout.once('data', resolve));

      const started = performance.now();
      const failed = await idempotency
        .run({ toolName: 't', turnId: 'fresh', args: {} }, tool)
        .catch((e: unknown) => e);
      expect(codeOf(failed)).toBe('store_unavailable');
      expect((failed as Error).message).toContain('busyTimeoutMs (200 ms)');
      expect(performance.now() - started).toBeGreaterThanOrEqual(150);
      expect(runs).toBe(1);
      // Readers never wait for the writer in WAL mode: replays keep working.
      const replay = await idempotency.run({ toolName: 't', turnId: 'done', args: {} }, tool);
      expect(replay).toMatchObject({ replayed: true, value: done.value });

      locker.stdin.write('go\n');
      await new Promise((resolve) => locker.once('exit', resolve));
      const fresh = await idempotency.run({ toolName: 't', turnId: 'fresh', args: {} }, tool);
      expect(fresh).toMatchObject({ replayed: false, value: 2 });
      db.close();
    },
  );
});

describe('issue 26: complete is sent again past the lease while the file is locked', () => {
  betterTest(
    'a 2 s write lock from another process, a 1.5 s lease: the result is kept, the retry replays it (before the fix: lost)',
    async () => {
      const file = join(dir, `${randomUUID()}.db`);
      const db = new DatabaseSync(file);
      const store = createSqliteStore(db, { busyTimeoutMs: 100 });
      const idempotency = createIdempotency({ store, lease: 1_500 });
      let locker: ReturnType<typeof spawn> | undefined;
      let runs = 0;
      const first = await idempotency.run(
        { toolName: 't', turnId: 'locked', args: {} },
        async () => {
          runs++;
          // Another process takes the write lock just before the tool returns, for 2 s.
          locker = spawn(
            process.execPath,
            [
              '-e',
              `const db = new (require('node:sqlite').DatabaseSync)(process.argv[1]);
             db.exec('BEGIN IMMEDIATE'); console.log('locked');
             setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, 2000);`,
              file,
            ],
            { stdio: ['ignore', 'pipe', 'inherit'] },
          );
          await new Promise((resolve) => locker?.stdout?.once('data', resolve));
          return 'charged';
        },
      );
      expect(first).toMatchObject({ value: 'charged', outcome: 'executed' });
      const replay = await idempotency.run(
        { toolName: 't', turnId: 'locked', args: {} },
        async () => {
          runs++;
          return 'again';
        },
      );
      expect(replay).toMatchObject({ value: 'charged', replayed: true });
      expect(runs).toBe(1);
      await new Promise((resolve) =>
        locker?.exitCode !== null ? resolve(undefined) : locker.once('exit', resolve),
      );
      db.close();
    },
  );
});
