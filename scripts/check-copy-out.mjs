#!/usr/bin/env node
// @ts-check
/**
 * `pnpm check:copy-out` (also the last step of `.ci/run`): what a user gets outside this repo.
 *
 * 1. In the repo, each example links its `@idempotent-tools/*` dependencies (published ranges,
 *    `^0.1.0`) to the workspace packages, and is a project of its own (no `workspace:`, no
 *    tsconfig `extends`).
 * 2. Every publishable package is packed as `pnpm pack:local` packs it (`packLocal` of
 *    scripts/local-packages.mjs: `pnpm pack`, which rewrites `workspace:` ranges); each tarball
 *    holds LICENSE and README.md and no source map, and each package's `@idempotent-tools/*`
 *    dependencies are satisfied by the versions packed.
 * 3. Each example is copied to a folder outside the repo as `pnpm create-example` copies it
 *    (`createExample`: its `@idempotent-tools/*` dependencies pointed at the tarballs, npm
 *    `overrides` for the ones between our packages), then `npm install`, `npm start`, `npm test`
 *    and `npm run typecheck` there.
 * 4. Each package alone: a fresh project installs only what the package's README says to install
 *    (the first `npm i` of its "Install" section: its tarball, ours as the registry would give
 *    them, the rest from the registry; npm adds the required peers), imports every entry point
 *    (runs the CLI's bin), and `npm ls` finds nothing missing. Where the README has a TypeScript
 *    "Drop-in", its first block is typechecked in that project with `tsc --init` defaults plus
 *    `skipLibCheck: false`, under TypeScript 5.9 and TypeScript 7.
 *
 * One line per example and per package; exit 1 if any failed (its log's tail is printed below
 * its line, and the logs are kept). Needs Node >= 22, pnpm, npm and the npm registry.
 *
 *   node scripts/check-copy-out.mjs [--keep] [name ...]   # names: example folders or package dirs
 */
import { spawn } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createExample, packLocal } from './local-packages.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const keep = args.includes('--keep');
const only = args.filter((arg) => !arg.startsWith('--'));
const selected = (/** @type {string} */ name) => only.length === 0 || only.includes(name);

/** TypeScript versions a user's fresh project would have: the one this repo pins, and 7. */
const TYPESCRIPTS = [
  { alias: 'typescript', spec: readJson(join(root, 'package.json')).devDependencies.typescript },
  { alias: 'typescript7', spec: 'npm:typescript@7' },
];

/**
 * What the user's own code around each README's Drop-in has: `extras` are installed besides what
 * the Install section says (packages the snippet's own code uses, or an optional peer the README
 * says to install for it), `prelude` declares the snippet's free names with real types, `check`
 * asserts what the snippet's results are. Only the snippet's imports must come from the Install
 * section, the extras or a peer.
 * @type {Record<string, { extras?: string[], prelude?: string, check?: string }>}
 */
