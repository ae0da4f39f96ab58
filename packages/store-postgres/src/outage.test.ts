import { createIdempotency, type IdempotentResult } from '@idempotent-tools/core';
import { serviceAvailable, sleep, waitFor } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { createPostgresStore } from './postgres-store.js';
import { type DriverCase, pgCase, postgresJsCase } from './test-utils/drivers.js';
import { DATABASE_URL, postgresUp, testPool, uniqueName } from './test-utils/pg.js';
import {
  createThrowawayPostgres,
  findPostgresBin,
  type ThrowawayPostgres,
} from './test-utils/throwaway-postgres.js';

const admin = testPool({ label: 'outage_admin', max: 2 });
const up = await postgresUp(admin);
const bin = findPostgresBin();
const binariesUp =
  bin !== undefined &&
  (await serviceAvailable({
    name: 'PostgreSQL server binaries (initdb, postgres)',
    url: bin,
    probe: async () => {},
  }));

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  await admin.end();
});

type Settled = { i: number; ran: boolean } & (
  | { ok: true; result: IdempotentResult<{ n: number; token: string }> }
  | { ok: false; code: string }
);

/**
 * Calls against a store whose engine goes away mid-run (`breakIt`) and comes back (`repair`):
 * calls fail closed with store_unavailable without running the tool, and afterwards work again
 * with every completed record still there.
 */
async function outageScenario(options: {
  driver: DriverCase;
  connectionString: string;
  breakIt: (applicationName: string) => Promise<void>;
  repair: () => Promise<void>;
}): Promise<void> {
  const opened = await options.driver.open({
    label: 'outage',
    max: 4,
    failFast: true,
    url: options.connectionString,
  });
  const store = createPostgresStore(opened.client, { table: uniqueName('outage') });
  cleanups.push(async () => {
    await store.close();
    await opened.end();
  });
  await store.ensureSchema();
  const idempotency = createIdempotency({ store, lease: 5_000 });
  const runs = new Map<number, number>();
  const call = async (i: number): Promise<Settled> => {
    let ran = false;
    try {
      const result = await idempotency.run(
        { toolName: 'create_ticket', turnId: `turn-${i}`, args: { i } },
        async () => {
          ran = true;
          runs.set(i, (runs.get(i) ?? 0) + 1);
          await sleep(2);
          return { n: i, token: crypto.randomUUID() };
        },
      );
      return { i, ran, ok: true, result };
    } catch (error) {
      return { i, ran, ok: false, code: (error as { code?: string }).code ?? String(error) };
    }
  };

  // Before: a first batch completes.
  const settled: Settled[] = await Promise.all(Array.from({ length: 20 }, (_, i) => call(i)));
  expect(settled.every((s) => s.ok)).toBe(true);

  // Mid-run: four lanes keep calling while the engine goes away.
  let next = 20;
  let running = true;
  const lanes = Array.from({ length: 4 }, async () => {
    while (running) {
      settled.push(await call(next++));
      await sleep(5);
    }
  });
  await sleep(150);
  await options.breakIt(opened.applicationName!);
  const brokenAt = next;
  // Keep calling until a dozen calls made while it is away have settled (however long they
  // take on this machine), not for a fixed time that a slow machine may fill with one call.
  // postgres.js queues statements while all its connections wait to reconnect (see below): a
  // few of its calls fail at once, the others wait for the server.
  const queues = options.driver.name === 'postgres.js';
  const duringOutage = () => settled.filter((s) => s.i >= brokenAt).length;
  if (!queues) await waitFor('calls made during the outage', () => duringOutage() >= 12);
  else {
    // postgres.js may queue every lane's statement until the server is back (which of them
    // fail at once depends on when each connection noticed): none need settle during the
    // outage. What must hold is below: whatever settles fails closed, and after the repair
    // nothing ran twice and nothing was lost.
    await waitFor('a call made during the outage', () => duringOutage() >= 1, 5_000).catch(
      () => undefined,
    );
  }
  running = false;
  // postgres.js queues a statement while all its connections are reconnecting: it waits until
  // the server is back (then runs or fails), so its lane ends only after the repair.
  if (!queues) await Promise.all(lanes);
  else await Promise.race([Promise.all(lanes), sleep(2_000)]);
  const beforeRepair = settled.length;

  // While it is away: fail closed, the tool does not run.
  const during = settled.slice(0, beforeRepair).filter((s) => s.i >= brokenAt);
  if (!queues) expect(during.length).toBeGreaterThan(0);
  for (const s of during)
    expect({ i: s.i, ok: s.ok, ran: s.ran }).toEqual({ i: s.i, ok: false, ran: false });
  if (during.length > 0) {
    expect(new Set(during.map((s) => (s.ok ? 'ok' : s.code)))).toEqual(
      new Set(['store_unavailable']),
    );
  }
  const failed = settled.filter((s) => !s.ok);
  // A call in flight at the break may have run its tool and then failed to store the outcome.
  for (const s of failed) {
    expect(['store_unavailable', 'persist_failed']).toContain(s.code);
    if (s.code === 'store_unavailable') expect(s.ran).toBe(false);
  }

  // Back: the pool reconnects, new calls work, every completed record replays.
  await options.repair();
  await Promise.all(lanes);
  // A queued call settled after the repair: it ran (once), or failed closed.
  for (const s of settled.slice(beforeRepair)) {
    if (!s.ok) expect(['store_unavailable', 'persist_failed']).toContain(s.code);
  }
  const runsBefore = [...runs.values()].reduce((a, b) => a + b, 0);
  let fresh: Settled | undefined;
  await waitFor('a call to work again', async () => {
    fresh = await call(100_000);
    return fresh.ok;
  });
  expect(fresh).toMatchObject({ ok: true, ran: true });
  const completed = settled.filter((s) => s.ok && s.result.outcome === 'executed');
  expect(completed.length).toBeGreaterThanOrEqual(20);
  for (const s of completed) {
    if (!s.ok) continue;
    const replay = await call(s.i);
    expect(replay).toMatchObject({ ok: true, ran: false });
    if (replay.ok) {
      expect(replay.result.replayed).toBe(true);
      expect(replay.result.value).toEqual(s.result.value);
    }
  }
  expect([...runs.values()].reduce((a, b) => a + b, 0)).toBe(runsBefore + 1);
  for (const [i, count] of runs) expect({ i, count }).toEqual({ i, count: 1 });
}

