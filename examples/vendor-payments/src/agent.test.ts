import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

const dataDir = () => mkdtempSync(join(tmpdir(), 'vendor-payments-'));

test('the crash matrix: killed at every step, each order is charged once and paid out once', async () => {
  const result = await main({ dataDir: dataDir() });
  // The vendors' own counts, per order: [kill point, PayCo charges, bank transfers].
  expect(result.scenarios.map((s) => [s.killAt ?? 'none', s.payco, s.bank])).toEqual([
    ['none', 1, 1],
    ['payco:before-call', 1, 1],
    ['payco:received', 1, 1],
    ['payco:after-reply', 1, 1],
    ['bank:before-call', 1, 1],
    ['bank:received', 1, 1],
    ['bank:after-reply', 1, 1],
    ['tool:after-return', 1, 1],
    ['after-persist', 1, 1],
    ['bank:received', 1, 1],
  ]);
  expect(result).toMatchObject({ orders: 10, charges: 1, duplicates: 0, missing: 0 });

  const [baseline, ...killed] = result.scenarios;
  expect(baseline?.agents.map((a) => a.signal)).toEqual([null]);
  // Every other first agent really died by SIGKILL, and a new process finished the call.
  for (const s of killed) {
    expect(s.agents[0]?.signal).toBe('SIGKILL');
    expect(s.agents.at(-1)?.reply).toMatchObject({ order: s.order });
  }
  // What each resumed agent did (its idempotency events).
  const resumed = Object.fromEntries(
    killed.slice(0, 8).map((s) => [s.killAt, [s.agents[1]?.found, ...(s.agents[1]?.events ?? [])]]),
  );
  expect(resumed).toEqual({
    'payco:before-call': ['in_progress', 'bank.transfer executed', 'checkout executed'],
    'payco:received': ['in_progress', 'bank.transfer executed', 'checkout executed'],
    'payco:after-reply': ['in_progress', 'bank.transfer executed', 'checkout executed'],
    // reconcile: the bank has no transfer with that reference, so the ledger call runs
    'bank:before-call': ['in_progress', 'bank.transfer executed', 'checkout executed'],
    // reconcile: the bank has it, the ledger adopts it
    'bank:received': ['in_progress', 'bank.transfer reconciled', 'checkout executed'],
    'bank:after-reply': ['in_progress', 'bank.transfer reconciled', 'checkout executed'],
    'tool:after-return': ['in_progress', 'bank.transfer replayed', 'checkout executed'],
    'after-persist': ['completed', 'checkout replayed'],
  });
  expect(killed[7]?.agents[1]?.reply).toMatchObject({ replayed: true });
  // PayCo (idempotentHandler) replayed the charge by its Idempotency-Key on every re-execution
  // after it charged: six kill points from payco:received to tool:after-return, and twice in the
  // last scenario. The key went as an RFC 8941 String (headerFormat 'sf-string').
  const text = result.transcript.join('\n');
  expect(text.match(/same key, same request -> replays/g)).toHaveLength(8);
  expect(text).toMatch(/PayCo {2}POST \/v1\/charges key "v1_/);

  // The bank's search is down: the ledger cannot tell, the model is told to check first; the
  // next process reconciles once the search is back.
  const searchDown = result.scenarios[9];
  expect(searchDown?.agents.map((a) => a.signal)).toEqual(['SIGKILL', null, null]);
  expect(searchDown?.agents[1]?.reply).toMatchObject({
    error: 'outcome_unknown',
    next: 'check-first',
  });
  expect(searchDown?.agents[1]?.events).toEqual([
    'bank.transfer outcome-unknown',
    'checkout failed',
  ]);
  expect(searchDown?.agents[2]?.events).toEqual(['bank.transfer reconciled', 'checkout executed']);
});

test('the negative control: without the key and the ledger, the same kills charge twice', async () => {
  const result = await main({
    dataDir: dataDir(),
    naive: true,
    killPoints: ['payco:received', 'bank:after-reply'],
  });
  expect(result.scenarios.map((s) => [s.killAt, s.payco, s.bank])).toEqual([
    ['payco:received', 2, 1],
    ['bank:after-reply', 2, 2],
  ]);
  expect(result.duplicates).toBe(3);
});