const DROP_IN = {
  core: {
    prelude: `
declare const turnId: string;
declare const args: { amount: number; currency: string };
declare function chargeCard(
  args: { amount: number; currency: string },
  ctx: { key: string; signal: AbortSignal },
): Promise<{ chargeId: string }>;`,
    check: 'value.chargeId satisfies string;\nreplayed satisfies boolean;',
  },
  'store-sqlite': {
    prelude: `
declare const turnId: string;
declare const args: { amount: number; currency: string };
declare function chargeCard(
  args: { amount: number; currency: string },
  ctx: { key: string; signal: AbortSignal },
): Promise<{ chargeId: string }>;`,
    check: 'value.chargeId satisfies string;\nreplayed satisfies boolean;',
  },
  'store-postgres': {
    extras: ['@types/pg'],
    prelude: `
import pg from 'pg';
const pool = new pg.Pool({ connectionString: 'postgres://app@db/app' });
declare const turnId: string;
declare const args: { amount: number; currency: string };
declare function chargeCard(
  args: { amount: number; currency: string },
  ctx: { key: string; signal: AbortSignal },
): Promise<{ chargeId: string }>;`,
    check: 'value.chargeId satisfies string;\nreplayed satisfies boolean;',
  },
  'store-dynamodb': {},
  'store-redis': {
    prelude: `
declare const process: { env: Record<string, string | undefined> };`,
  },
  'ai-sdk': {
    prelude: `
import type { LanguageModel, Tool } from 'ai';
declare const model: LanguageModel;
declare const chargeCard: Tool<{ amount: number }, { chargeId: string }>;
declare const sendEmail: Tool<{ to: string; body: string }, { sent: boolean }>;`,
  },
  langchain: {
    extras: ['langchain'],
    prelude: `
import { createAgent } from 'langchain';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import type { BaseMessage } from '@langchain/core/messages';
import type { StructuredToolInterface } from '@langchain/core/tools';
declare const model: BaseChatModel;
declare const tools: StructuredToolInterface[];
declare const messages: BaseMessage[];
declare const chatId: string;`,
  },
  openai: {
    extras: ['openai', 'zod'],
    prelude: `
import { createIdempotency, createToolDispatcher } from '@idempotent-tools/openai';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
const TicketArgs = z.object({ title: z.string() });
declare function createTicket(args: z.infer<typeof TicketArgs>): Promise<{ ticketId: string }>;
declare const message: ChatCompletionMessage;
declare const messages: ChatCompletionMessageParam[];
declare const chat: { id: string };`,
  },
  mcp: {
    extras: ['@modelcontextprotocol/server', 'zod'],
    prelude: `
import { z } from 'zod';
declare function createTicket(args: { title: string }): Promise<{
  content: Array<{ type: 'text'; text: string }>;
}>;`,
  },
  anthropic: {},
  'google-genai': {
    prelude: `
declare function createTicket(args: { title: string }): Promise<{ ticketId: string }>;
declare const chat: { id: string; history: import('@google/genai').Content[] };
declare const userText: string;`,
    check: 'response.text satisfies string | undefined;',
  },
  mastra: {},
  otel: {
    prelude: `
import type { IdempotencyStore } from '@idempotent-tools/core';
declare const store: IdempotencyStore;`,
  },
};

// ---------------------------------------------------------------------------------------------

/** @param {string} file */
function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** @param {number} ms */
const seconds = (ms) => `${(ms / 1000).toFixed(1)}s`;

/** The environment of every command: offline examples, no npm chatter, nothing of pnpm's run. */
const env = Object.fromEntries(
  Object.entries(process.env).filter(
    ([key]) =>
      !/^(npm_(lifecycle|package|execpath|node_execpath|config_user_agent)|pnpm_|PNPM_|INIT_CWD$)/.test(
        key,
      ) && !['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'REDIS_URL'].includes(key),
  ),
);
Object.assign(env, {
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
  npm_config_loglevel: 'warn',
});

/**
 * Run a command, its output (both streams) appended to `log`.
 * @param {string} command
 * @param {string[]} argv
 * @param {{ cwd: string, log: string }} options
 * @returns {Promise<{ ok: boolean, ms: number, output: string }>}
 */
function run(command, argv, { cwd, log }) {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    /** @type {Buffer[]} */
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    const done = (/** @type {boolean} */ ok, /** @type {string} */ extra = '') => {
      const output = Buffer.concat(chunks).toString() + extra;
      const took = seconds(performance.now() - started);
      writeFileSync(log, `$ ${command} ${argv.join(' ')}  (in ${cwd}, ${took})\n${output}\n`, {
        flag: 'a',
      });
      resolve({ ok, ms: performance.now() - started, output });
    };
    child.on('error', (error) => done(false, `\n${error.message}`));
    child.on('close', (code, signal) =>
      done(code === 0, code === 0 ? '' : `\n(exited with ${code ?? signal})`),
    );
  });
}

/** @param {string} text @param {number} lines */
const tail = (text, lines = 25) =>
  text
    .trimEnd()
    .split('\n')
    .slice(-lines)
    .map((line) => `      ${line}`)
    .join('\n');

