/**
 * `pnpm demo`: everything offline. The core walk-through (a payment tool, a lost reply, a
 * parallel duplicate, drift, a second user, a killed process), then each framework example,
 * run as a user runs it: its own `start` script (`npm start`, or `pnpm start` under pnpm), in its
 * own folder, never by importing its sources. Each example checks its own side effects (none
 * twice, none missing, none given to the wrong user) and exits non-zero otherwise; the demo fails
 * when one does.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { demoFiles, problems, runDemo, statsCommand } from './demo.js';
import { quietSqliteWarning } from './quiet.js';

quietSqliteWarning();

const print = (line: string) => console.log(line);
const banner = (title: string) => print(`\n${'='.repeat(100)}\n${title}\n${'='.repeat(100)}`);
const failures: string[] = [];

const examples: Array<[string, string]> = [
  ['Vercel AI SDK', 'ai-sdk-agent'],
  ['LangChain createAgent', 'langchain-agent'],
  ['OpenAI function calling over a flaky network', 'openai-function-calling'],
  ['Vendor calls: the agent killed at each step of a charge', 'vendor-payments'],
  ['MCP server over Streamable HTTP: clients retrying after lost replies', 'mcp-server'],
  ['Anthropic SDK: the tool runner and a hand-written loop', 'anthropic-agent'],
  ['Google GenAI: automatic function calling and manual dispatch', 'google-genai-agent'],
  ['Mastra: an agent with memory and an approval resumed after a restart', 'mastra-agent'],
  ['LangGraph tasks: a charge approved, resumed and retried', 'langgraph-tasks'],
  ['DBOS: a workflow killed inside its charge, recovered by a new process', 'dbos-workflow'],
  ['Restate: a service killed mid-run, retried by Restate, the refund paid once', 'restate-agent'],
  ['Workflow SDK: a worker killed after its charge, the run resumed by another', 'workflow-agent'],
  ['Cloudflare Workers: an agent on the Durable Objects store, in workerd', 'cloudflare-agent'],
];
const folderOf = (name: string) => fileURLToPath(new URL(`../../${name}/`, import.meta.url));
// In the repository every example is beside this one. Copied out on its own, the demo is the core
// walk-through, plus whichever examples were copied beside it.
const inRepository = existsSync(new URL('../../../pnpm-workspace.yaml', import.meta.url));
const present = examples.filter(([, name]) => existsSync(`${folderOf(name)}package.json`));
const absent = examples.filter((example) => !present.includes(example)).map(([, name]) => name);
if (inRepository) for (const name of absent) failures.push(`${name}: examples/${name} is missing`);
const parts = present.length + 1;

banner(`1/${parts}  Core: one agent, a payment tool, and everything that goes wrong with retries`);
const core = await runDemo({ print });
// One charge per turn, Bob's own, one customer: whatever the retries did.
for (const problem of problems(core)) failures.push(`core: ${problem}`);

/**
 * The package manager that runs this demo (`npm_execpath`: pnpm under `pnpm demo`, npm under
 * `npm start`), and npm when the demo was started without one.
 */
function packageManager(): { command: string; prefix: string[] } {
  const execPath = process.env.npm_execpath;
  if (execPath === undefined || execPath === '') return { command: 'npm', prefix: [] };
  // npm's npm-cli.js and pnpm's pnpm.cjs are scripts; pnpm 12 is also a native executable.
  if (/\.[cm]?js$/.test(execPath)) return { command: process.execPath, prefix: [execPath] };
  return { command: execPath, prefix: [] };
}

/** Run an example's `start` script in its folder (offline: no model key), streaming its output. */
function start(name: string): Promise<string | null> {
  const env = { ...process.env };
  // The demo is offline whatever the shell has: the examples switch to a real model on these.
  for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) delete env[key];
  const { command, prefix } = packageManager();
  const child = spawn(command, [...prefix, '--silent', 'start'], {
    cwd: folderOf(name),
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
    shell: process.platform === 'win32' && command === 'npm',
  });
  return new Promise((resolve) => {
    child.on('error', (error) => resolve(`could not start \`${command} start\`: ${error.message}`));
    child.on('exit', (code, signal) =>
      resolve(code === 0 ? null : `\`start\` exited with ${code ?? signal}`),
    );
  });
}

for (const [index, [title, name]] of present.entries()) {
  banner(`${index + 2}/${parts}  ${title} (examples/${name})`);
  const failure = await start(name);
  if (failure !== null) failures.push(`${name}: ${failure}`);
}

if (failures.length > 0) {
  console.error(
    `\nThe demo failed (a side effect that ran twice, went missing or went to the wrong user, or an example that did not run):\n  ${failures.join('\n  ')}`,
  );
  process.exit(1);
}
if (absent.length > 0) {
  print(
    `\nThe framework examples (${absent.join(', ')}) are not beside this folder: each is a project of its own. To have one run here too, \`pnpm create-example ${absent[0]} ${folderOf(absent[0] ?? '').replace(/\/$/, '')}\` in a clone of the repository (until the packages are on the npm registry), then \`npm install\` in that folder.`,
  );
}
print(
  `\nEvery side effect ran exactly once, for the user who asked. Run \`${inRepository ? 'pnpm' : 'npm'} test\` for the proofs.`,
);
// Last, so it is the line left on the screen: the CLI on the core walk-through's store.
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));
// Run through npx (the quick start's `npx --yes pnpm@12.4.2 demo`), pnpm is not on the user's
// PATH: the line says the same npx.
const pnpm = /[\\/]_npx[\\/]/.test(process.env.npm_execpath ?? '')
  ? `npx --yes ${process.env.npm_config_user_agent?.match(/^pnpm\/[\w.-]+/)?.[0]?.replace('/', '@') ?? 'pnpm'}`
  : 'pnpm';
print('\nWhat the store kept (records by state; calls and the replay rate from its audit log):');
print(
  `  ${statsCommand(demoFiles().database, process.cwd(), inRepository ? { repositoryRoot, pnpm } : {})}`,
);
