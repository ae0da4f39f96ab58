/**
 * Refunds with a person in the loop. Each agent is a new Node process on the SQLite file
 * (refund-process.ts); the approver is `approvalUi` here, standing for the approval UI: its own
 * connection to the same SQLite file, deciding by the approval key the agent asked with.
 * PayCo counts the refunds it really made: one per order, however the approval went.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  type Approval,
  createApprovals,
  createIdempotency,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';
import { APPROVAL_ABOVE, type RefundArgs } from './refund.js';
import type { RefundLine, RefundProcessInput } from './refund-process.js';
import { PAYCO_API_KEY, type PayCo, startPayCo } from './vendors.js';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));

export interface RefundAgentRun {
  signal: NodeJS.Signals | null;
  /** The approval key it asked with, when it had to ask. */
  asked: string | undefined;
  /** The decision it saw while waiting. */
  decided: string | undefined;
  events: string[];
  reply: unknown;
}

export interface RefundScenarioResult {
  order: string;
  /** Refunds PayCo made for this order. */
  refunds: number;
  agents: RefundAgentRun[];
  /** What each `approve` of the approval UI returned. */
  approvals: Approval[];
}

export interface ApprovalStoryResult {
  scenarios: RefundScenarioResult[];
  /** Refunds PayCo made in all. */
  refunds: number;
  /** Refunds beyond one per order (0), and orders never refunded (0). */
  duplicates: number;
  missing: number;
  transcript: string[];
}

const eur = (cents: number) => (cents / 100).toFixed(2);

function runRefundAgent(
  input: RefundProcessInput,
  print: (line: string) => void,
  onAsked?: (key: string) => void,
): Promise<RefundAgentRun> {
  const child = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning', // Node 22's warning on loading node:sqlite
      '--import',
      'tsx',
      join(exampleDir, 'src/refund-process.ts'),
      JSON.stringify(input),
    ],
    { cwd: exampleDir, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const run: RefundAgentRun = {
    signal: null,
    asked: undefined,
    decided: undefined,
    events: [],
    reply: undefined,
  };
  createInterface({ input: child.stdout }).on('line', (text) => {
    const line = JSON.parse(text) as RefundLine;
    if (line.type === 'approval-requested') {
      run.asked = line.key;
      print(`      asks for approval ${line.key.slice(0, 14)}… and waits`);
      onAsked?.(line.key);
    } else if (line.type === 'decided') {
      run.decided = line.status;
      print(`      sees the decision: ${line.status}`);
    } else if (line.type === 'event') run.events.push(`${line.toolName} ${line.outcome}`);
    else run.reply = line.output;
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (_code, signal) => {
      run.signal = signal;
      resolve(run);
    });
  });
}

export interface ApprovalStoryOptions {
  print?: (line: string) => void;
  /** Folder of the SQLite file; emptied at start. @default the example's `.demo-data/approvals` */
  dataDir?: string;
}

