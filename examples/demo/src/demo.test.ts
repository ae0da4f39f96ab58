import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSqliteAuditLog, openSqliteStore } from '@idempotent-tools/store-sqlite';
import { expect, test } from 'vitest';
import { demoFiles, problems, runDemo, statsCommand } from './demo.js';

test('the demo turn: a lost reply is replayed, a parallel duplicate runs once, drift is refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'demo-'));
  const result = await runDemo({ dir });
  // t-100: one charge of 1999 (the retry replayed), one of 500 (parallel pair); t-101, Bob's own
  // turn with the same arguments, and t-102 (the killed process, whose outcome the retry replays
  // from SQLite): one each.
  expect(result.charges).toBe(5);
  expect(result.customers).toBe(1);
  expect(problems(result)).toEqual([]); // what pnpm demo checks
  expect(result.events.map((e) => e.outcome)).toEqual([
    'executed',
    'replayed',
    'executed',
    'waited',
    'executed',
    'drift',
    'executed',
    'executed',
    'replayed',
  ]);
  const text = result.transcript.join('\n');
  expect(text).toMatch(/"replayed":true\}\s+\[call_a2\]/);
  expect(text).toMatch(/"error":"drift"/);
  expect(text).toMatch(/"id":"ch_0004".*\[call_g1\]/); // Bob's own charge, not a replay
  expect(text).toMatch(/died by SIGKILL/);
  expect(text).toMatch(/"replayed":true\}\s+\[call_f1\]/);

  // Every call is in the audit log of the SQLite file, for `idempotent-tools stats`: `pnpm demo`
  // prints that command last (src/main.ts).
  const store = openSqliteStore(demoFiles(dir).database);
  const audit = createSqliteAuditLog(store.database);
  try {
    expect(await audit.stats()).toMatchObject({ calls: 9, replays: 3 });
    const logged = (await audit.query({ limit: 100 })).events.map((e) => e.outcome).sort();
    expect(logged).toEqual(result.events.map((e) => e.outcome).sort());
  } finally {
    await audit.close();
    await store.close();
  }
});

test("pnpm demo's check fails on a charge that ran twice, went missing or went to another turn", () => {
  const chargesBy = {
    't-100 1999': 1,
    't-100 500': 1,
    't-101 1999': 1,
    'bob-chat-7:msg-1 1999': 1,
    't-102 1999': 1,
  };
  expect(problems({ chargesBy, customers: 1 })).toEqual([]);
  // Bob's turn handed the first charge, replayed: he has none; the same count of 5 charges
  // with t-101's twice is not enough either.
  const { 'bob-chat-7:msg-1 1999': _bob, ...withoutBob } = chargesBy;
  expect(problems({ chargesBy: { ...withoutBob, 't-101 1999': 2 }, customers: 1 })).toEqual([
    'charge t-101 1999: 2, expected 1',
    'charge bob-chat-7:msg-1 1999 is missing',
  ]);
  expect(problems({ chargesBy: { ...chargesBy, 't-103 1999': 1 }, customers: 2 })).toEqual([
    'charge t-103 1999: 1, expected 0',
    '2 CRM customers, expected 1',
  ]);
});

test('the stats command the demo prints runs from where the user is', () => {
  const folder = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
  const own = `${folder}/.demo-data/idempotency.sqlite`;
  const command = 'npx @idempotent-tools/cli stats --store';
  // npm start in the demo's folder, and pnpm demo at the repository root (examples/demo there;
  // a copy of the demo has its own two folders above it).
  expect(statsCommand(own, folder)).toBe(`${command} sqlite:.demo-data/idempotency.sqlite`);
  const twoUp = `${basename(dirname(folder))}/${basename(folder)}`;
  expect(statsCommand(own, join(folder, '../..'))).toBe(
    `cd ${twoUp} && ${command} sqlite:.demo-data/idempotency.sqlite`,
  );
  // Anywhere else: cd to the folder by its absolute path; a database elsewhere keeps its own.
  const elsewhere = statsCommand('/tmp/x y/db.sqlite', join(folder, '../vendor-payments'));
  expect(elsewhere.startsWith(`cd `)).toBe(true);
  expect(elsewhere).toContain(folder);
  expect(elsewhere.endsWith(` && ${command} 'sqlite:/tmp/x y/db.sqlite'`)).toBe(true);
  // `pnpm demo` at the repository's root: the root's own `pnpm cli`, the file from the root.
  const root = join(folder, '../..');
  expect(statsCommand(own, root, { repositoryRoot: root })).toBe(
    `pnpm cli stats --store sqlite:${twoUp}/.demo-data/idempotency.sqlite`,
  );
  // The quick start's `npx --yes pnpm@12.4.2 demo`: the same npx, pnpm is not on the PATH.
  expect(statsCommand(own, root, { repositoryRoot: root, pnpm: 'npx --yes pnpm@12.4.2' })).toBe(
    `npx --yes pnpm@12.4.2 cli stats --store sqlite:${twoUp}/.demo-data/idempotency.sqlite`,
  );
  // Under `pnpm start` in the demo's folder the root's scripts are not at hand: npx, as above.
  expect(statsCommand(own, folder, { repositoryRoot: root })).toBe(
    `${command} sqlite:.demo-data/idempotency.sqlite`,
  );
});
