/**
 * Issue 17, the CLI's first five minutes: what a new user mistypes and what the CLI answers, what
 * `--show-outcome` prints, the JSON every command prints, and `stats` on the demo's own
 * database. The real bin on real SQLite files.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createIdempotency } from '@idempotent-tools/core';
import { createSqliteAuditLog, openSqliteStore } from '@idempotent-tools/store-sqlite';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { main } from './main.js';
import { cli, type Run } from './test-utils/run-cli.js';

/**
 * `main` in this process: the bin minus its two lines, for the long tables of cases (each
 * `cli()` is a Node process); the first case of each table also runs the real bin.
 */
async function inProcess(args: readonly string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    env: {},
  });
  return { code, stdout, stderr };
}

const dir = mkdtempSync(join(tmpdir(), 'idempotent-cli-first-'));
const file = join(dir, 'agent.db');
const store = ['--store', `sqlite:${file}`];
/** A store URL whose file does not exist: a check that opened it would exit 3, not 2. */
const nowhere = ['--store', `sqlite:${join(dir, 'nowhere.db')}`];
const keys = { value: '', failed: '', undefined: '', encrypted: '', unreadable: '', stale: '' };
/** A store without encrypted outcomes (settle --value refuses a store with some), for settle. */
const plainFile = join(dir, 'plain.db');

class CardDeclinedError extends Error {
  override name = 'CardDeclinedError';
  readonly code = 'card_declined';
}

beforeAll(async () => {
  const sqlite = openSqliteStore(file);
  const audit = createSqliteAuditLog(sqlite.database);
  const idempotency = createIdempotency({
    store: sqlite,
    onEvent: audit.onEvent,
    isTerminalError: (e) => e instanceof CardDeclinedError,
  });
  const call = (turnId: string, args: object) => ({ toolName: 'charge_card', turnId, args });
  keys.value = (
    await idempotency.run(call('t-1', { amount: 5 }), async () => ({ id: 'ch_1', amount: 5 }))
  ).key;
  const declined = call('t-2', { amount: 6 });
  await idempotency
    .run(declined, async () => {
      throw new CardDeclinedError('card declined');
    })
    .catch(() => undefined);
  keys.failed = idempotency.keyOf(declined).key;
  keys.undefined = (await idempotency.run(call('t-3', { amount: 7 }), async () => undefined)).key;
  const sealed = createIdempotency({
    store: sqlite,
    encryption: { keys: { k1: randomBytes(32) }, current: 'k1' },
  });
  keys.encrypted = (
    await sealed.run(call('t-4', { amount: 8 }), async () => ({ secret: 'card 4242' }))
  ).key;
  // Written by hand: not an outcome the library wrote.
  keys.unreadable = 'v1_by-hand';
  await sqlite.claim({
    key: keys.unreadable,
    fingerprint: 'fp',
    token: 't',
    leaseMs: 60_000,
    ttlMs: 3_600_000,
  });
  await sqlite.complete({
    key: keys.unreadable,
    token: 't',
    state: 'completed',
    outcome: 'not json',
    ttlMs: 3_600_000,
  });
  // An attempt that died: stale at once.
  keys.stale = 'v1_stale';
  await sqlite.claim({
    key: keys.stale,
    fingerprint: 'fp',
    token: 'd',
    leaseMs: 1,
    ttlMs: 3_600_000,
  });
  await audit.close();
  await sqlite.close();
  const plain = openSqliteStore(plainFile);
  for (const key of [keys.stale, 'v1_stale-2']) {
    await plain.claim({ key, fingerprint: 'fp', token: 'd', leaseMs: 1, ttlMs: 3_600_000 });
  }
  await plain.close();
  await new Promise((r) => setTimeout(r, 20));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a mistyped option or command: what was meant, and the usage', () => {
  test('unknown option --stor: "did you mean --store?", the command usage, exit 2', async () => {
    const run = await cli(['list', '--stor', file]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    const [first, blank, usage] = run.stderr.split('\n');
    expect(first).toBe('idempotent-tools: unknown option --stor; did you mean --store?');
    expect(blank).toBe('');
    expect(usage).toBe('Usage: idempotent-tools list [--tool NAME] [--turn ID] [--scope S]');
    expect(run.stderr).toContain('--limit N');
    expect(run.stderr).toMatch(/Every option: idempotent-tools --help\n$/);
    // What Node's parser said before: gone.
    expect(run.stderr).not.toContain('positional argument');
    expect(run.stderr).not.toContain('"--stor"');
  });

  test('the suggestion comes from the command own options; another command option is named as such', async () => {
    const cases: Array<[string[], string]> = [
      [['list', '--limt', '3'], 'unknown option --limt; did you mean --limit?'],
      [
        ['inspect', 'k', '--show-outcom'],
        'unknown option --show-outcom; did you mean --show-outcome?',
      ],
      [['stats', '--sinec', '1h'], 'unknown option --sinec; did you mean --since?'],
      [['list', '--lim', '3'], 'unknown option --lim; did you mean --limit?'],
      [
        ['stats', '--limt', '3'],
        'unknown option --limt (--limit is an option of list, not of stats)',
      ],
      [['list', '--frobnicate'], 'unknown option --frobnicate'],
      [['list', '-x'], 'unknown option -x'],
      [['stats', '--limit', '3'], '--limit does not apply to stats.'],
      [['list', '--store'], '--store needs a value.'],
      [
        ['list', '--tool', '--all'],
        '--tool needs a value, got the option --all after it (a value that starts with - is written --tool=VALUE).',
      ],
      [['list', '--json=yes'], '--json takes no value, got --json=yes.'],
      [['inspect'], 'inspect takes exactly one key, got none.'],
    ];
    for (const [i, [args, message]] of cases.entries()) {
      const run = await (i === 0 ? cli : inProcess)([...store, ...args]);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr.split('\n')[0]).toBe(`idempotent-tools: ${message}`);
      expect(run.stderr).toContain(`\nUsage: idempotent-tools ${args[0]} `);
    }
  });

  test('unknown command: "did you mean", the list of commands, exit 2', async () => {
    const cases: Array<[string, string]> = [
      ['lsit', 'unknown command lsit; did you mean list?'],
      ['stat', 'unknown command stat; did you mean stats?'],
      ['inspet', 'unknown command inspet; did you mean inspect?'],
      ['setle', 'unknown command setle; did you mean settle?'],
      ['frobnicate', 'unknown command frobnicate'],
    ];
    for (const [i, [command, message]] of cases.entries()) {
      const run = await (i === 0 ? cli : inProcess)([command, 'k', ...store]);
      expect(run.code, command).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr.split('\n')[0]).toBe(`idempotent-tools: ${message}`);
      expect(run.stderr).toContain('\nUsage:\n  idempotent-tools inspect <key>');
      expect(run.stderr).toContain('  idempotent-tools purge --expired');
    }
  });

  test('--json: the error and the usage as JSON on stderr', async () => {
    const run = await cli(['list', '--stor', file, '--json']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    const { error } = JSON.parse(run.stderr);
    expect(error).toEqual({
      code: 'usage',
      exitCode: 2,
      message: 'unknown option --stor; did you mean --store?',
      usage: expect.stringMatching(/^Usage: idempotent-tools list /),
    });
  });
});

