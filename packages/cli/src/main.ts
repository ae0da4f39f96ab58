import { parseArgs } from 'node:util';
import {
  type AuditEntry,
  type AuditStats,
  CALL_OUTCOMES,
  closestName,
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
  INSPECTION_STATES,
  type InspectionState,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
  type Settlement,
  type StatsFilter,
  type StoreStats,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import {
  duration,
  fields,
  isoTime,
  parseDuration,
  percent,
  relative,
  table,
  when,
} from './format.js';
import { CliError, EXIT, type OpenedStore, openStore } from './open-store.js';
import { outcomeText, readOutcome } from './outcome.js';

export const VERSION = '0.1.0';

/** Where the CLI writes and what it reads from its environment. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
  /** @default Date.now */
  now?: () => number;
}

export const HELP = `idempotent-tools: inspect an idempotency store, settle a stuck record

Usage:
  idempotent-tools inspect <key>    one record (and its audit trail when there is one)
  idempotent-tools list             live records (filter by tool, turn, scope, state)
  idempotent-tools stats            records by state; calls and replay rate from the audit log
  idempotent-tools purge --expired  delete expired records
  idempotent-tools settle <key> (--value JSON | --released) --by WHO --reason WHY
                                    decide a stale record (its attempt died): completed with
                                    the outcome you found, or released so the call runs again

Store (every command):
  --store URL          sqlite:PATH | redis://HOST:PORT[/DB] | rediss://... | postgres://USER@HOST:PORT/DB
                       (default: $IDEMPOTENT_TOOLS_STORE)
  --table NAME         records table, SQLite and PostgreSQL [idempotency_records]
  --schema NAME        PostgreSQL schema [public]
  --prefix PREFIX      Redis key prefix [idem:]
  --audit-table NAME   audit table, SQLite and PostgreSQL, read when it exists [idempotency_audit]
  --timeout DURATION   longest wait to connect, at most 1h [5s]
  --json               one JSON object on stdout instead of tables (errors: JSON on stderr)

inspect:  --show-outcome   also print the outcome the call returned: its value, or the terminal
                           error (name, message, code); an encrypted one is not decrypted (it
                           may hold sensitive data)
list:     --tool NAME  --turn ID  --scope S  --state in_progress|stale|completed|failed
          --limit N (1 to 1000) [50]  --cursor C (from the previous page)  --all (every page)
stats:    --tool NAME  --turn ID  --scope S  --since DURATION (audit window) [24h]
purge:    --expired (required)  --audit-retention DURATION (also delete older audit events)
settle:   --value JSON (the outcome, replayed from then on) or --released (the call may run again)
          --by WHO and --reason WHY (both required, kept in the audit trail)
          --ttl DURATION (how long a settled outcome is kept, at most 366d) [24h]
          Only a stale record (its lease ran out) is settled: a running attempt never is.
          The 'settled' event is written to the audit table (--audit-table, created if missing)
          in the store's database (SQLite, PostgreSQL); Redis keeps no audit log: the event is
          printed on stderr as one JSON line. --value is refused on a store whose outcomes are
          encrypted (the CLI has no keys): settle with idempotency.settle() from your code.

Durations: 500ms, 30s, 15m, 24h, 7d. A value that starts with - other than a number: --by=-x.

Exit codes: 0 ok, 1 not found (inspect, settle), 2 usage or bad URL, 3 store unreachable or not
set up, 4 unexpected error, 5 settle refused (the record is still running, or finished).
`;