/** A minimal semver range check for the ranges our package.json files use (^, ~, exact, >=). */
function satisfies(/** @type {string} */ version, /** @type {string} */ range) {
  const parse = (/** @type {string} */ v) => v.split('.').map((n) => Number.parseInt(n, 10));
  const [major, minor, patch] = parse(version);
  const match = /^(\^|~|>=)?(\d+)\.(\d+)\.(\d+)$/.exec(range.trim());
  if (!match || major === undefined || minor === undefined || patch === undefined) return false;
  const [, op, a, b, c] = match;
  const [rMajor, rMinor, rPatch] = [Number(a), Number(b), Number(c)];
  const cmp = major - rMajor || minor - rMinor || patch - rPatch;
  if (op === undefined) return cmp === 0;
  if (cmp < 0) return false;
  if (op === '>=') return true;
  if (op === '~') return major === rMajor && minor === rMinor;
  // caret: the left-most non-zero part is fixed
  if (rMajor > 0) return major === rMajor;
  if (rMinor > 0) return major === 0 && minor === rMinor;
  return major === 0 && minor === 0 && patch === rPatch;
}

/**
 * `fn` over `items`, at most `limit` at once; the promises in the order of `items`.
 * @template T, R
 * @param {T[]} items @param {number} limit @param {(item: T) => Promise<R>} fn
 * @returns {Promise<R>[]}
 */
function pool(items, limit, fn) {
  /** @type {Array<() => void>} */
  const queue = [];
  let active = 0;
  const next = () => {
    if (active >= limit) return;
    const job = queue.shift();
    if (job === undefined) return;
    active += 1;
    job();
  };
  return items.map(
    (item) =>
      new Promise((resolve, reject) => {
        queue.push(() =>
          fn(item)
            .then(resolve, reject)
            .finally(() => {
              active -= 1;
              next();
            }),
        );
        next();
      }),
  );
}

// ---------------------------------------------------------------------------------------------

const startedAll = performance.now();
const work = mkdtempSync(join(realpathSync(tmpdir()), 'idempotent-tools-copy-out-'));
if (!relative(root, work).startsWith('..')) throw new Error(`${work} is inside the repo`);
const logs = join(work, 'logs');
mkdirSync(logs);
/** @type {string[]} */
const failures = [];

/** @param {string} what @param {string} line @param {string} [detail] */
function report(what, line, detail) {
  console.log(line);
  if (detail !== undefined) {
    failures.push(what);
    console.log(detail);
  }
}

const exampleNames = readdirSync(join(root, 'examples')).filter((name) =>
  existsSync(join(root, 'examples', name, 'package.json')),
);
const packageDirs = readdirSync(join(root, 'packages')).filter((dir) => {
  const file = join(root, 'packages', dir, 'package.json');
  return existsSync(file) && readJson(file).private !== true;
});

// 1. The examples in the repo ----------------------------------------------------------------
{
  /** @type {string[]} */
  const problems = [];
  const workspace = new Map(
    packageDirs.map((dir) => [readJson(join(root, 'packages', dir, 'package.json')).name, dir]),
  );
  for (const name of exampleNames) {
    const dir = join(root, 'examples', name);
    const pkg = readJson(join(dir, 'package.json'));
    const tsconfig = readFileSync(join(dir, 'tsconfig.json'), 'utf8');
    if (/"extends"/.test(tsconfig)) problems.push(`${name}: tsconfig.json extends another file`);
    for (const [dep, range] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      if (String(range).startsWith('workspace:')) problems.push(`${name}: ${dep} is ${range}`);
      if (!dep.startsWith('@idempotent-tools/')) continue;
      const target = workspace.get(dep);
      if (target === undefined) {
        problems.push(`${name}: ${dep} is not a package of this repo`);
        continue;
      }
      // linkWorkspacePackages links a matching range to the workspace package; a range that no
      // longer matches (a version bump) would silently install the registry's copy instead.
      const link = join(dir, 'node_modules', dep);
      const linked =
        existsSync(link) &&
        lstatSync(link).isSymbolicLink() &&
        realpathSync(link) === realpathSync(join(root, 'packages', target));
      if (!linked) problems.push(`${name}: ${dep}@${range} is not linked to packages/${target}`);
    }
    for (const tool of ['tsx', 'vitest', 'typescript', '@types/node']) {
      if (pkg.devDependencies?.[tool] === undefined && pkg.dependencies?.[tool] === undefined) {
        problems.push(`${name}: ${tool} is not in its devDependencies`);
      }
    }
  }
  report(
    'monorepo links',
    `monorepo: ${exampleNames.length} examples, each a project of its own, ${problems.length === 0 ? 'every @idempotent-tools/* dependency linked to packages/' : 'FAILED'}`,
    problems.length === 0 ? undefined : problems.map((p) => `      ${p}`).join('\n'),
  );
}