export async function approvalStory(
  options: ApprovalStoryOptions = {},
): Promise<ApprovalStoryResult> {
  const transcript: string[] = [];
  const say = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const dataDir = options.dataDir ?? join(exampleDir, '.demo-data', 'approvals');
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const database = join(dataDir, 'agent.sqlite');

  // The approval UI: its own connection to the agents' SQLite file.
  const uiStore = openSqliteStore(database);
  const approvals = createApprovals(createIdempotency({ store: uiStore }));
  const approvalUi = async (key: string, times = 1): Promise<Approval[]> => {
    // Sent `times` times at once: a double click, a request resent after a lost reply.
    say(
      `      approval UI: alice approves ${key.slice(0, 14)}…${times > 1 ? ` (sent ${times} times at once)` : ''}`,
    );
    const sent = await Promise.all(
      Array.from({ length: times }, () => approvals.approve(key, { by: 'alice@payco.example' })),
    );
    const [first] = sent;
    const one = sent.every((a) => a.decidedAt === first?.decidedAt && a.by === first?.by);
    say(
      `      approval UI: ${times > 1 ? `${times} sends, ` : ''}${one ? 'one decision' : 'DIFFERENT decisions'}: ${first?.status} by ${first?.by}`,
    );
    return sent;
  };

  let payco: PayCo | undefined;
  const scenarios: RefundScenarioResult[] = [];
  try {
    payco = await startPayCo({ log: (line) => say(`      ${line}`) });
    const vendor = payco;
    const paycoUrl = payco.url;
    say(
      `Refunds above ${eur(APPROVAL_ABOVE)} eur need a person's approval (createApprovals on the SQLite store).`,
    );

    let n = 0;
    /** One order's refund: `body` runs its agents, with `refund(amount)` the call's args. */
    const scenario = async (
      title: string,
      body: (ctx: {
        refund: (amount: number) => RefundArgs;
        agent: (args: RefundArgs, extra?: Partial<RefundProcessInput>) => Promise<RefundAgentRun>;
        /** What the approval UI's `approve` calls returned. */
        approved: Approval[];
      }) => Promise<void>,
    ) => {
      n += 1;
      const order = `refund-${n}`;
      say(`\n[refund ${n}] ${title}`);
      // The order's charge, made earlier (a plain request with Stripe's raw key form).
      const seeded = await fetch(`${paycoUrl}/v1/charges`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${PAYCO_API_KEY}`,
          'idempotency-key': `seed-${order}`,
        },
        body: JSON.stringify({
          amount: 10_000,
          currency: 'eur',
          customer: 'cus_ada',
          description: `order ${order}`,
        }),
      });
      const { id: charge } = (await seeded.json()) as { id: string };
      const agents: RefundAgentRun[] = [];
      const approved: Approval[] = [];
      const agent = async (agentArgs: RefundArgs, extra: Partial<RefundProcessInput> = {}) => {
        say(
          `  agent ${agents.length + 1}: refund ${eur(agentArgs.amount)} eur of ${charge}${extra.approvalKey === undefined ? '' : ' (resumed with the approval key)'}`,
        );
        const pending: Promise<unknown>[] = [];
        const input: RefundProcessInput = {
          database,
          paycoUrl,
          turnId: `turn-${order}`,
          args: agentArgs,
          lease: 2_000,
          ...extra,
        };
        const run = await runRefundAgent(
          input,
          say,
          // The agent waits: the person approves (twice at once) while it does.
          extra.killAt === 'approval:requested'
            ? undefined
            : (key) => {
                pending.push(approvalUi(key, 2).then((a) => approved.push(...a)));
              },
        );
        await Promise.all(pending);
        agents.push(run);
        if (run.events.length > 0) say(`      idempotency: ${run.events.join(', ')}`);
        say(
          run.signal === null
            ? `    -> reply to the model: ${JSON.stringify(run.reply)}`
            : `    -> killed by ${run.signal} at ${extra.killAt ?? '?'}`,
        );
        return run;
      };
      await body({ refund: (amount) => ({ order, charge, amount }), agent, approved });
      const refunds = vendor.refunds.filter((r) => r.metadata === `order ${order}`).length;
      say(
        `  PayCo's own count for ${order}: ${refunds} refund ${refunds === 1 ? '(once)' : '<- WRONG'}`,
      );
      scenarios.push({ order, refunds, agents, approvals: approved });
    };

    await scenario('a small refund: no approval needed', async ({ agent, refund }) => {
      await agent(refund(1500));
    });

    await scenario(
      'a large refund: the agent asks and waits; the approval is sent twice',
      async ({ agent, refund }) => {
        await agent(refund(8000));
      },
    );

    await scenario(
      'approved, then the agent is killed before the refund runs; a new process runs it',
      async ({ agent, refund, approved }) => {
        const args = refund(7000);
        await agent(args, { killAt: 'approval:decided' });
        await agent(args); // the approval is stored: it runs, once
        const key = approved[0]?.key;
        if (key !== undefined) approved.push(...(await approvalUi(key))); // a late resend
        await agent(args); // replayed (onReplay adds when it ran)
      },
    );

    await scenario(
      'approved for 60.00 while no agent runs; the resumed call asks 65.00 with that approval',
      async ({ agent, refund, approved }) => {
        const asked = await agent(refund(6000), { killAt: 'approval:requested' });
        const key = asked.asked ?? '';
        approved.push(...(await approvalUi(key)));
        await agent(refund(6500), { approvalKey: key }); // refused: DriftError, nothing runs
        await agent(refund(6000), { approvalKey: key }); // the approved call runs, once
      },
    );
  } finally {
    await payco?.close();
    await uiStore.close?.();
  }

  const counts = scenarios.map((s) => s.refunds);
  const result: ApprovalStoryResult = {
    scenarios,
    refunds: payco?.refunds.length ?? 0,
    duplicates: counts.reduce((sum, c) => sum + Math.max(0, c - 1), 0),
    missing: counts.filter((c) => c === 0).length,
    transcript,
  };
  say(
    `\n${scenarios.length} refunds, ${scenarios.reduce((sum, s) => sum + s.agents.length, 0)} agent processes: PayCo refunded ${result.refunds} times; duplicates ${result.duplicates}, missing ${result.missing}.`,
  );
  return result;
}
