/**
 * `pnpm demo`: everything offline. The core walk-through (a payment tool, a lost reply, a
 * parallel duplicate, drift, a killed process), then each framework example with its scripted
 * model or local server.
 */
import { runDemo } from './demo.js';

// The demo is offline whatever the shell has: the examples switch to a real model on this key.
delete process.env.OPENAI_API_KEY;

const print = (line: string) => console.log(line);
const banner = (title: string) => print(`\n${'='.repeat(100)}\n${title}\n${'='.repeat(100)}`);
let failed = false;

banner('1/6  Core: one agent, a payment tool, and everything that goes wrong with retries');
const core = await runDemo({ print });
// Exactly one charge per turn and one customer, whatever the retries did.
if (core.charges !== 4 || core.customers !== 1) failed = true;

const examples: Array<
  [string, () => Promise<{ main: (o: { print: typeof print }) => Promise<unknown> }>]
> = [
  ['2/6  Vercel AI SDK (examples/ai-sdk-agent)', () => import('../../ai-sdk-agent/src/agent.js')],
  [
    '3/6  LangChain createAgent (examples/langchain-agent)',
    () => import('../../langchain-agent/src/agent.js'),
  ],
  [
    '4/6  OpenAI function calling over a flaky network (examples/openai-function-calling)',
    () => import('../../openai-function-calling/src/agent.js'),
  ],
  [
    '5/6  Vendor calls: the agent killed at each step of a charge (examples/vendor-payments)',
    () => import('../../vendor-payments/src/agent.js'),
  ],
  [
    '6/6  MCP server over Streamable HTTP: a client retry after a lost reply (examples/mcp-server)',
    () => import('../../mcp-server/src/agent.js'),
  ],
];
for (const [title, load] of examples) {
  banner(title);
  const result = (await (await load()).main({ print })) as Record<string, unknown>;
  // Each example counts its side effects; none may have run twice.
  const twice = ['charges', 'receipts', 'tickets', 'emails'].some(
    (k) => Number(result[k] ?? 0) > 1,
  );
  if (twice || Number(result.duplicates ?? 0) > 0) failed = true;
}

if (failed) {
  console.error('\nUnexpected side effects: the demo found a double execution.');
  process.exit(1);
}
print('\nEvery side effect ran once. Run `pnpm test` for the proofs.');
