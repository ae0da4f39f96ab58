import { parseArgs } from 'node:util';
import {
  type AuditEntry,
  type AuditStats,
  CALL_OUTCOMES,
  INSPECTION_STATES,
  type InspectionState,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
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

export const VERSION = '0.1.0';

/** Where the CLI writes and what it reads from its environment. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: Readonly<Record<string, string | undefined>>;
  /** @default Date.now */
  now?: () => number;
}

export const HELP = `idempotent-tools: inspect an idempotency store

Usage:
  idempotent-tools inspect <key>    one record (and its audit trail when there is one)
  idempotent-tools list             live records (filter by tool, turn, scope, state)
  idempotent-tools stats            records by state; calls and replay rate from the audit log
  idempotent-tools purge --expired  delete expired records

Store (every command):
  --store URL          sqlite:PATH | redis://HOST:PORT[/DB] | rediss://... | postgres://USER@HOST:PORT/DB
                       (default: $IDEMPOTENT_TOOLS_STORE)
  --table NAME         records table, SQLite and PostgreSQL [idempotency_records]
  --schema NAME        PostgreSQL schema [public]
  --prefix PREFIX      Redis key prefix [idem:]
  --audit-table NAME   audit table, SQLite and PostgreSQL, read when it exists [idempotency_audit]
  --timeout DURATION   longest wait to connect [5s]
  --json               JSON for scripts instead of tables

inspect:  --show-outcome   also print the stored outcome (it may hold sensitive data)
list:     --tool NAME  --turn ID  --scope S  --state in_progress|stale|completed|failed
          --limit N [50]  --cursor C (from the previous page)  --all (every page)
stats:    --tool NAME  --turn ID  --scope S  --since DURATION (audit window) [24h]
purge:    --expired (required)  --audit-retention DURATION (also delete older audit events)

Exit codes: 0 ok, 1 not found (inspect), 2 usage or bad URL, 3 store unreachable or not set up,
4 unexpected error.
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
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>['values'];

const COMMON = ['store', 'table', 'schema', 'prefix', 'audit-table', 'timeout', 'json', 'help'];
const ALLOWED: Record<string, readonly string[]> = {
  inspect: [...COMMON, 'show-outcome'],
  list: [...COMMON, 'tool', 'turn', 'scope', 'state', 'limit', 'cursor', 'all'],
  stats: [...COMMON, 'tool', 'turn', 'scope', 'since'],
  purge: [...COMMON, 'expired', 'audit-retention'],
};

const usage = (message: string) =>
  new CliError(EXIT.usage, `${message} See idempotent-tools --help.`);

/** Run the CLI; resolves to the exit code. */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const now = io.now ?? Date.now;
  let json = argv.includes('--json');
  let opened: OpenedStore | undefined;
  try {
    let parsed: { values: Values; positionals: string[] };
    try {
      parsed = parseArgs({
        args: [...argv],
        options: OPTIONS,
        allowPositionals: true,
        strict: true,
      });
    } catch (error) {
      throw usage(error instanceof Error ? error.message : String(error));
    }
    const { values, positionals } = parsed;
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
    const allowed = ALLOWED[command];
    if (allowed === undefined) throw usage(`Unknown command ${JSON.stringify(command)}.`);
    for (const name of Object.keys(values)) {
      if (!allowed.includes(name)) throw usage(`--${name} does not apply to ${command}.`);
    }
    if (command === 'inspect' ? rest.length !== 1 : rest.length !== 0) {
      throw usage(
        command === 'inspect'
          ? 'inspect takes exactly one key: idempotent-tools inspect <key>.'
          : `${command} takes no positional argument, got ${JSON.stringify(rest.join(' '))}.`,
      );
    }
    if (command === 'purge' && values.expired !== true) {
      throw usage('purge needs --expired: it only deletes records whose retention has passed.');
    }

    const url = values.store ?? io.env.IDEMPOTENT_TOOLS_STORE;
    if (url === undefined || url === '') {
      throw usage('No store: pass --store URL or set IDEMPOTENT_TOOLS_STORE.');
    }
    const timeoutMs = durationOption('--timeout', values.timeout) ?? 5000;
    const auditRetentionMs = durationOption('--audit-retention', values['audit-retention']);
    const sinceMs = durationOption('--since', values.since) ?? 24 * 3_600_000;
    const listFilter = command === 'list' ? toListFilter(values) : undefined;

    opened = await openStore(url, {
      table: values.table,
      schema: values.schema,
      prefix: values.prefix,
      auditTable: values['audit-table'],
      auditRetentionMs,
      timeoutMs,
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
    io.stderr(
      json
        ? `${JSON.stringify({ error: { code: name, exitCode: code, message } })}\n`
        : `idempotent-tools: ${message}\n`,
    );
    return code;
  } finally {
    await opened?.close().catch(() => undefined);
  }
}

function durationOption(option: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === undefined) {
    throw usage(
      `${option} must be a duration such as 500ms, 30s, 15m, 24h or 7d, got ${JSON.stringify(text)}.`,
    );
  }
  return ms;
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
        `--state must be one of ${INSPECTION_STATES.join(', ')}, got ${JSON.stringify(values.state)}.`,
      );
    }
    filter.state = values.state as InspectionState;
  }
  if (values.limit !== undefined) {
    const limit = Number(values.limit);
    if (!/^\d+$/.test(values.limit) || limit < 1 || limit > 1000) {
      throw usage(
        `--limit must be a whole number from 1 to 1000, got ${JSON.stringify(values.limit)}.`,
      );
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
  if (record === undefined) {
    // JSON on stdout for scripts; for people, the message goes to stderr like every failure.
    if (json) out({ key, found: false }, '');
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
  const value = {
    found: true,
    record: {
      ...rest,
      inspectionState: state,
      ...(outcomeBytes === undefined ? {} : { outcomeBytes }),
      ...(showOutcome && outcome !== undefined ? { outcome } : {}),
    },
    audit: trail ?? null,
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
      showOutcome ? (outcome ?? '') : `${outcomeBytes} bytes (--show-outcome prints it)`,
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
    ['ENDED', 'OUTCOME', 'DURATION', 'WAITED', 'ERROR', 'TURN'],
    events.map((e) => [
      isoTime(e.endedAt),
      e.outcome,
      duration(e.durationMs),
      e.waitedMs === undefined ? '-' : duration(e.waitedMs),
      e.errorCode ?? '-',
      e.turnId ?? '-',
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
  out(cursor === undefined ? { records } : { records, cursor }, text);
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
  const since = now() - sinceMs;
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
      records,
      calls: calls ?? null,
      ...(calls === undefined ? { auditNote: opened.auditNote ?? 'no audit log' } : {}),
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
