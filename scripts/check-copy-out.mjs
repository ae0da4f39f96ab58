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
 * 4. Each package alone, set up as its README says: `npm init -y` in a fresh folder, then the
 *    commands of the first sh block of its "Install" section as written (our packages as their
 *    tarballs, the rest from the registry). Every entry point imports (the CLI's bin runs),
 *    `npm ls` finds nothing missing, and every ```ts block of the README that starts with
 *    `import` (after any `/// <reference>` lines: a complete file; the others are excerpts)
 *    compiles as pasted, no prelude, with
 *    `tsc --init` defaults plus `skipLibCheck: false`, under TypeScript 5.9 and TypeScript 7,
 *    importing only what the Install section installed.
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

/**
 * The commands of a README's Install section, as a user types them: the lines of its first
 * ```sh block, each split into words (comments and blank lines left out).
 */
function installCommands(/** @type {string} */ readme) {
  const section = /^## Install\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(readme)?.[1] ?? '';
  const block = /^```sh\n([\s\S]*?)^```/m.exec(section)?.[1];
  if (block === undefined) return undefined;
  return block
    .split('\n')
    .map((text) => text.replace(/(^|\s)#.*$/, '').trim())
    .filter((text) => text !== '')
    .map((text) => text.split(/\s+/));
}

/** `name` of `name@range` (and of `@scope/name@range`). */
const packageOf = (/** @type {string} */ word) => {
  const at = word.lastIndexOf('@');
  return at > 0 ? word.slice(0, at) : word;
};

/**
 * A README's ```ts blocks, in order. One that starts with `import` (after any `/// <reference>`
 * lines) is a complete file (it must compile as pasted); the others are excerpts of the code
 * above them, not checked.
 * @returns {Array<{ code: string, line: number, section: string, complete: boolean }>}
 */
function tsBlocks(/** @type {string} */ readme) {
  /** @type {Array<{ code: string, line: number, section: string, complete: boolean }>} */
  const blocks = [];
  let section = '';
  /** @type {{ line: number, indent: string, lines: string[] } | undefined} */
  let open;
  let fenced = false;
  readme.split('\n').forEach((text, index) => {
    const fence = /^(\s*)```(\w*)\s*$/.exec(text);
    if (open !== undefined) {
      if (fence !== null && fence[2] === '') {
        const code = `${open.lines.map((l) => l.slice(open?.indent.length)).join('\n')}\n`;
        // `/// <reference types>` lines may come first (a Worker's runtime types).
        const complete = /^(\/\/\/ <reference [^\n]*\n)*import\s/.test(code);
        blocks.push({ code, line: open.line, section, complete });
        open = undefined;
      } else open.lines.push(text);
    } else if (fenced) {
      if (fence !== null && fence[2] === '') fenced = false;
    } else if (fence !== null && /^(ts|typescript)$/.test(fence[2] ?? '')) {
      open = { line: index + 2, indent: fence[1] ?? '', lines: [] };
    } else if (/^\s*```/.test(text)) fenced = true;
    else if (text.startsWith('## ')) section = text.slice(3);
  });
  return blocks;
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
 * One package alone in a fresh project, set up as its README says: `npm init -y`, the commands
 * of its Install section as written (our packages' names swapped for their tarballs, npm
 * `overrides` pointing ours at the tarballs wherever in the tree; the rest from the registry;
 * `-g` installs into the project, where the overrides apply), then TypeScript (the version this
 * repo pins, and 7) and `tsc --init`; every complete ```ts block of the README is a file of its
 * own in that project, and all of them compile with no prelude.
 * @param {string} dir
 * @returns {Promise<{ what: string, text: string, detail: string | undefined } | undefined>}
 */
async function checkPackage(dir) {
  const tarball = [...tarballs.values()].find((t) => t.dir === dir);
  if (tarball === undefined) return undefined;
  const started = performance.now();
  const name = tarball.manifest.name;
  const log = join(logs, `package-${dir}.log`);
  const readme = readFileSync(join(root, 'packages', dir, 'README.md'), 'utf8');
  const parts = [`package ${dir.padEnd(nameWidth)}`];
  /** @type {string[]} */
  const problems = [];
  const finish = () => {
    parts.push(`in ${seconds(performance.now() - started)}`);
    const detail =
      problems.length === 0
        ? undefined
        : problems.map((problem) => `      ${problem.trimStart()}`).join('\n');
    return { what: `package ${dir}`, text: line(parts), detail };
  };

  const commands = installCommands(readme) ?? [];
  const installs = commands.filter(
    ([npm, verb]) => npm === 'npm' && /^(i|install|add)$/.test(verb ?? ''),
  );
  if (installs.length === 0) problems.push('its README has no `npm i` under "## Install"');
  else if (!installs.some((words) => words.slice(2).map(packageOf).includes(name))) {
    problems.push(`its README's Install section does not install ${name}`);
  }
  for (const words of commands) {
    if (words[0] !== 'npm')
      problems.push(`its Install section runs \`${words.join(' ')}\`: only npm commands are run`);
  }
  if (problems.length > 0) return finish();

  // A fresh project, as `npm init -y` makes it (CommonJS unless Install says otherwise).
  const project = join(work, 'packages', `${dir}-app`);
  mkdirSync(project, { recursive: true });
  const init = await run('npm', ['init', '-y'], { cwd: project, log });
  if (!init.ok) {
    problems.push(`npm init -y:\n${tail(init.output)}`);
    return finish();
  }
  // The overrides as paths relative to the project: the form `npm i` saves a tarball's
  // dependency in, which an override of a direct dependency must equal.
  const relativeOverrides = Object.fromEntries(
    Object.entries(overrides()).map(([pkg, spec]) => [
      pkg,
      `file:${relative(project, spec.slice('file:'.length))}`,
    ]),
  );
  const manifestFile = join(project, 'package.json');
  writeFileSync(
    manifestFile,
    `${JSON.stringify({ ...readJson(manifestFile), overrides: relativeOverrides }, null, 2)}\n`,
  );
  let installMs = 0;
  for (const words of commands) {
    const argv = words.slice(1);
    if (/^(i|install|add)$/.test(argv[0] ?? '')) {
      for (let i = 1; i < argv.length; i += 1) {
        const word = /** @type {string} */ (argv[i]);
        if (!word.startsWith('-') && tarballs.has(packageOf(word)))
          argv[i] = fileSpec(packageOf(word));
      }
    }
    const result = await run(
      'npm',
      argv.filter((word) => word !== '-g' && word !== '--global'),
      { cwd: project, log },
    );
    installMs += result.ms;
    if (!result.ok) {
      parts.push('install FAILED');
      problems.push(`\`${words.join(' ')}\`:\n${tail(result.output)}`);
      return finish();
    }
  }
  parts.push(`install ${seconds(installMs)}`);
  const installed = readJson(manifestFile);
  const direct = new Set(Object.keys({ ...installed.dependencies, ...installed.devDependencies }));

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
  if (!ls.ok) {
    problems.push(`npm ls finds a missing or invalid dependency:\n${tail(ls.output, 15)}`);
  }

  // The README's code: its Drop-in opens with a complete file, and every complete block
  // compiles in the project as pasted, importing only what Install installed (npm hoists the
  // rest, pnpm and Yarn PnP do not).
  const blocks = tsBlocks(readme);
  const complete = blocks.filter((block) => block.complete);
  const dropIn = blocks.find((block) => block.section === 'Drop-in');
  if (dropIn !== undefined && !dropIn.complete) {
    problems.push(
      `its Drop-in's first \`\`\`ts block (README.md:${dropIn.line}) does not start with \`import\`: make it a complete file`,
    );
  }
  for (const block of complete) {
    for (const pkg of importedPackages(block.code)) {
      if (!direct.has(pkg)) {
        problems.push(
          `README.md:${block.line} imports ${pkg}, which its Install section does not install`,
        );
      }
    }
  }
  if (complete.length === 0) {
    parts.push('no complete ts block');
    return finish();
  }
  parts.push(`${complete.length} ts block${complete.length === 1 ? '' : 's'}`);
  const ts = await run(
    'npm',
    ['i', '-D', ...TYPESCRIPTS.map(({ alias, spec }) => `${alias}@${spec}`)],
    { cwd: project, log },
  );
  if (!ts.ok) {
    parts.push('TypeScript install FAILED');
    problems.push(`npm i typescript:\n${tail(ts.output)}`);
    return finish();
  }
  const files = complete.map((block, index) => ({ ...block, file: `block-${index + 1}.ts` }));
  for (const { alias } of TYPESCRIPTS) {
    const tsDir = join(project, alias);
    mkdirSync(tsDir);
    const tsc = join(project, 'node_modules', alias, 'bin', 'tsc');
    const version = readJson(join(project, 'node_modules', alias, 'package.json')).version;
    const tsInit = await run(
      'node',
      [tsc, '--init', '--module', 'nodenext', '--skipLibCheck', 'false'],
      { cwd: tsDir, log },
    );
    for (const { file, code } of files) writeFileSync(join(tsDir, file), code);
    const result = tsInit.ok
      ? await run('node', [tsc, '--noEmit', '-p', '.'], { cwd: tsDir, log })
      : tsInit;
    const { ours, theirs, count } = diagnostics(result.output);
    // Errors in other libraries' declarations (skipLibCheck: false checks them too; several
    // fail tsc --init's exactOptionalPropertyTypes) are theirs: listed, not ours to fail on.
    const ok = result.ok || (ours.length === 0 && count > 0);
    const note =
      theirs.size > 0 ? ` (${count - ours.length} errors in ${[...theirs].join(', ')})` : '';
    parts.push(`ts ${version} ${ok ? 'ok' : 'FAILED'}${note}`);
    if (!ok) {
      const where = files
        .filter(({ file }) => ours.some((error) => error.startsWith(`${file}(`)))
        .map(({ file, line: at, section }) => `${file} is README.md:${at} (${section})`);
      const text = ours.length > 0 ? ours.join('\n') : result.output;
      problems.push(
        `TypeScript ${version} (in ${relative(work, tsDir)}; ${where.join(', ')}):\n${tail(text, 20)}`,
      );
    }
  }
  return finish();
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
