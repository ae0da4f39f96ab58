/**
 * A scripted agent turn, offline: a payment tool whose reply is lost, the agent's retry, a
 * parallel duplicate, and an argument drift. Every tool call goes through the executor.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, isAbsolute, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createIdempotency,
  createSqliteAuditLog,
  IdempotencyError,
  type IdempotencyEvent,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';

interface Charge {
  id: string;
  customer: string;
  amount: number;
  turn: string;
}

/**
 * A payment vendor with no idempotency of its own: every request is a new charge. Its ledger is a
 * file, so charges made by another process (one that was killed) count too.
 */
export class PaymentVendor {
  constructor(readonly ledger: string) {}
  get charges(): Charge[] {
    if (!existsSync(this.ledger)) return [];
    return readFileSync(this.ledger, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Charge);
  }
  /** `turn`: the agent's turn, kept with the charge as a vendor keeps your metadata. */
  charge(customer: string, amount: number, turn: string): Charge {
    const id = `ch_${String(this.charges.length + 1).padStart(4, '0')}`;
    const charge = { id, customer, amount, turn };
    appendFileSync(this.ledger, `${JSON.stringify(charge)}\n`);
    return charge;
  }
}

/** The demo's files: the SQLite store and the vendor's ledger. */
export function demoFiles(dir = fileURLToPath(new URL('../.demo-data/', import.meta.url))) {
  return { dir, database: `${dir}/idempotency.sqlite`, ledger: `${dir}/vendor-ledger.jsonl` };
}

/** The charge_card tool, as both the agent and the crashing child run it. */
export function chargeCardTool(
  idempotency: ReturnType<typeof createIdempotency>,
  vendor: PaymentVendor,
) {
  return (args: Record<string, unknown>, turnId: string) =>
    idempotency.run({ toolName: 'charge_card', turnId, args }, async (a) => {
      await new Promise((r) => setTimeout(r, 30)); // the vendor takes a moment
      return vendor.charge(String(a.customer), Number(a.amount), turnId);
    });
}

/** A CRM whose customers are identified by email. */
export class Crm {
  readonly customers = new Map<string, { id: string; email: string; name: string }>();
  create(email: string, name: string) {
    const customer = { id: `cus_${this.customers.size + 1}`, email, name };
    this.customers.set(customer.id, customer);
    return customer;
  }
}

export interface DemoResult {
  charges: number;
  /** The vendor's charges, per turn and amount (`"t-100 1999"`). */
  chargesBy: Record<string, number>;
  customers: number;
  events: IdempotencyEvent[];
  transcript: string[];
}

interface ToolCall {
  id: string;
  name: 'charge_card' | 'create_customer';
  args: Record<string, unknown>;
}

