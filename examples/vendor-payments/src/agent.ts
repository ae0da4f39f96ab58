/**
 * The crash matrix: for every step of a checkout, an agent process is killed (SIGKILL) right
 * there, then a new process runs the same tool call. The two mock vendors run here, in this
 * process, and count what they really did: each order must be charged once at PayCo and paid
 * out once at LegacyBank, whatever step the agent died at.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { AgentLine, AgentProcessInput } from './agent-process.js';
import { type CheckoutArgs, STEPS, type Step } from './checkout.js';
import { type LegacyBank, type PayCo, startLegacyBank, startPayCo } from './vendors.js';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));

/** A kill point of the matrix, and what the world looks like when the agent dies there. */
interface Scenario {
  killAt: Step | undefined;
  what: string;
  /** The bank's search is down during the first resume (reconcile cannot tell). */
  searchDownOnce?: boolean;
}

const SCENARIOS: Scenario[] = [
  { killAt: undefined, what: 'no crash (the baseline)' },
  { killAt: 'payco:before-call', what: 'the tool call is claimed, PayCo not called yet' },
  { killAt: 'payco:received', what: 'PayCo charged; the agent dies before the reply arrives' },
  { killAt: 'payco:after-reply', what: 'PayCo replied; nothing is stored yet' },
  { killAt: 'bank:before-call', what: "the ledger's pending row is written; the bank not called" },
  { killAt: 'bank:received', what: 'the bank moved the money; the agent dies before the reply' },
  { killAt: 'bank:after-reply', what: 'the bank replied; the ledger row is still pending' },
  { killAt: 'tool:after-return', what: "the tool returned; its outcome isn't stored yet" },
  { killAt: 'after-persist', what: 'the outcome is stored; the reply to the model never left' },
  {
    killAt: 'bank:received',
    what: "the bank moved the money, the agent dies; at the first resume the bank's search is down",
    searchDownOnce: true,
  },
];

const FOUND: Record<string, string> = {
  in_progress:
    "the dead agent's claim (in_progress): once its lease runs out the call re-executes (onStale: 'reexecute', vendorDedupes)",
  completed: 'the stored outcome (completed): replayed, no vendor is called',
};

export interface ScenarioResult {
  killAt: Step | undefined;
  order: string;
  /** Charges PayCo made for this order. */
  payco: number;
  /** Transfers the bank made for this order. */
  bank: number;
  /** Per agent process: how it ended, its idempotency events, its reply to the model. */
  agents: AgentRun[];
}

export interface AgentRun {
  signal: NodeJS.Signals | null;
  /** The state of the tool call's record when the process started, if there was one. */
  found: string | undefined;
  events: string[];
  reply: unknown;
}

export interface VendorPaymentsResult {
  /** Orders checked out (one per scenario). */
  orders: number;
  /** The most charges (PayCo) or transfers (bank) any one order got: 1 when nothing ran twice. */
  charges: number;
  /** Charges and transfers beyond the first, over every order: 0 when nobody was paid twice. */
  duplicates: number;
  /** Orders a vendor never charged or paid out (must be 0 too). */
  missing: number;
  scenarios: ScenarioResult[];
  transcript: string[];
}

/** Run one agent process to its end (or its death); `onStart` gets the child to kill. */
async function runAgent(
  input: AgentProcessInput,
  onStart: (kill: () => void) => void,
  print: (line: string) => void,
): Promise<AgentRun> {
  const child = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning', // Node 22's warning on loading node:sqlite
      '--import',
      'tsx',
      join(exampleDir, 'src/agent-process.ts'),
      JSON.stringify(input),
    ],
    { cwd: exampleDir, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  onStart(() => child.kill('SIGKILL'));
  const events: string[] = [];
  let reply: unknown;
  let found: string | undefined;
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (text) => {
    const line = JSON.parse(text) as AgentLine;
    if (line.type === 'found') {
      found = line.state;
      print(`      SQLite: ${FOUND[line.state] ?? line.state}`);
    } else if (line.type === 'event') events.push(`${line.toolName} ${line.outcome}`);
    else reply = line.output;
  });
  const signal = await new Promise<NodeJS.Signals | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (_code, sig) => resolve(sig));
  });
  return { signal, found, events, reply };
}

export interface MainOptions {
  /** Where the transcript goes, line by line. @default nowhere (it is returned too) */
  print?: (line: string) => void;
  /** Folder of the SQLite file; emptied at start. @default the example's `.demo-data/` */
  dataDir?: string;
  /** Only the scenarios that kill at these steps (`'none'`: the baseline). @default all */
  killPoints?: ReadonlyArray<Step | 'none'>;
  /** Run the negative control (no Idempotency-Key, no ledger) to see the matrix catch it. @default false */
  naive?: boolean;
}

