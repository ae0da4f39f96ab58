/**
 * `pnpm demo`: everything offline. The core walk-through (a payment tool, a lost reply, a
 * parallel duplicate, drift, a second user, a killed process), then each framework example,
 * run as a user runs it: its own `start` script, in its own folder. Each example checks its own
 * side effects (none twice, none missing, none given to the wrong user) and exits 1 otherwise.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runDemo } from './demo.js';

const print = (line: string) => console.log(line);
const banner = (title: string) => print(`\n${'='.repeat(100)}\n${title}\n${'='.repeat(100)}`);
const failures: string[] = [];

banner('1/6  Core: one agent, a payment tool, and everything that goes wrong with retries');
const core = await runDemo({ print });
// One charge per turn, Bob's own, one customer: whatever the retries did.
if (core.charges !== 5 || core.customers !== 1) {
  failures.push(
    `core: ${core.charges} charges (expected 5), ${core.customers} customers (expected 1)`,
  );
}

const examples: Array<[string, string]> = [
  ['2/6  Vercel AI SDK (examples/ai-sdk-agent)', 'ai-sdk-agent'],
  ['3/6  LangChain createAgent (examples/langchain-agent)', 'langchain-agent'],
  [
    '4/6  OpenAI function calling over a flaky network (examples/openai-function-calling)',
    'openai-function-calling',
  ],
  [
    '5/6  Vendor calls: the agent killed at each step of a charge (examples/vendor-payments)',
    'vendor-payments',
  ],
  [
    '6/6  MCP server over Streamable HTTP: clients retrying after lost replies (examples/mcp-server)',
    'mcp-server',
  ],
];

/** Run an example's `start` script in its folder (offline: no model key), streaming its output. */
function start(folder: string): Promise<number | null> {
  const cwd = fileURLToPath(new URL(`../../${folder}/`, import.meta.url));
  const env = { ...process.env };
  // The demo is offline whatever the shell has: the examples switch to a real model on these.
  for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) delete env[key];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

for (const [title, folder] of examples) {
  banner(title);
  const code = await start(folder);
  if (code !== 0) failures.push(`${folder}: exited with ${code}`);
}

if (failures.length > 0) {
  console.error(
    `\nThe demo found a side effect that ran twice, went missing or went to the wrong user:\n  ${failures.join('\n  ')}`,
  );
  process.exit(1);
}
print(
  '\nEvery side effect ran exactly once, for the user who asked. Run `pnpm test` for the proofs.',
);