/**
 * Per network driver: pg and postgres.js. PGlite is not here: it runs inside this process, with
 * no server to kill and no connection to cut (a closed instance is in drivers.test.ts).
 */
describe.each([pgCase, postgresJsCase])('$name', (driver) => {
  describe.skipIf(!up)('outage on the shared server (own database)', () => {
    test('connections terminated and refused: store_unavailable, then back with nothing lost', async () => {
      const database = uniqueName('idt_outage');
      await admin.query(`CREATE DATABASE ${database}`);
      cleanups.push(() => admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
      const url = new URL(DATABASE_URL);
      url.pathname = `/${database}`;
      await outageScenario({
        driver,
        connectionString: url.toString(),
        breakIt: async (applicationName) => {
          // Refuse new connections to this database only, then kill the store's.
          await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
          await admin.query(
            'SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1',
            [applicationName],
          );
        },
        repair: async () => {
          await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
        },
      });
    });
  });

  describe.skipIf(!binariesUp)('outage of a throwaway server (crash and restart)', () => {
    test('server killed mid-run: store_unavailable, then back after WAL recovery with nothing lost', async () => {
      let server: ThrowawayPostgres | undefined;
      try {
        server = await createThrowawayPostgres(bin!);
      } catch (error) {
        if (process.env.CI === 'true') throw error;
        console.warn(`[idempotent-tools] SKIPPED: throwaway PostgreSQL did not start: ${error}`);
        return;
      }
      const running = server;
      cleanups.push(() => running.destroy());
      await outageScenario({
        driver,
        connectionString: running.url,
        breakIt: () => running.stop(),
        repair: () => running.start(),
      });
    });
  });
});