export async function runDemo(
  options: { dir?: string; print?: (line: string) => void } = {},
): Promise<DemoResult> {
  const transcript: string[] = [];
  const say = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const files = demoFiles(options.dir);
  rmSync(files.dir, { recursive: true, force: true });
  mkdirSync(files.dir, { recursive: true });
  const vendor = new PaymentVendor(files.ledger);
  const crm = new Crm();
  const events: IdempotencyEvent[] = [];
  const store = openSqliteStore(files.database);
  // Every call's event also goes to the audit log in the same file: `idempotent-tools stats`
  // reads calls and the replay rate from it (replays leave no record of their own).
  const audit = createSqliteAuditLog(store.database);
  const idempotency = createIdempotency({
    store,
    onEvent: (event) => {
      events.push(event);
      audit.onEvent(event);
    },
  });

  // The tools, as an agent framework would hold them.
  const tools = {
    charge_card: chargeCardTool(idempotency, vendor),
    create_customer: (args: Record<string, unknown>, turnId: string) =>
      idempotency.run(
        { toolName: 'create_customer', turnId, args },
        async (a) => crm.create(String(a.email), String(a.name)),
        { businessKey: (a) => String(a.email).toLowerCase() },
      ),
  };

  /** Run one tool call and render what the model would read. */
  async function toolMessage(call: ToolCall, turnId: string, loseReply = false): Promise<string> {
    try {
      const result = await tools[call.name](call.args, turnId);
      if (loseReply) throw new Error('socket hang up (the reply never reached the agent)');
      return JSON.stringify({ ...(result.value as object), replayed: result.replayed });
    } catch (error) {
      if (IdempotencyError.isInstance(error))
        return JSON.stringify({ error: error.code, message: error.message });
      throw error;
    }
  }

  const step = async (label: string, calls: ToolCall[], turnId: string, loseReply = false) => {
    say(`\n${label}`);
    for (const c of calls)
      say(`  model   -> ${c.name}(${JSON.stringify(c.args)})  [tool call ${c.id}]`);
    const results = await Promise.allSettled(calls.map((c) => toolMessage(c, turnId, loseReply)));
    for (const [i, r] of results.entries()) {
      const id = calls[i]?.id;
      if (r.status === 'fulfilled') say(`  tool    <- ${r.value}  [${id}]`);
      else say(`  network x  ${(r.reason as Error).message}  [${id}]`);
    }
  };

  const charge = { customer: 'cus_42', amount: 1999, currency: 'usd' };
  say(
    'idempotent-tools demo: one agent, a payment tool, and everything that goes wrong with retries',
  );

  await step(
    '1. Turn t-100: the model charges a card; the tool runs, the reply is lost',
    [{ id: 'call_a1', name: 'charge_card', args: charge }],
    't-100',
    true,
  );
  await step(
    '2. The agent retries the same call (a new tool-call id, same turn): replayed',
    [
      {
        id: 'call_a2',
        name: 'charge_card',
        args: { currency: 'usd', amount: 1999, customer: 'cus_42' },
      },
    ],
    't-100',
  );
  await step(
    '3. The model emits the same call twice in one step, in parallel: one execution',
    [
      { id: 'call_b1', name: 'charge_card', args: { ...charge, amount: 500 } },
      { id: 'call_b2', name: 'charge_card', args: { ...charge, amount: 500 } },
    ],
    't-100',
  );
  await step(
    '4. create_customer is keyed by email (a business key)',
    [{ id: 'call_c1', name: 'create_customer', args: { email: 'ada@example.com', name: 'Ada' } }],
    't-100',
  );
  await step(
    '5. A later turn asks again with the same email but another name: argument drift',
    [
      {
        id: 'call_d1',
        name: 'create_customer',
        args: { email: 'ADA@example.com', name: 'Ada Lovelace' },
      },
    ],
    't-101',
  );
  await step(
    '6. A new turn with the same charge arguments is a new intent: it runs',
    [{ id: 'call_e1', name: 'charge_card', args: charge }],
    't-101',
  );
  await step(
    '7. Another user (Bob, his own chat) sends the same words and the model makes the same call:\n   his turn has its own id (the id of his message), so it is his own charge, not a replay',
    [{ id: 'call_g1', name: 'charge_card', args: charge }],
    'bob-chat-7:msg-1',
  );

  say(
    '\n8. Turn t-102: another agent process charges, stores the outcome, and is killed (SIGKILL) before it replies',
  );
  const crash = await runCrashingAgent(files.dir, charge, 't-102');
  say(
    `  process ${crash.pid} died by ${crash.signal}; the vendor ledger now holds ${vendor.charges.length} charges`,
  );
  await step(
    '9. The restarted agent retries the call: the record in the SQLite file replays it',
    [{ id: 'call_f1', name: 'charge_card', args: charge }],
    't-102',
  );
  await audit.close(); // writes the events still buffered
  await store.close();

  const count = (outcome: string) => events.filter((e) => e.outcome === outcome).length;
  say('\nWhat the vendors saw');
  say(
    `  payment vendor charges: ${vendor.charges.length} (${vendor.charges.map((c) => `${c.id} ${c.amount}`).join(', ')})`,
  );
  say(`  CRM customers:          ${crm.customers.size}`);
  say(
    `  tool calls: ${events.length}; executed ${count('executed')}, replayed ${count('replayed')}, waited+replayed ${count('waited')}, drift ${count('drift')}`,
  );
  const chargesBy: Record<string, number> = {};
  for (const { turn, amount } of vendor.charges) {
    chargesBy[`${turn} ${amount}`] = (chargesBy[`${turn} ${amount}`] ?? 0) + 1;
  }
  return {
    charges: vendor.charges.length,
    chargesBy,
    customers: crm.customers.size,
    events,
    transcript,
  };
}