// 2. Pack, as `pnpm pack:local` does -------------------------------------------------------
const tarballDir = join(work, 'tarballs');
/** @type {Map<string, { dir: string, file: string, manifest: any }>} */
const tarballs = new Map();
/** package name -> tarball, as `packLocal` returns it (and `createExample` takes it). */
let packed = /** @type {Record<string, string>} */ ({});
{
  const started = performance.now();
  const log = join(logs, 'pack.log');
  try {
    packed = await packLocal({
      dest: tarballDir,
      print: (text) => writeFileSync(log, `${text}\n`, { flag: 'a' }),
    });
  } catch (error) {
    report('pack', 'pack: FAILED', tail(error instanceof Error ? error.message : String(error)));
    process.exit(1);
  }
  /** @type {string[]} */
  const problems = [];
  const dirOf = new Map(
    packageDirs.map((dir) => [readJson(join(root, 'packages', dir, 'package.json')).name, dir]),
  );
  for (const [name, file] of Object.entries(packed)) {
    const dir = dirOf.get(name);
    if (dir === undefined) problems.push(`${name}: packed, but not a package of packages/`);
    else {
      const manifest = readJson(join(root, 'packages', dir, 'package.json'));
      tarballs.set(name, { dir, file, manifest });
    }
  }
  for (const [name, dir] of dirOf) {
    if (!tarballs.has(name)) problems.push(`${dir}: not packed`);
  }
  // What a tarball's package.json says, as the registry would serve it.
  for (const [name, tarball] of tarballs) {
    const extract = await run('tar', ['-xzf', tarball.file, '-O', 'package/package.json'], {
      cwd: work,
      log: join(logs, `pack-${tarball.dir}.log`),
    });
    tarball.manifest = JSON.parse(extract.output);
    // What the tarball holds: its LICENSE and README.md, and no source map.
    const listing = await run('tar', ['-tzf', tarball.file], {
      cwd: work,
      log: join(logs, `pack-${tarball.dir}.log`),
    });
    const files = listing.output.split('\n').filter((file) => file !== '');
    for (const needed of ['package/LICENSE', 'package/README.md']) {
      if (!files.includes(needed)) problems.push(`${name}: its tarball has no ${needed.slice(8)}`);
    }
    const maps = files.filter((file) => file.endsWith('.map'));
    if (maps.length > 0) problems.push(`${name}: its tarball has source maps (${maps[0]}, ...)`);
    const deps = { ...tarball.manifest.dependencies, ...tarball.manifest.peerDependencies };
    for (const [dep, range] of Object.entries(deps)) {
      if (String(range).startsWith('workspace:')) problems.push(`${name}: ${dep} is ${range}`);
      if (!dep.startsWith('@idempotent-tools/')) continue;
      const target = tarballs.get(dep);
      if (target === undefined) problems.push(`${name}: depends on ${dep}, which is not packed`);
      else if (!satisfies(target.manifest.version, String(range))) {
        problems.push(`${name}: ${dep}@${range} is not satisfied by ${target.manifest.version}`);
      }
    }
  }
  report(
    'pack',
    `packed: ${tarballs.size} packages in ${seconds(performance.now() - started)}, ${problems.length === 0 ? 'each with LICENSE and README.md and no .map, every @idempotent-tools/* dependency satisfied by a packed version' : 'FAILED'}`,
    problems.length === 0 ? undefined : problems.map((p) => `      ${p}`).join('\n'),
  );
}