describe('numeric options say what is wrong, before the store is opened', () => {
  test('every numeric option, with negative, zero, too large and non-numeric values', async () => {
    const duration = (option: string, got: string, max?: string) =>
      `${option} must be a duration such as 500ms, 30s, 15m, 24h or 7d${max === undefined ? '' : `, at most ${max}`}, got ${got}.`;
    const limit = (got: string) => `--limit must be a whole number from 1 to 1000, got ${got}.`;
    const settle = ['settle', 'v1_x', '--released', '--by', 'ops', '--reason', 'r'];
    const cases: Array<[string[], string]> = [
      [['list', '--limit', '-1'], limit('-1')],
      [['list', '--limit=-1'], limit('-1')],
      [['list', '--limit', '0'], limit('0')],
      [['list', '--limit', '1001'], limit('1001')],
      [['list', '--limit', '2.5'], limit('2.5')],
      [['list', '--limit', 'ten'], limit('ten')],
      [['list', '--limit='], limit('""')],
      [['list', '--timeout', '-5s'], duration('--timeout', '-5s', '1h')],
      [['list', '--timeout', '0'], duration('--timeout', '0', '1h')],
      [['list', '--timeout', '2h'], duration('--timeout', '2h', '1h')],
      [['stats', '--since', '-1h'], duration('--since', '-1h')],
      [['stats', '--since', 'yesterday'], duration('--since', 'yesterday')],
      [['purge', '--expired', '--audit-retention', '-7d'], duration('--audit-retention', '-7d')],
      [[...settle, '--ttl', '-1d'], duration('--ttl', '-1d', '366d')],
      [[...settle, '--ttl', '400d'], duration('--ttl', '400d', '366d')],
    ];
    for (const [i, [args, message]] of cases.entries()) {
      const run = await (i === 0 ? cli : inProcess)([...args, ...nowhere]);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe(`idempotent-tools: ${message}\n`);
    }
  });

  test('a negative number is a value: --value -1 settles with -1', async () => {
    const run = await cli([
      'settle',
      keys.stale,
      '--value',
      '-1',
      '--by',
      'ops',
      '--reason',
      'refund of 1 found',
      '--store',
      `sqlite:${plainFile}`,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const shown = await cli([
      'inspect',
      keys.stale,
      '--show-outcome',
      '--store',
      `sqlite:${plainFile}`,
    ]);
    expect(shown.stdout).toMatch(/^outcome\s+-1$/m);
  });
});

describe('--show-outcome: the outcome the call returned, never the stored wrapper', () => {
  const inspect = async (key: string) => {
    const text = await cli(['inspect', key, '--show-outcome', ...store]);
    expect(text.code).toBe(0);
    const json = await cli(['inspect', key, '--show-outcome', '--json', ...store]);
    expect(json.code).toBe(0);
    const line = text.stdout.split('\n').find((l) => l.startsWith('outcome '));
    return {
      line: line?.replace(/^outcome\s+/, ''),
      text: text.stdout,
      json: JSON.parse(json.stdout),
    };
  };

  test('a value: as the call returned it', async () => {
    const { line, text, json } = await inspect(keys.value);
    expect(line).toBe('{"id":"ch_1","amount":5}');
    expect(text).not.toContain('"v"');
    expect(json.outcome).toEqual({ kind: 'value', value: { id: 'ch_1', amount: 5 } });
    expect(json.record).not.toHaveProperty('outcome');
  });

  test('a terminal error: its name, message and code', async () => {
    const { line, text, json } = await inspect(keys.failed);
    expect(line).toBe(
      'terminal error CardDeclinedError: card declined (code card_declined) (replayed as ReplayedFailureError)',
    );
    expect(text).not.toContain('"e"');
    expect(json.outcome).toEqual({
      kind: 'error',
      error: { name: 'CardDeclinedError', message: 'card declined', code: 'card_declined' },
    });
  });

  test('undefined, encrypted and unreadable outcomes are said to be what they are', async () => {
    const none = await inspect(keys.undefined);
    expect(none.line).toBe('undefined (the call returned no value)');
    expect(none.json.outcome).toEqual({ kind: 'undefined' });

    const sealed = await inspect(keys.encrypted);
    expect(sealed.line).toMatch(
      /^encrypted with key k1: the CLI has no keys and does not decrypt it/,
    );
    expect(sealed.text).not.toContain('enc:v1');
    expect(sealed.text).not.toContain('4242');
    expect(sealed.json.outcome).toEqual({ kind: 'encrypted', keyId: 'k1' });

    const hand = await inspect(keys.unreadable);
    expect(hand.line).toBe('not an outcome this library wrote (shown as stored): not json');
    expect(hand.json.outcome).toEqual({ kind: 'unreadable', raw: 'not json' });
  });

  test('without --show-outcome: its size only', async () => {
    const run = await cli(['inspect', keys.value, ...store]);
    expect(run.stdout).toMatch(/^outcome\s+\d+ bytes \(--show-outcome prints it\)$/m);
    expect(run.stdout).not.toContain('ch_1');
  });
});

describe('--json: one flat object per command, the same keys every time', () => {
  const keysOf = async (args: string[], code = 0) => {
    const run = await cli([...args, '--json', ...store]);
    expect(run.code, args.join(' ')).toBe(code);
    return Object.keys(JSON.parse(run.stdout)).sort();
  };

  test('list, inspect, stats, purge: the keys the README documents', async () => {
    expect(await keysOf(['list'])).toEqual(['cursor', 'records']);
    expect(await keysOf(['list', '--limit', '1'])).toEqual(['cursor', 'records']);
    const inspect = ['audit', 'auditTrail', 'found', 'key', 'outcome', 'record'];
    expect(await keysOf(['inspect', keys.value])).toEqual(inspect);
    expect(await keysOf(['inspect', 'v1_nothing'], 1)).toEqual(inspect);
    expect(await keysOf(['stats'])).toEqual(
      [
        'store',
        'at',
        'total',
        'inProgress',
        'stale',
        'completed',
        'failed',
        'since',
        'calls',
        'replays',
        'replayRate',
        'byOutcome',
        'audit',
        'auditNote',
      ].sort(),
    );
    expect(await keysOf(['purge', '--expired'])).toEqual(['deletedAuditEvents', 'deletedRecords']);
    const settled = await cli([
      'settle',
      'v1_stale-2',
      '--released',
      '--by',
      'ops',
      '--reason',
      'nothing at the vendor',
      '--json',
      '--store',
      `sqlite:${plainFile}`,
    ]);
    expect(settled.code).toBe(0);
    const settle = JSON.parse(settled.stdout);
    expect(Object.keys(settle).sort()).toEqual(
      ['action', 'audit', 'by', 'key', 'previous', 'reason'].sort(),
    );
    expect(Object.keys(settle.previous).sort()).toEqual(
      ['createdAt', 'fingerprint', 'leaseExpiresAt', 'meta', 'token'].sort(),
    );
    expect(settle).toMatchObject({ action: 'released', previous: { meta: null } });
  });

  test('stats: counts at the top level, none nested under records', async () => {
    const run = await cli(['stats', '--json', ...store]);
    const stats = JSON.parse(run.stdout);
    expect(stats).toMatchObject({
      store: 'sqlite',
      total: 6,
      inProgress: 0,
      stale: 1,
      completed: 4,
      failed: 1,
    });
    expect(stats.calls).toBeGreaterThan(0);
    expect(typeof stats.replayRate).toBe('number');
    expect(stats.audit).toBe(`idempotency_audit in ${file}`);
    expect(stats.since).toBeLessThan(stats.at);
    for (const [name, value] of Object.entries(stats)) {
      if (name !== 'byOutcome')
        expect(typeof value === 'object' && value !== null, name).toBe(false);
    }
  });
});

// The demo (examples/demo) writes its calls to an audit log in its SQLite file and prints the CLI
// command that reads it: run the demo, then that command, on the real bin.
describe('stats on the demo database', () => {
  test('shows its calls and replay rate, with the command the demo prints', async () => {
    const demoDir = fileURLToPath(new URL('../../../examples/demo', import.meta.url));
    const demo = (await import(pathToFileURL(join(demoDir, 'src/demo.ts')).href)) as {
      runDemo(options: { dir: string }): Promise<unknown>;
      demoFiles(dir: string): { database: string };
      /** The line `pnpm demo` prints last (examples/demo/src/main.ts), from where the user is. */
      statsCommand(database: string, cwd?: string): string;
    };
    const data = mkdtempSync(join(tmpdir(), 'idempotent-cli-demo-'));
    try {
      await demo.runDemo({ dir: data });
      const printed = demo.statsCommand(demo.demoFiles(data).database).trim();
      const match = /^(?:cd (\S+) && )?npx @idempotent-tools\/cli (stats --store sqlite:\S+)$/.exec(
        printed,
      );
      expect(match, printed).not.toBeNull();
      expect(resolve(match![1] ?? process.cwd())).toBe(demoDir);
      const run = await cli(match![2]!.split(' '));
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(run.stdout).not.toContain('unknown');
      // 9 calls: 5 executed, 2 replayed, 1 waited and replayed, 1 drift.
      expect(run.stdout).toMatch(/^ {2}calls {8}9$/m);
      expect(run.stdout).toMatch(/^ {2}replays {6}3$/m);
      expect(run.stdout).toMatch(/^ {2}replay rate {2}33\.3%$/m);
      expect(run.stdout).toContain('by outcome   executed 5, replayed 2, waited 1, drift 1');
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });
});

describe('issue 27: the first mistakes get a message that says what to type', () => {
  test('--store ./agent.db (a bare path): exit 2, and the message names sqlite:./agent.db', async () => {
    const run = await inProcess(['stats', '--store', './agent.db']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/For the SQLite file \.\/agent\.db, write sqlite:\.\/agent\.db\./);
  });

  test('inspect not-a-key: it says the argument is not a key, and what keys look like', async () => {
    const run = await inProcess(['inspect', 'not-a-key', ...store]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/"not-a-key" is not an idempotency key: keys look like v1_/);
  });
});