/** The charges the walk-through asks for: one per turn and amount, Bob's of his own. */
const EXPECTED_CHARGES = [
  't-100 1999',
  't-100 500',
  't-101 1999',
  'bob-chat-7:msg-1 1999',
  't-102 1999',
];

/**
 * What `pnpm demo` checks of the walk-through: one charge per turn and amount, and one customer
 * (the drifted call refused). A charge that ran twice, one that is missing (Bob's turn handed
 * the first charge, replayed, leaves him none; the killed process's charge lost) or one nobody
 * asked for is a problem; `[]` when all is well.
 */
export function problems(result: Pick<DemoResult, 'chargesBy' | 'customers'>): string[] {
  const found: string[] = [];
  for (const charge of new Set([...EXPECTED_CHARGES, ...Object.keys(result.chargesBy)])) {
    const want = EXPECTED_CHARGES.includes(charge) ? 1 : 0;
    const got = result.chargesBy[charge] ?? 0;
    if (got > want) found.push(`charge ${charge}: ${got}, expected ${want}`);
    else if (got < want) found.push(`charge ${charge} is missing`);
  }
  if (result.customers !== 1) found.push(`${result.customers} CRM customers, expected 1`);
  return found;
}

/**
 * The CLI command that shows the store's records, calls and replay rate, as a shell line to run
 * in `cwd`. Under `pnpm demo` at the repository's root it is the root's `pnpm cli` (`at.pnpm`: how
 * the user runs pnpm, e.g. `npx --yes pnpm@12.4.2`); elsewhere
 * `npx @idempotent-tools/cli`, which runs the CLI installed in the demo's folder (a dependency of
 * the demo), from that folder.
 */
export function statsCommand(
  database: string,
  cwd = process.cwd(),
  at: { repositoryRoot?: string; pnpm?: string } = {},
): string {
  const folder = dirname(dirname(fileURLToPath(import.meta.url)));
  const quote = (text: string) =>
    /^[\w./:@+-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
  if (at.repositoryRoot !== undefined && relative(at.repositoryRoot, cwd) === '') {
    const inside = relative(cwd, database);
    const file = inside.startsWith('..') || isAbsolute(inside) ? database : inside;
    return `${at.pnpm ?? 'pnpm'} cli stats --store ${quote(`sqlite:${file}`)}`;
  }
  const inside = relative(folder, database);
  const file = inside.startsWith('..') || isAbsolute(inside) ? database : inside;
  const command = `npx @idempotent-tools/cli stats --store ${quote(`sqlite:${file}`)}`;
  const cd = relative(cwd, folder);
  if (cd === '') return command;
  return `cd ${quote(cd.startsWith('..') || isAbsolute(cd) ? folder : cd)} && ${command}`;
}

/** Run `crash-child.ts` in a new Node process (TypeScript via tsx) and wait for it to die. */
function runCrashingAgent(dir: string, args: object, turnId: string) {
  const child = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning', // Node 22's warning on loading node:sqlite
      '--import',
      'tsx',
      fileURLToPath(new URL('./crash-child.ts', import.meta.url)),
      dir,
      turnId,
      JSON.stringify(args),
    ],
    { stdio: ['ignore', 'inherit', 'inherit'], cwd: fileURLToPath(new URL('..', import.meta.url)) },
  );
  return new Promise<{ pid: number | undefined; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (_code, signal) => resolve({ pid: child.pid, signal })),
  );
}