const fileSpec = (/** @type {string} */ name) => `file:${tarballs.get(name)?.file}`;
/** npm `overrides`: every package of ours, wherever in the tree, is its tarball. */
const overrides = () =>
  Object.fromEntries([...tarballs.keys()].map((name) => [name, fileSpec(name)]));
/** `example name   install 6.0s, start ok 2.1s, ...` */
const line = (/** @type {string[]} */ [head, ...rest]) => `${head}  ${rest.join(', ')}`;
const nameWidth = Math.max(
  ...exampleNames.map((n) => n.length),
  ...packageDirs.map((n) => n.length),
);

// 3. Each example, copied out ----------------------------------------------------------------
/**
 * Copy an example out as `pnpm create-example` does (pointed at the tarballs), `npm install`.
 * @param {string} name
 */
async function installExample(name) {
  // A folder of its own (no siblings beside it), as a user's copy would be.
  const dir = join(work, 'examples', name, name);
  const log = join(logs, `example-${name}.log`);
  try {
    createExample({
      name,
      dir,
      packages: packed,
      print: (text) => writeFileSync(log, `${text}\n`, { flag: 'a' }),
    });
  } catch (error) {
    const output = `create-example: ${error instanceof Error ? error.message : String(error)}`;
    return { name, dir, log, install: { ok: false, ms: 0, output } };
  }
  return { name, dir, log, install: await run('npm', ['install'], { cwd: dir, log }) };
}

// Installs two at a time; the examples then run one after the other, as a user runs them (their
// tests start servers and kill processes: no other example competes for the cores).
for (const installing of pool(exampleNames.filter(selected), 2, installExample)) {
  const { name, dir, log, install } = await installing;
  const parts = [`example ${name.padEnd(nameWidth)}`];
  let detail;
  parts.push(`install ${install.ok ? seconds(install.ms) : 'FAILED'}`);
  if (!install.ok) detail = tail(install.output);
  else {
    for (const script of ['start', 'test', 'typecheck']) {
      const result = await run('npm', ['run', script], { cwd: dir, log });
      parts.push(`${script} ${result.ok ? `ok ${seconds(result.ms)}` : 'FAILED'}`);
      if (!result.ok) {
        detail = tail(result.output);
        break;
      }
    }
  }
  report(`example ${name}`, line(parts), detail);
}

// 4. Each package, installed alone -----------------------------------------------------------
/**
 * tsc's errors, split into ours (the snippet, our packages' declarations) and the third-party
 * packages whose declarations have errors.
 */
function diagnostics(/** @type {string} */ output) {
  /** @type {string[]} */
  const ours = [];
  const theirs = new Set();
  let count = 0;
  // An error starts at column 0 (`file(line,col): error TS...`); its details are indented.
  for (const block of output.split(/\n(?=\S)/)) {
    const file = /^(\S+?)\(\d+,\d+\): error TS\d+/.exec(block)?.[1];
    if (file === undefined) continue;
    count += 1;
    const inModules = file.split('node_modules/');
    const pkg = inModules.length > 1 ? inModules.at(-1)?.split('/') : undefined;
    const name =
      pkg === undefined ? undefined : pkg[0]?.startsWith('@') ? `${pkg[0]}/${pkg[1]}` : pkg[0];
    if (name === undefined || name.startsWith('@idempotent-tools/')) ours.push(block);
    else theirs.add(name);
  }
  return { ours, theirs, count };
}