const OPTIONS = {
  store: { type: 'string' },
  table: { type: 'string' },
  schema: { type: 'string' },
  prefix: { type: 'string' },
  'audit-table': { type: 'string' },
  timeout: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
  'show-outcome': { type: 'boolean' },
  tool: { type: 'string' },
  turn: { type: 'string' },
  scope: { type: 'string' },
  state: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  since: { type: 'string' },
  expired: { type: 'boolean' },
  'audit-retention': { type: 'string' },
  value: { type: 'string' },
  released: { type: 'boolean' },
  by: { type: 'string' },
  reason: { type: 'string' },
  ttl: { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>['values'];

const COMMON = ['store', 'table', 'schema', 'prefix', 'audit-table', 'timeout', 'json', 'help'];
const ALLOWED: Record<string, readonly string[]> = {
  inspect: [...COMMON, 'show-outcome'],
  list: [...COMMON, 'tool', 'turn', 'scope', 'state', 'limit', 'cursor', 'all'],
  stats: [...COMMON, 'tool', 'turn', 'scope', 'since'],
  purge: [...COMMON, 'expired', 'audit-retention'],
  settle: [...COMMON, 'value', 'released', 'by', 'reason', 'ttl'],
};
const COMMANDS = Object.keys(ALLOWED);

const SETTLE_USAGE =
  "idempotent-tools settle <key> (--value '<json>' | --released) --by WHO --reason WHY";

/** Each command's usage, printed after a usage error of that command. */
const USAGE: Record<string, string> = {
  inspect: 'idempotent-tools inspect <key> [--show-outcome] [--store URL] [--json]',
  list: 'idempotent-tools list [--tool NAME] [--turn ID] [--scope S]\n         [--state in_progress|stale|completed|failed] [--limit N] [--cursor C | --all]\n         [--store URL] [--json]',
  stats:
    'idempotent-tools stats [--tool NAME] [--turn ID] [--scope S] [--since DURATION]\n         [--store URL] [--json]',
  purge: 'idempotent-tools purge --expired [--audit-retention DURATION] [--store URL] [--json]',
  settle: `${SETTLE_USAGE}\n         [--ttl DURATION] [--store URL] [--json]`,
};

/** The usage of `command`, or the list of commands. */
function usageOf(command: string | undefined): string {
  const usage =
    command !== undefined && USAGE[command] !== undefined
      ? `Usage: ${USAGE[command]}`
      : HELP.slice(HELP.indexOf('Usage:'), HELP.indexOf('\n\nStore'));
  return `${usage}\nEvery option: idempotent-tools --help`;
}

/** A bad value: the message says what is wrong and what is expected. */
const usage = (message: string) => new CliError(EXIT.usage, message);

/** A bad command line (unknown command or option, a missing value): with the command's usage. */
const badUsage = (message: string, command: string | undefined) =>
  new CliError(EXIT.usage, message, usageOf(command));

/** A value as the user typed it, quoted when that is needed to see it. */
function shown(text: string): string {
  return /^[\w.:+@/-]+$/.test(text) ? text : JSON.stringify(text);
}

/**
 * The known name `name` was meant to be: core's `closestName` (edit distance), else two swapped
 * neighbours (`lsit`), else the one name it starts (`--lim`).
 */
function suggestion(name: string, known: readonly string[]): string | undefined {
  const close = closestName(name, known);
  if (close !== undefined) return close;
  const lower = name.toLowerCase();
  const swapped = known.find((candidate) => {
    if (candidate.length !== lower.length) return false;
    const diff = [...candidate].flatMap((c, i) => (c === lower[i] ? [] : [i]));
    return (
      diff.length === 2 &&
      diff[1] === diff[0]! + 1 &&
      candidate[diff[0]!] === lower[diff[1]!] &&
      candidate[diff[1]!] === lower[diff[0]!]
    );
  });
  if (swapped !== undefined) return swapped;
  const prefixed = lower.length >= 3 ? known.filter((c) => c.startsWith(lower)) : [];
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** A value of a string option may start with `-` only when it is a number (`--limit -1`). */
const NEGATIVE_NUMBER = /^-\.?\d/;

/**
 * The command line, checked: every option is known, takes a value when it needs one (a
 * negative number is a value, so `--limit -1` is told what is wrong with -1), and none is
 * given to a flag. Usage errors name what was typed and the closest option or command.
 */
function parseCommandLine(argv: readonly string[]): { values: Values; positionals: string[] } {
  const { tokens } = parseArgs({
    args: [...argv],
    options: OPTIONS,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const positionals = tokens.flatMap((t) => (t.kind === 'positional' ? [t.value] : []));
  const first = positionals[0];
  const command = first !== undefined && COMMANDS.includes(first) ? first : undefined;
  const helpOrVersion = tokens.some(
    (t) => t.kind === 'option' && (t.name === 'help' || t.name === 'version'),
  );
  const values: Record<string, string | boolean> = {};
  for (const token of tokens) {
    if (token.kind === 'positional' && token.value === first && command === undefined) {
      if (helpOrVersion) continue;
      const meant = suggestion(first, COMMANDS);
      throw badUsage(
        `unknown command ${shown(first)}${meant === undefined ? '' : `; did you mean ${meant}?`}`,
        undefined,
      );
    }
    if (token.kind !== 'option') continue;
    const spec = (OPTIONS as Record<string, { type: string } | undefined>)[token.name];
    if (spec === undefined) {
      const long = token.rawName.startsWith('--');
      const meant = long
        ? suggestion(token.name, command === undefined ? Object.keys(OPTIONS) : ALLOWED[command]!)
        : undefined;
      // Close to an option of another command: say whose it is.
      const elsewhere =
        long && meant === undefined && command !== undefined
          ? suggestion(token.name, Object.keys(OPTIONS))
          : undefined;
      const owners = COMMANDS.filter(
        (c) => elsewhere !== undefined && ALLOWED[c]!.includes(elsewhere),
      );
      throw badUsage(
        `unknown option ${token.rawName}${
          meant !== undefined
            ? `; did you mean --${meant}?`
            : elsewhere !== undefined
              ? ` (--${elsewhere} is an option of ${owners.join(', ')}, not of ${command})`
              : ''
        }`,
        command,
      );
    }
    if (spec.type === 'boolean') {
      if (token.value !== undefined) {
        throw badUsage(
          `${token.rawName} takes no value, got ${token.rawName}=${shown(token.value)}.`,
          command,
        );
      }
      values[token.name] = true;
      continue;
    }
    const value = token.value;
    const missing =
      value === undefined ||
      (token.inlineValue === false && value.startsWith('-') && !NEGATIVE_NUMBER.test(value));
    if (missing) {
      throw badUsage(
        value === undefined
          ? `${token.rawName} needs a value.`
          : `${token.rawName} needs a value, got the option ${shown(value)} after it (a value that starts with - is written ${token.rawName}=VALUE).`,
        command,
      );
    }
    values[token.name] = value;
  }
  return { values: values as Values, positionals };
}

/** Run the CLI; resolves to the exit code. */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const now = io.now ?? Date.now;
  let json = argv.includes('--json');
  let opened: OpenedStore | undefined;
  try {
    const { values, positionals } = parseCommandLine(argv);
    json = values.json === true;
    if (values.version === true) {
      io.stdout(json ? `${JSON.stringify({ version: VERSION })}\n` : `${VERSION}\n`);
      return EXIT.ok;
    }
    const [command, ...rest] = positionals;
    if (values.help === true) {
      io.stdout(HELP);
      return EXIT.ok;
    }
    if (command === undefined) {
      io.stderr(HELP);
      return EXIT.usage;
    }
    const allowed = ALLOWED[command]!;
    for (const name of Object.keys(values)) {
      if (!allowed.includes(name)) {
        throw badUsage(`--${name} does not apply to ${command}.`, command);
      }
    }
    const takesKey = command === 'inspect' || command === 'settle';
    if (takesKey ? rest.length !== 1 : rest.length !== 0) {
      throw badUsage(
        takesKey
          ? `${command} takes exactly one key, got ${rest.length === 0 ? 'none' : rest.map(shown).join(' ')}.`
          : `${command} takes no positional argument, got ${rest.map(shown).join(' ')}.`,
        command,
      );
    }
    const settlement = command === 'settle' ? toSettlement(rest[0]!, values) : undefined;
    if (command === 'purge' && values.expired !== true) {
      throw usage('purge needs --expired: it only deletes records whose retention has passed.');
    }

    const timeoutMs = durationOption('--timeout', values.timeout, MAX_TIMEOUT) ?? 5000;
    const auditRetentionMs = durationOption('--audit-retention', values['audit-retention']);
    const sinceMs = durationOption('--since', values.since) ?? 24 * 3_600_000;
    const ttlMs = durationOption('--ttl', values.ttl, MAX_TTL) ?? 24 * 3_600_000;
    const listFilter = command === 'list' ? toListFilter(values) : undefined;
    const url = values.store ?? io.env.IDEMPOTENT_TOOLS_STORE;
    if (url === undefined || url === '') {
      throw usage('No store: pass --store URL or set IDEMPOTENT_TOOLS_STORE.');
    }

    const auditErrors: unknown[] = [];
    opened = await openStore(url, {
      table: values.table,
      schema: values.schema,
      prefix: values.prefix,
      auditTable: values['audit-table'],
      auditRetentionMs,
      timeoutMs,
      ...(command === 'settle'
        ? {
            auditWrite: true,
            onAuditError: (error: unknown) => auditErrors.push(error),
          }
        : {}),
    });
    const out = (value: unknown, text: string) =>
      io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);

    switch (command) {
      case 'inspect':
        return await inspect(
          opened,
          rest[0]!,
          values['show-outcome'] === true,
          now,
          out,
          json,
          (text) => io.stderr(`idempotent-tools: ${text}\n`),
        );
      case 'list':
        return await list(opened, listFilter!, values.all === true, now, out);
      case 'stats':
        return await stats(opened, toStatsFilter(values), sinceMs, values.since, now, out);
      case 'settle':
        return await settle(opened, rest[0]!, settlement!, ttlMs, auditErrors, now, out, (text) =>
          io.stderr(text),
        );
      default:
        return await purge(opened, values['audit-retention'], out);
    }
  } catch (error) {
    const code =
      error instanceof CliError
        ? error.exitCode
        : InvalidInputError.isInstance(error)
          ? EXIT.usage
          : StoreUnavailableError.isInstance(error)
            ? EXIT.unavailable
            : EXIT.internal;
    const message = error instanceof Error ? error.message : String(error);
    const name = Object.entries(EXIT).find(([, c]) => c === code)?.[0] ?? 'internal';
    const usageText = error instanceof CliError ? error.usage : undefined;
    io.stderr(
      json
        ? `${JSON.stringify({ error: { code: name, exitCode: code, message, usage: usageText ?? null } })}\n`
        : `idempotent-tools: ${message}\n${usageText === undefined ? '' : `\n${usageText}\n`}`,
    );
    return code;
  } finally {
    await opened?.close().catch(() => undefined);
  }
}

/** Longest `--timeout`: an hour (a connection that takes longer is down). */
const MAX_TIMEOUT = 3_600_000;
/** Longest `--ttl`: the executor's limit, 366 days. */
const MAX_TTL = 366 * 86_400_000;

function durationOption(
  option: string,
  text: string | undefined,
  max?: number,
): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === undefined || (max !== undefined && ms > max)) {
    throw usage(
      `${option} must be a duration such as 500ms, 30s, 15m, 24h or 7d${max === undefined ? '' : `, at most ${duration(max)}`}, got ${shown(text)}.`,
    );
  }
  return ms;
}

interface SettleRequest {
  settlement: Settlement;
  operator: { by: string; reason: string };
}

/** `settle`'s options, checked before the store is opened. */
function toSettlement(key: string, values: Values): SettleRequest {
  if (key.length > 1024)
    throw usage(`The key is ${key.length} characters; keys have at most 1024.`);
  const released = values.released === true;
  if (released === (values.value !== undefined)) {
    throw usage(
      `settle needs exactly one of --value '<json>' (the outcome you found, replayed from then on) or --released (the call may run again): ${SETTLE_USAGE}.`,
    );
  }
  const by = values.by?.trim() ?? '';
  const reason = values.reason?.trim() ?? '';
  if (by === '' || reason === '') {
    throw usage(
      `settle needs --by (who settles it) and --reason (why, e.g. what you checked), both kept in the audit trail: ${SETTLE_USAGE}.`,
    );
  }
  const operator = { by: values.by!, reason: values.reason! };
  if (released) return { settlement: { released: true }, operator };
  let completed: unknown;
  try {
    completed = JSON.parse(values.value!);
  } catch {
    throw usage(
      `--value must be JSON, the value the tool returned: e.g. --value '{"id":"ch_9"}' (a string is '"text"'), got ${JSON.stringify(values.value)}.`,
    );
  }
  return { settlement: { completed }, operator };
}

function toStatsFilter(values: Values): StatsFilter {
  const filter: StatsFilter = {};
  if (values.tool !== undefined) filter.toolName = values.tool;
  if (values.turn !== undefined) filter.turnId = values.turn;
  if (values.scope !== undefined) filter.scope = values.scope;
  return filter;
}

function toListFilter(values: Values): ListFilter {
  const filter: ListFilter = toStatsFilter(values);
  if (values.state !== undefined) {
    if (!INSPECTION_STATES.includes(values.state as InspectionState)) {
      throw usage(
        `--state must be one of ${INSPECTION_STATES.join(', ')}, got ${shown(values.state)}.`,
      );
    }
    filter.state = values.state as InspectionState;
  }
  if (values.limit !== undefined) {
    const limit = Number(values.limit);
    if (!/^\d+$/.test(values.limit) || limit < 1 || limit > 1000) {
      throw usage(`--limit must be a whole number from 1 to 1000, got ${shown(values.limit)}.`);
    }
    filter.limit = limit;
  }
  if (values.cursor !== undefined) {
    if (values.all === true) throw usage('--cursor and --all do not go together.');
    filter.cursor = values.cursor;
  }
  return filter;
}

type Out = (value: unknown, text: string) => void;

/** What a key of the executor looks like: `v1_` and base64url characters (43 of them). */
const KEY_SHAPE = /^v1_[A-Za-z0-9_-]+$/;

async function inspect(
  opened: OpenedStore,
  key: string,
  showOutcome: boolean,
  now: () => number,
  out: Out,
  json: boolean,
  err: (text: string) => void,
): Promise<number> {
  const record = await opened.store.get(key);
  const where = opened.auditName ?? null;
  if (record === undefined) {
    // JSON on stdout for scripts; for people, the message goes to stderr like every failure.
    if (json)
      out({ key, found: false, record: null, outcome: null, audit: where, auditTrail: null }, '');
    else if (!KEY_SHAPE.test(key))
      err(
        `${JSON.stringify(key)} is not an idempotency key: keys look like v1_ followed by 43 letters, digits, - or _ (an event's key, or \`idempotent-tools list\`). Nothing under it.`,
      );
    else
      err(
        `No live record under ${key}: never stored, released after a retryable error, or expired.`,
      );
    return EXIT.notFound;
  }
  const trail =
    opened.audit === undefined ? undefined : (await opened.audit.query({ key, limit: 20 })).events;
  const t = now();
  const { outcome, ...rest } = record;
  const state = inspectionStateOf(record, t);
  const outcomeBytes = outcome === undefined ? undefined : Buffer.byteLength(outcome);
  const shownOutcome = showOutcome && outcome !== undefined ? readOutcome(outcome) : undefined;
  const value = {
    key,
    found: true,
    record: {
      ...rest,
      inspectionState: state,
      ...(outcomeBytes === undefined ? {} : { outcomeBytes }),
    },
    outcome: shownOutcome ?? null,
    audit: where,
    auditTrail: trail ?? null,
  };
  const lines: Array<[string, string]> = [
    ['key', record.key],
    ['state', state === 'stale' ? 'stale (in_progress, lease ran out: outcome unknown)' : state],
    ['tool', record.meta?.toolName ?? '-'],
    ['scope', record.meta?.scope ?? '-'],
    ['turn', record.meta?.turnId ?? '-'],
    ['created', when(record.createdAt, t)],
  ];
  if (record.state === 'in_progress') lines.push(['lease expires', when(record.leaseExpiresAt, t)]);
  if (record.completedAt !== undefined) lines.push(['completed', when(record.completedAt, t)]);
  lines.push(['expires', when(record.expiresAt, t)]);
  lines.push(['args fingerprint', record.fingerprint]);
  if (outcomeBytes !== undefined) {
    lines.push([
      'outcome',
      shownOutcome === undefined
        ? `${outcomeBytes} bytes (--show-outcome prints it)`
        : outcomeText(shownOutcome),
    ]);
  }
  let text = fields(lines);
  if (trail !== undefined) {
    text += `\n\nAudit trail (newest first)\n${trail.length === 0 ? 'no events' : auditTable(trail)}`;
  }
  out(value, text);
  return EXIT.ok;
}

function auditTable(events: readonly AuditEntry[]): string {
  return table(
    ['ENDED', 'OUTCOME', 'DURATION', 'WAITED', 'ERROR', 'TURN', 'OPERATOR'],
    events.map((e) => [
      isoTime(e.endedAt),
      e.outcome,
      duration(e.durationMs),
      e.waitedMs === undefined ? '-' : duration(e.waitedMs),
      e.errorCode ?? '-',
      e.turnId ?? '-',
      e.operator === undefined
        ? '-'
        : `${e.operator.action} by ${e.operator.by}: ${e.operator.reason}`,
    ]),
  );
}

async function list(
  opened: OpenedStore,
  filter: ListFilter,
  all: boolean,
  now: () => number,
  out: Out,
): Promise<number> {
  const { store } = opened;
  if (store.list === undefined) throw usage(`The ${store.name} store cannot list records.`);
  const records: ListedRecord[] = [];
  let cursor: string | undefined;
  if (all) {
    let next: string | undefined;
    do {
      const page = await store.list({
        ...filter,
        limit: filter.limit ?? 1000,
        ...(next === undefined ? {} : { cursor: next }),
      });
      records.push(...page.records);
      next = page.cursor;
    } while (next !== undefined);
  } else {
    const page = await store.list({ ...filter, limit: filter.limit ?? 50 });
    records.push(...page.records);
    cursor = page.cursor;
  }
  const t = now();
  let text =
    records.length === 0
      ? 'No records match.'
      : table(
          ['KEY', 'STATE', 'TOOL', 'TURN', 'SCOPE', 'CREATED', 'EXPIRES'],
          records.map((r) => [
            r.key,
            r.inspectionState,
            r.meta?.toolName ?? '-',
            r.meta?.turnId ?? '-',
            r.meta?.scope ?? '-',
            isoTime(r.createdAt),
            relative(r.expiresAt, t),
          ]),
        );
  if (records.length > 0) text += `\n\n${records.length} record${records.length === 1 ? '' : 's'}`;
  if (cursor !== undefined) text += `; more: --cursor ${cursor} (or --all)`;
  out({ records, cursor: cursor ?? null }, text);
  return EXIT.ok;
}

async function stats(
  opened: OpenedStore,
  filter: StatsFilter,
  sinceMs: number,
  sinceText: string | undefined,
  now: () => number,
  out: Out,
): Promise<number> {
  const { store } = opened;
  if (store.stats === undefined) throw usage(`The ${store.name} store cannot count records.`);
  const records: StoreStats = await store.stats(filter);
  const since = Math.max(0, now() - sinceMs);
  const calls: AuditStats | undefined =
    opened.audit === undefined ? undefined : await opened.audit.stats({ ...filter, since });
  let text = `Records (live, ${store.name} store)\n${fields([
    ['total', String(records.records)],
    ['in progress', String(records.inProgress)],
    ['stale', String(records.stale)],
    ['completed', String(records.completed)],
    ['failed', String(records.failed)],
  ]).replace(/^/gm, '  ')}\n\n`;
  if (calls === undefined) {
    text += `Calls and replay rate: unknown (${opened.auditNote ?? 'no audit log'}). Record events with an audit log (createSqliteAuditLog / createPostgresAuditLog) to see them.`;
  } else {
    const byOutcome = CALL_OUTCOMES.filter((o) => calls.byOutcome[o] > 0)
      .map((o) => `${o} ${calls.byOutcome[o]}`)
      .join(', ');
    text += `Calls (audit log, last ${sinceText ?? '24h'})\n${fields([
      ['calls', String(calls.calls)],
      ['replays', String(calls.replays)],
      ['replay rate', percent(calls.replayRate)],
      ['by outcome', byOutcome === '' ? '-' : byOutcome],
    ]).replace(/^/gm, '  ')}`;
  }
  out(
    {
      store: store.name,
      at: records.at,
      total: records.records,
      inProgress: records.inProgress,
      stale: records.stale,
      completed: records.completed,
      failed: records.failed,
      since,
      calls: calls?.calls ?? null,
      replays: calls?.replays ?? null,
      replayRate: calls?.replayRate ?? null,
      byOutcome: calls?.byOutcome ?? null,
      audit: opened.auditName ?? null,
      auditNote: calls === undefined ? (opened.auditNote ?? 'no audit log') : null,
    },
    text,
  );
  return EXIT.ok;
}

async function purge(
  opened: OpenedStore,
  auditRetention: string | undefined,
  out: Out,
): Promise<number> {
  const { store } = opened;
  if (store.purgeExpired === undefined) {
    throw usage(`The ${store.name} store cannot purge (it expires records itself).`);
  }
  const deleted = await store.purgeExpired();
  let auditDeleted: number | null = null;
  let text = `Deleted ${deleted} expired record${deleted === 1 ? '' : 's'}.`;
  if (auditRetention !== undefined) {
    if (opened.audit === undefined) {
      text += `\nNo audit events deleted: ${opened.auditNote ?? 'no audit log'}.`;
    } else {
      auditDeleted = await opened.audit.purgeExpired();
      text += `\nDeleted ${auditDeleted} audit event${auditDeleted === 1 ? '' : 's'} older than ${auditRetention}.`;
    }
  }
  out({ deletedRecords: deleted, deletedAuditEvents: auditDeleted }, text);
  return EXIT.ok;
}

/** How many finished records `settle` opens to tell whether outcomes are encrypted. */
const SAMPLE = 20;

/**
 * Whether the store holds encrypted outcomes (`enc:v1:...`, sealed by an executor with
 * `encryption`): up to `SAMPLE` completed and `SAMPLE` failed records of the tool, then of any tool.
 */
async function holdsEncryptedOutcomes(
  store: IdempotencyStore,
  toolName: string | undefined,
): Promise<boolean> {
  if (store.list === undefined) return false;
  const filters: ListFilter[] =
    toolName === undefined || toolName === '' ? [{}] : [{ toolName }, {}];
  for (const filter of filters) {
    for (const state of ['completed', 'failed'] as const) {
      const page = await store.list({ ...filter, state, limit: SAMPLE });
      for (const listed of page.records) {
        const record = await store.get(listed.key);
        if (record?.outcome?.startsWith('enc:') === true) return true;
      }
    }
  }
  return false;
}

async function settle(
  opened: OpenedStore,
  key: string,
  { settlement, operator }: SettleRequest,
  ttlMs: number,
  auditErrors: readonly unknown[],
  now: () => number,
  out: Out,
  stderr: (text: string) => void,
): Promise<number> {
  const { store } = opened;
  if ('completed' in settlement) {
    const stuck = await store.get(key);
    if (await holdsEncryptedOutcomes(store, stuck?.meta?.toolName)) {
      throw usage(
        `The outcomes in this store are encrypted (createIdempotency({ encryption })), and the CLI has no keys: an outcome it stored would be plaintext, refused on replay. Nothing was changed. Settle it from your code with idempotency.settle('${key}', { completed: value }, { by, reason }) on an executor with the same encryption, or release it here with --released.`,
      );
    }
  }
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({
    store,
    ttl: ttlMs,
    onEvent: (event) => {
      events.push(event);
      opened.audit?.onEvent(event);
    },
  });
  let result: Awaited<ReturnType<typeof idempotency.settle>>;
  try {
    result = await idempotency.settle(key, settlement, operator);
  } catch (error) {
    // Nothing to settle (no record: 1), or not now (still running, or finished: 5).
    if (InvalidInputError.isInstance(error) && error.field === 'key') {
      const record = await store.get(key).catch(() => undefined);
      throw new CliError(record === undefined ? EXIT.notFound : EXIT.conflict, error.message);
    }
    throw error;
  }
  const event = events.find((e) => e.outcome === 'settled');
  const line = `${JSON.stringify(event ?? null)}\n`;
  const settled =
    result.action === 'completed'
      ? `Settled ${key}: completed with the given outcome (replayed from now on).`
      : `Settled ${key}: released (the next call runs the tool).`;
  let audit: string;
  if (opened.audit === undefined) {
    // Redis: no audit log; the event goes to stderr for the operator's own trail.
    stderr(line);
    audit = `${opened.auditNote ?? 'no audit log'}: the settled event is on stderr (one JSON line)`;
  } else {
    await opened.audit.flush();
    if (auditErrors.length > 0 || event === undefined) {
      stderr(line);
      const cause = auditErrors[0];
      throw new CliError(
        EXIT.unavailable,
        `${settled} But its audit entry could not be written to ${opened.auditName}: ${cause instanceof Error ? cause.message : String(cause)} The event is on stderr (one JSON line): keep it in your audit trail.`,
      );
    }
    audit = `written to ${opened.auditName}`;
  }
  const { previous } = result;
  const t = now();
  out(
    {
      key,
      action: result.action,
      by: operator.by,
      reason: operator.reason,
      previous: {
        token: previous.token,
        fingerprint: previous.fingerprint,
        createdAt: previous.createdAt,
        leaseExpiresAt: previous.leaseExpiresAt,
        meta: previous.meta ?? null,
      },
      audit: opened.audit === undefined ? null : opened.auditName,
    },
    `${settled}\n${fields([
      ['by', operator.by],
      ['reason', operator.reason],
      ['tool', previous.meta?.toolName ?? '-'],
      ['turn', previous.meta?.turnId ?? '-'],
      ['attempt started', when(previous.createdAt, t)],
      ['its lease ran out', when(previous.leaseExpiresAt, t)],
      ['audit', audit],
    ])}`,
  );
  return EXIT.ok;
}
