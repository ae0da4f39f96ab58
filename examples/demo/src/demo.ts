/**
 * A scripted agent turn, offline: a payment tool whose reply is lost, the agent's retry, a
 * parallel duplicate, and an argument drift. Every tool call goes through the executor.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createIdempotency,
  IdempotencyError,
  type IdempotencyEvent,
  type IdempotencyStore,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';

interface Charge {
  id: string;
  customer: string;
  amount: number;
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
  charge(customer: string, amount: number): Charge {
    const id = `ch_${String(this.charges.length + 1).padStart(4, '0')}`;
    const charge = { id, customer, amount };
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
      return vendor.charge(String(a.customer), Number(a.amount));
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
  const store: IdempotencyStore = openSqliteStore(files.database);
  const idempotency = createIdempotency({ store, onEvent: (event) => events.push(event) });

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
  await store.close?.();

  const count = (outcome: string) => events.filter((e) => e.outcome === outcome).length;
  say('\nWhat the vendors saw');
  say(
    `  payment vendor charges: ${vendor.charges.length} (${vendor.charges.map((c) => `${c.id} ${c.amount}`).join(', ')})`,
  );
  say(`  CRM customers:          ${crm.customers.size}`);
  say(
    `  tool calls: ${events.length}; executed ${count('executed')}, replayed ${count('replayed')}, waited+replayed ${count('waited')}, drift ${count('drift')}`,
  );
  return { charges: vendor.charges.length, customers: crm.customers.size, events, transcript };
}

/** Run `crash-child.ts` in a new Node process (TypeScript via tsx) and wait for it to die. */
function runCrashingAgent(dir: string, args: object, turnId: string) {
  const child = spawn(
    process.execPath,
    [
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