/** The first `npm i ...` of a README's Install section: the packages it names. */
function installLine(/** @type {string} */ readme) {
  const section = /^## Install\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1] ?? '';
  const line = /^npm (?:i|install) (.*)$/m.exec(section)?.[1];
  if (line === undefined) return undefined;
  return line
    .replace(/#.*$/, '')
    .split(/\s+/)
    .filter((word) => word !== '' && !word.startsWith('-'));
}

/** The first ```ts block of a README's Drop-in section. */
function dropIn(/** @type {string} */ readme) {
  const section = /^## Drop-in\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(readme)?.[1] ?? '';
  return /```ts\n([\s\S]*?)```/.exec(section)?.[1];
}

/** Package names a piece of TypeScript imports (bare specifiers, without subpaths). */
function importedPackages(/** @type {string} */ code) {
  const names = new Set();
  for (const [, spec] of code.matchAll(/^\s*import\s[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
    if (spec === undefined || spec.startsWith('.') || spec.startsWith('node:')) continue;
    const parts = spec.split('/');
    names.add(spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]);
  }
  return names;
}

/**
 * One package alone in a fresh project.
 * @param {string} dir
 * @returns {Promise<{ what: string, text: string, detail: string | undefined } | undefined>}
 */
async function checkPackage(dir) {
  const tarball = [...tarballs.values()].find((t) => t.dir === dir);
  if (tarball === undefined) return undefined;
  const name = tarball.manifest.name;
  const log = join(logs, `package-${dir}.log`);
  const readme = readFileSync(join(root, 'packages', dir, 'README.md'), 'utf8');
  const parts = [`package ${dir.padEnd(nameWidth)}`];
  /** @type {string[]} */
  const problems = [];
  let detail;

  const named = installLine(readme);
  const snippet = dropIn(readme);
  const drop = DROP_IN[dir];
  if (named === undefined) problems.push('its README has no `npm i` line under "## Install"');
  else if (!named.includes(name)) problems.push(`its README's \`npm i\` does not install ${name}`);
  const project = join(work, 'packages', dir);
  mkdirSync(project, { recursive: true });
  /** @type {Record<string, string>} */
  const dependencies = {};
  for (const word of named ?? []) {
    const at = word.lastIndexOf('@');
    const pkgName = at > 0 ? word.slice(0, at) : word;
    dependencies[pkgName] = tarballs.has(pkgName)
      ? fileSpec(pkgName)
      : at > 0
        ? word.slice(at + 1)
        : '*';
  }
  const typecheck = snippet !== undefined && drop !== undefined;
  if (typecheck) {
    for (const extra of drop.extras ?? []) dependencies[extra] ??= '*';
    for (const { alias, spec } of TYPESCRIPTS) dependencies[alias] = spec;
  }
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ name: `check-${dir}`, private: true, type: 'module', dependencies, overrides: overrides() }, null, 2)}\n`,
  );
  const install = await run('npm', ['install'], { cwd: project, log });
  parts.push(`install ${install.ok ? seconds(install.ms) : 'FAILED'}`);
  if (!install.ok) {
    return { what: `package ${dir}`, text: line(parts), detail: tail(install.output) };
  }

  // Every entry point loads with only what was installed (optional peers absent).
  const entries = Object.entries(tarball.manifest.exports ?? { '.': tarball.manifest.main })
    .filter(([subpath, target]) => {
      const file = typeof target === 'string' ? target : (target?.default ?? target?.import ?? '');
      return subpath !== './package.json' && /\.[cm]?js$/.test(file);
    })
    .map(([subpath]) => (subpath === '.' ? name : `${name}/${subpath.slice(2)}`));
  const importCode = `for (const entry of ${JSON.stringify(entries)}) {
  const module = await import(entry);
  if (Object.keys(module).length === 0) throw new Error(entry + ' exports nothing');
}`;
  const imported = await run('node', ['--input-type=module', '-e', importCode], {
    cwd: project,
    log,
  });
  parts.push(imported.ok ? `import ok (${entries.length})` : 'import FAILED');
  if (!imported.ok) problems.push(`import:\n${tail(imported.output)}`);
  for (const bin of Object.keys(tarball.manifest.bin ?? {})) {
    const result = await run(join(project, 'node_modules', '.bin', bin), ['--help'], {
      cwd: project,
      log,
    });
    parts.push(`${bin} --help ${result.ok ? 'ok' : 'FAILED'}`);
    if (!result.ok) problems.push(`${bin} --help:\n${tail(result.output)}`);
  }
  const ls = await run('npm', ['ls', '--all'], { cwd: project, log });
  if (!ls.ok)
    problems.push(`npm ls finds a missing or invalid dependency:\n${tail(ls.output, 15)}`);

  // The README's Drop-in, in a fresh strict TypeScript project of each version.
  if (typecheck) {
    const allowed = new Set([
      ...(named ?? []).map((w) => w.replace(/(.)@.*$/, '$1')),
      ...(drop.extras ?? []),
    ]);
    for (const dep of allowed) {
      const installed = join(project, 'node_modules', dep, 'package.json');
      if (existsSync(installed)) {
        for (const peer of Object.keys(readJson(installed).peerDependencies ?? {}))
          allowed.add(peer);
      }
    }
    for (const imported of importedPackages(snippet)) {
      if (!allowed.has(imported)) {
        problems.push(
          `its Drop-in imports ${imported}, which its Install section does not install (npm hoists it, pnpm and Yarn PnP do not)`,
        );
      }
    }
    for (const { alias } of TYPESCRIPTS) {
      const tsDir = join(project, alias);
      mkdirSync(tsDir);
      const tsc = join(project, 'node_modules', alias, 'bin', 'tsc');
      const version = readJson(join(project, 'node_modules', alias, 'package.json')).version;
      const init = await run(
        'node',
        [tsc, '--init', '--module', 'nodenext', '--skipLibCheck', 'false'],
        { cwd: tsDir, log },
      );
      writeFileSync(
        join(tsDir, 'drop-in.ts'),
        `${drop.prelude?.trim() ?? ''}\n\n// README.md, Drop-in:\n${snippet}\n${drop.check ?? ''}\n`,
      );
      const result = init.ok
        ? await run('node', [tsc, '--noEmit', '-p', '.'], { cwd: tsDir, log })
        : init;
      const { ours, theirs, count } = diagnostics(result.output);
      // Errors in other libraries' declarations (skipLibCheck: false checks them too; several
      // fail tsc --init's exactOptionalPropertyTypes) are theirs: listed, not ours to fail on.
      const ok = result.ok || (ours.length === 0 && count > 0);
      const note =
        theirs.size > 0 ? ` (${count - ours.length} errors in ${[...theirs].join(', ')})` : '';
      parts.push(`ts ${version} ${ok ? 'ok' : 'FAILED'}${note}`);
      if (!ok) {
        const text = ours.length > 0 ? ours.join('\n') : result.output;
        problems.push(
          `TypeScript ${version} (${relative(work, tsDir)}/drop-in.ts):\n${tail(text, 12)}`,
        );
      }
    }
  } else if (snippet !== undefined) {
    parts.push('ts: no prelude for its Drop-in');
  }
  if (problems.length > 0) {
    detail = problems.map((problem) => `      ${problem.trimStart()}`).join('\n');
  }
  return { what: `package ${dir}`, text: line(parts), detail };
}

// Two at a time (npm and tsc wait on the network and the disk as much as on a core), reported in
// order.
for (const result of pool(packageDirs.filter(selected), 2, checkPackage)) {
  const checked = await result;
  if (checked !== undefined) report(checked.what, checked.text, checked.detail);
}

const total = seconds(performance.now() - startedAll);
if (failures.length > 0) {
  console.log(
    `\ncopy-out: FAILED (${failures.join('; ')}) in ${total}; logs and projects in ${work}`,
  );
  process.exit(1);
}
console.log(`\ncopy-out: every example and every package passed in ${total}`);
if (keep) console.log(`(kept: ${work})`);
else rmSync(work, { recursive: true, force: true });