export async function main(options: MainOptions = {}): Promise<VendorPaymentsResult> {
  const transcript: string[] = [];
  const say = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const dataDir = options.dataDir ?? join(exampleDir, '.demo-data');
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });

  /** The kill armed for the vendor-side steps: fired once, by the vendor that did the work. */
  let armed: { at: Step; kill: () => void } | undefined;
  const hooks = {
    received: (vendor: 'payco' | 'bank') => {
      if (armed === undefined || armed.at !== `${vendor}:received`) return undefined;
      armed.kill();
      armed = undefined;
      return 'drop' as const;
    },
    log: (line: string) => say(`      ${line}`),
  };
  let payco: PayCo | undefined;
  let bank: LegacyBank | undefined;
  const scenarios: ScenarioResult[] = [];
  try {
    payco = await startPayCo(hooks);
    bank = await startLegacyBank(hooks);
    say(
      'Two local vendors: PayCo dedupes by Idempotency-Key (idempotentHandler, as Stripe does); LegacyBank does not,',
    );
    say('so its transfers go through the ledger (idempotency.vendorCall) with reconcile.');
    say(`The checkout tool: charge the customer at PayCo, then pay the supplier at the bank.`);
    say(`Each agent is a new Node process on one SQLite file; kill points: ${STEPS.join(', ')}.`);
    if (options.naive === true) {
      say('NEGATIVE CONTROL: the same tool without Idempotency-Key and without the ledger.');
    }

    for (const [i, scenario] of SCENARIOS.entries()) {
      if (options.killPoints?.includes(scenario.killAt ?? 'none') === false) continue;
      const order = `order-${i + 1}`;
      const args: CheckoutArgs = {
        order,
        customer: 'cus_ada',
        amount: 4200 + i,
        supplier: 'acme-supplies',
        payout: 3000 + i,
      };
      const input: AgentProcessInput = {
        database: join(dataDir, 'agent.sqlite'),
        paycoUrl: payco.url,
        bankUrl: bank.url,
        turnId: `turn-${order}`,
        args,
        // Long enough that a live agent on a loaded machine keeps its claim (renewed every
        // lease/3; it gives up a tenth early); a killed one is found stale after it.
        lease: 2_000,
        ...(options.naive === true ? { naive: true } : {}),
      };
      say(`\n[${i + 1}/${SCENARIOS.length}] ${scenario.killAt ?? 'no kill'}: ${scenario.what}`);
      const agents: AgentRun[] = [];
      for (let attempt = 1; ; attempt++) {
        const first = attempt === 1;
        const killAt = first ? scenario.killAt : undefined;
        if (scenario.searchDownOnce === true) bank.searchDown = attempt === 2;
        say(
          first
            ? `  agent 1: checkout ${order} (${args.amount} eur, payout ${args.payout})`
            : `  agent ${attempt}: a new process runs the same call${bank.searchDown ? " (the bank's search is down)" : ''}`,
        );
        const run = await runAgent(
          killAt === undefined ? input : { ...input, killAt },
          (kill) => {
            armed = killAt?.endsWith(':received') ? { at: killAt, kill } : undefined;
          },
          say,
        );
        agents.push(run);
        if (run.events.length > 0) say(`      idempotency: ${run.events.join(', ')}`);
        if (run.signal !== null) {
          say(`    -> killed by ${run.signal} at ${killAt ?? '?'}`);
          continue;
        }
        say(`    -> reply to the model: ${JSON.stringify(run.reply)}`);
        const unknown = (run.reply as { error?: string } | undefined)?.error === 'outcome_unknown';
        if (!unknown || attempt >= 3) break;
      }
      bank.searchDown = false;
      const paid = payco.charges.filter((c) => c.description === `order ${order}`).length;
      const paidOut = bank.transfers.filter((t) => t.memo === `order ${order}`).length;
      const ok = paid === 1 && paidOut === 1;
      say(
        `  the vendors' own counts for ${order}: PayCo ${paid} charge, bank ${paidOut} transfer ${ok ? '(once each)' : '<- WRONG'}`,
      );
      scenarios.push({ killAt: scenario.killAt, order, payco: paid, bank: paidOut, agents });
    }
  } finally {
    await payco?.close();
    await bank?.close();
  }

  const counts = scenarios.flatMap((s) => [s.payco, s.bank]);
  const result: VendorPaymentsResult = {
    orders: scenarios.length,
    charges: Math.max(0, ...counts),
    duplicates: counts.reduce((sum, n) => sum + Math.max(0, n - 1), 0),
    missing: counts.filter((n) => n === 0).length,
    scenarios,
    transcript,
  };
  say(
    `\n${result.orders} orders, ${scenarios.reduce((n, s) => n + s.agents.length, 0)} agent processes, ${scenarios.filter((s) => s.agents.some((a) => a.signal !== null)).length} of them killed mid-charge.`,
  );
  say(
    `PayCo charged ${payco?.charges.length} times, the bank made ${bank?.transfers.length} transfers: duplicates ${result.duplicates}, missing ${result.missing}.`,
  );
  return result;
}
