#!/usr/bin/env node
// @ts-check
/**
 * Our packages before they are on the npm registry: packed in this clone, installed from the
 * tarballs. Until they are published, `npm install` of a copied-out example (or `npm i` of a
 * package) fails with E404; this is the route that works (the root README's "Before the packages
 * are published"), and `scripts/check-copy-out.mjs` checks the examples through it.
 *
 *   pnpm pack:local [dest]                 # node scripts/local-packages.mjs pack [dest]
 *   pnpm create-example <name> <dir>       # node scripts/local-packages.mjs create-example ...
 *   node scripts/local-packages.mjs npm-i <what a README's `npm i` names ...>
 *
 * - `pack`: builds the packages (turbo) and packs every package of `packages/` that is not
 *   private with `pnpm pack` (which turns `workspace:` ranges into versions) into one folder,
 *   `local-packages/` by default, beside an `index.json`: package name -> absolute tarball path.
 * - `create-example`: copies `examples/<name>` to `<dir>` (a new or empty folder outside this
 *   repository) without `node_modules/`, `.demo-data/`, `dist/` and `.turbo/`, points each
 *   `@idempotent-tools/*` dependency at its tarball (`file:` + absolute path) and adds npm
 *   `overrides` for all our packages (so the ones between them are the tarballs too). It packs
 *   first when `local-packages/` is missing or older than a package's files.
 * - `npm-i`: prints the `npm i` that installs the given packages from the tarballs, together with
 *   the tarballs of the `@idempotent-tools/*` packages they depend on (packs first likewise).
 */
import { spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The root of this repository. */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url));
/** Where `pack` puts the tarballs unless told otherwise. */
export const defaultDest = join(repoRoot, 'local-packages');
const SCOPE = '@idempotent-tools/';
/** What a copied-out example leaves behind: installs, run data, build output. */
const NOT_COPIED = /[/\\](node_modules|\.demo-data|dist|\.turbo)$/;

/** A mistake of the caller's, with a message that says what to do: the CLI prints only it. */
export class LocalPackagesError extends Error {
  name = 'LocalPackagesError';
}

/** @param {string} file */
function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** The examples: the folders of `examples/` with a `package.json`, sorted. */
export function exampleNames() {
  return readdirSync(join(repoRoot, 'examples'))
    .filter((name) => existsSync(join(repoRoot, 'examples', name, 'package.json')))
    .sort();
}

/**
 * The packages `pack` packs: each folder of `packages/` whose `package.json` is not private.
 * @returns {Array<{ dir: string, name: string, manifest: any }>}
 */
export function publishablePackages() {
  return readdirSync(join(repoRoot, 'packages'))
    .filter((dir) => existsSync(join(repoRoot, 'packages', dir, 'package.json')))
    .map((dir) => {
      const manifest = readJson(join(repoRoot, 'packages', dir, 'package.json'));
      return { dir, name: String(manifest.name), manifest };
    })
    .filter(({ manifest }) => manifest.private !== true)
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** pnpm as the current run has it (`pnpm pack:local`, `npx pnpm@... pack:local`), else `pnpm`. */
function pnpmCommand() {
  const execPath = process.env.npm_execpath ?? '';
  if (!/pnpm/i.test(basename(execPath))) return { command: 'pnpm', prefix: [] };
  // pnpm.cjs is a script; pnpm 12 is also a native executable.
  if (/\.[cm]?js$/.test(execPath)) return { command: process.execPath, prefix: [execPath] };
  return { command: execPath, prefix: [] };
}

/**
 * Run a command; its output (both streams) when it succeeds, an error with its tail otherwise.
 * @param {string} command @param {string[]} argv @param {string} cwd
 * @returns {Promise<string>}
 */
function run(command, argv, cwd) {
  return new Promise((resolvePromise, reject) => {
    const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', TURBO_NO_UPDATE_NOTIFIER: '1' };
    const child = spawn(command, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    /** @type {Buffer[]} */
    const chunks = [];
    child.stdout.on('data', (chunk) => chunks.push(chunk));
    child.stderr.on('data', (chunk) => chunks.push(chunk));
    const fail = (/** @type {string} */ why) => {
      const output = Buffer.concat(chunks).toString().trimEnd().split('\n').slice(-30).join('\n');
      reject(new Error(`\`${[command, ...argv].join(' ')}\` (in ${cwd}) ${why}\n${output}`));
    };
    child.on('error', (error) => fail(`could not start: ${error.message}`));
    child.on('close', (code, signal) => {
      if (code === 0) resolvePromise(Buffer.concat(chunks).toString());
      else fail(`exited with ${code ?? signal}`);
    });
  });
}

/**
 * Build the packages and pack each one into `dest`, with `index.json` beside the tarballs.
 * @param {{
 *   dest?: string,
 *   print?: (line: string) => void,
 * }} [options]
 *   `dest`: the folder of the tarballs, created when missing (default `<repo>/local-packages`);
 *   tarballs of ours left there by an earlier pack of other versions are removed.
 *   `print`: progress lines (default `console.log`).
 * @returns {Promise<Record<string, string>>} package name -> absolute path of its tarball
 */
export async function packLocal({ dest = defaultDest, print = console.log } = {}) {
  const started = performance.now();
  const folder = resolve(dest);
  if (existsSync(folder) && !statSync(folder).isDirectory()) {
    throw new LocalPackagesError(`${folder} is a file, not a folder: pack into another folder.`);
  }
  mkdirSync(folder, { recursive: true });
  const packages = publishablePackages();
  const pnpm = pnpmCommand();
  print(`Building the packages (turbo run build --filter=./packages/*) ...`);
  await run(
    pnpm.command,
    [
      ...pnpm.prefix,
      'exec',
      'turbo',
      'run',
      'build',
      '--filter=./packages/*',
      '--output-logs=errors-only',
    ],
    repoRoot,
  );
  print(`Packing ${packages.length} packages into ${folder} ...`);
  /** @type {Record<string, string>} */
  const packed = {};
  // A few at a time: each `pnpm pack` is mostly pnpm's start-up.
  const queue = [...packages];
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const output = await run(
        pnpm.command,
        [...pnpm.prefix, 'pack', '--json', '--pack-destination', folder],
        join(repoRoot, 'packages', next.dir),
      );
      const json = JSON.parse(output.slice(output.indexOf('{')));
      packed[next.name] = resolve(folder, json.filename);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  const sorted = Object.fromEntries(Object.entries(packed).sort(([a], [b]) => a.localeCompare(b)));
  const kept = new Set(Object.values(sorted).map((file) => basename(file)));
  for (const file of readdirSync(folder)) {
    if (/^idempotent-tools-.*\.tgz$/.test(file) && !kept.has(file)) rmSync(join(folder, file));
  }
  // Written last: its time is the pack's (`packedPackages` compares the packages' files with it).
  writeFileSync(join(folder, 'index.json'), `${JSON.stringify(sorted, null, 2)}\n`);
  const took = ((performance.now() - started) / 1000).toFixed(1);
  print(
    `Packed ${packages.length} packages in ${took}s (${join(folder, 'index.json')} lists them).`,
  );
  return sorted;
}

/** @param {string} dir the newest modification time of the files under `dir` (not installs). */
function newestFile(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    newest = Math.max(
      newest,
      entry.isDirectory() ? newestFile(path) : entry.isFile() ? statSync(path).mtimeMs : 0,
    );
  }
  return newest;
}

/**
 * The tarballs of an earlier `pack` into `dest`, or undefined when there are none or they are
 * out of date: `index.json` missing, a package added or removed since, a tarball gone, or a file
 * of a package (its sources, `dist/`, `package.json`, README) newer than the pack.
 * @param {{ dest?: string }} [options]
 * @returns {Record<string, string> | undefined}
 */
export function packedPackages({ dest = defaultDest } = {}) {
  const index = join(resolve(dest), 'index.json');
  if (!existsSync(index)) return undefined;
  /** @type {Record<string, string>} */
  let packed;
  try {
    packed = readJson(index);
  } catch {
    return undefined;
  }
  const packages = publishablePackages();
  const names = Object.keys(packed).sort();
  const current = packages.map(({ name }) => name);
  if (names.join(' ') !== current.join(' ')) return undefined;
  if (!Object.values(packed).every((file) => existsSync(file))) return undefined;
  const packedAt = statSync(index).mtimeMs;
  const newest = Math.max(
    statSync(join(repoRoot, 'tsconfig.base.json')).mtimeMs,
    ...packages.map(({ dir }) => newestFile(join(repoRoot, 'packages', dir))),
  );
  return newest > packedAt ? undefined : packed;
}

/**
 * `dir`, with the symbolic links of its existing part resolved.
 * @param {string} dir
 * @returns {string}
 */
function realPath(dir) {
  const absolute = resolve(dir);
  if (existsSync(absolute)) return realpathSync(absolute);
  const parent = dirname(absolute);
  return parent === absolute ? absolute : join(realPath(parent), basename(absolute));
}

/** @param {string} word a word for a shell, quoted when it needs to be */
const shellWord = (word) =>
  /^[\w@%+=:,./~-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * Why `create-example` refuses `name` and `dir`, thrown; else the folder, absolute.
 * @param {{ name: string, dir: string }} options
 */
function checkCreatable({ name, dir }) {
  const names = exampleNames();
  if (!names.includes(name)) {
    throw new LocalPackagesError(
      `There is no example "${name}" under examples/. The examples: ${names.join(', ')}.`,
    );
  }
  const target = resolve(dir);
  const fromRoot = relative(realpathSync(repoRoot), realPath(target));
  if (fromRoot === '' || (!fromRoot.startsWith('..') && !isAbsolute(fromRoot))) {
    throw new LocalPackagesError(
      `${target} is inside this repository, where Node and TypeScript would find the repository's node_modules and hide what the example lacks: choose a folder outside it, e.g. ~/my-${name}.`,
    );
  }
  if (existsSync(target)) {
    if (!statSync(target).isDirectory()) {
      throw new LocalPackagesError(
        `${target} exists and is not a folder: choose a new folder (create-example creates it).`,
      );
    }
    if (readdirSync(target).length > 0) {
      throw new LocalPackagesError(
        `${target} is not empty: choose a new or empty folder (create-example overwrites nothing), or remove it first.`,
      );
    }
  }
  return target;
}

/**
 * Copy `examples/<name>` to `dir` and point its `@idempotent-tools/*` dependencies at the
 * tarballs: each one `file:<absolute path>`, and npm `overrides` naming every package of ours,
 * so the dependencies between our packages are the tarballs too. Then it prints what to run.
 * @param {{
 *   name: string,
 *   dir: string,
 *   packages: Record<string, string>,
 *   print?: (line: string) => void,
 * }} options
 *   `name`: a folder of `examples/`. `dir`: a new or empty folder outside this repository.
 *   `packages`: package name -> tarball, as `packLocal` returns it. `print`: the lines saying
 *   what to run next (default `console.log`).
 * @returns {{ dir: string, packageJson: any }} the folder (absolute) and its `package.json`
 */
export function createExample({ name, dir, packages, print = console.log }) {
  const target = checkCreatable({ name, dir });
  const source = join(repoRoot, 'examples', name);
  const packageJson = readJson(join(source, 'package.json'));
  for (const field of ['dependencies', 'devDependencies']) {
    for (const dep of Object.keys(packageJson[field] ?? {})) {
      if (!dep.startsWith(SCOPE)) continue;
      const file = packages[dep];
      if (file === undefined || !existsSync(file)) {
        throw new LocalPackagesError(
          `examples/${name} depends on ${dep}, which has no tarball among the packed ones: run \`pnpm pack:local\` and try again.`,
        );
      }
      packageJson[field][dep] = `file:${file}`;
    }
  }
  packageJson.overrides = {
    ...packageJson.overrides,
    ...Object.fromEntries(Object.entries(packages).map(([pkg, file]) => [pkg, `file:${file}`])),
  };
  cpSync(source, target, { recursive: true, filter: (path) => !NOT_COPIED.test(path) });
  writeFileSync(join(target, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
  const folders = [...new Set(Object.values(packages).map((file) => dirname(file)))];
  print(
    [
      `Created ${target}: examples/${name}, its ${SCOPE}* dependencies the tarballs in ${folders.join(', ')} (file: paths, npm overrides for the ones between our packages).`,
      'Next:',
      `  cd ${shellWord(target)} && npm install && npm start`,
      '  npm test && npm run typecheck',
      'It names the tarballs by absolute path: keep this clone where it is. For newer packages, `git pull && pnpm pack:local` here, then `rm -rf node_modules package-lock.json && npm install` there (npm keeps what its lock names otherwise).',
    ].join('\n'),
  );
  return { dir: target, packageJson };
}

/**
 * The `npm i` that installs what `words` name (a README's `npm i` line: package names, ranges,
 * flags) with our packages taken from the tarballs, each with the tarballs of the
 * `@idempotent-tools/*` packages it depends on (npm then finds those installed, never on the
 * registry). Other words stay as they are.
 * @param {string[]} words
 * @param {Record<string, string>} packages package name -> tarball, as `packLocal` returns it
 * @returns {string}
 */
export function npmInstallCommand(words, packages) {
  if (words.some((word) => word === '-g' || word === '--global')) {
    throw new LocalPackagesError(
      'A global install resolves each package on its own, so our packages between them would come from the registry (E404): install into a project (without -g) and run its bin with `npx`.',
    );
  }
  const manifests = new Map(publishablePackages().map((pkg) => [pkg.name, pkg.manifest]));
  /** @type {string[]} */
  const ours = [];
  /** @type {string[]} */
  const others = [];
  /** @param {string} name */
  const add = (name) => {
    if (ours.includes(name)) return;
    const manifest = manifests.get(name);
    if (manifest === undefined || packages[name] === undefined) {
      throw new LocalPackagesError(
        `${name} is not a package of this repository. Ours: ${[...manifests.keys()].join(', ')}.`,
      );
    }
    ours.push(name);
    const deps = { ...manifest.dependencies, ...manifest.peerDependencies };
    for (const dep of Object.keys(deps)) if (dep.startsWith(SCOPE)) add(dep);
  };
  for (const word of words) {
    const name = word.startsWith('@') ? word.replace(/^(@[^/]+\/[^@]+)@.*$/, '$1') : word;
    if (name.startsWith(SCOPE)) add(name);
    else others.push(word);
  }
  if (ours.length === 0) {
    throw new LocalPackagesError(
      `Name at least one of our packages (${[...manifests.keys()].join(', ')}), as a README's \`npm i\` does.`,
    );
  }
  const flags = others.filter((word) => word.startsWith('-'));
  const rest = others.filter((word) => !word.startsWith('-'));
  const tarballs = ours.sort().map((name) => String(packages[name]));
  return ['npm', 'i', ...flags, ...tarballs, ...rest].map(shellWord).join(' ');
}

// ---------------------------------------------------------------------------------------------

const USAGE = `Usage (in a clone of this repository, after \`pnpm install\`):
  pnpm pack:local [dest]                 build and pack every package into dest (default local-packages/)
  pnpm create-example <name> <dir>       copy examples/<name> to dir, installing our packages from the tarballs
  node scripts/local-packages.mjs npm-i <package ...>   print the npm i for a project of your own`;

/**
 * A path the user typed. Under `pnpm <script>` the script runs at the root: the user's folder is
 * `INIT_CWD` then (pnpm and npm set it for a script, with `npm_lifecycle_event`).
 * @param {string} path
 */
function userPath(path) {
  const { INIT_CWD: initCwd, npm_lifecycle_event: script } = process.env;
  return resolve(script !== undefined && initCwd ? initCwd : process.cwd(), path);
}

/** The packed tarballs in `local-packages/`, packed first when they are missing or out of date. */
async function packedOrPack() {
  const packed = packedPackages();
  if (packed !== undefined) return packed;
  console.log(`${defaultDest} is missing or older than the packages: packing first.`);
  return packLocal();
}

/** @param {string[]} argv */
async function main([command, ...args]) {
  if (command === 'pack' && args.length <= 1) {
    await packLocal(args[0] === undefined ? {} : { dest: userPath(args[0]) });
  } else if (command === 'create-example' && args.length === 2) {
    const [name, dir] = /** @type {[string, string]} */ (args);
    // Before any packing: a typo should not cost a build.
    checkCreatable({ name, dir: userPath(dir) });
    createExample({ name, dir: userPath(dir), packages: await packedOrPack() });
  } else if (command === 'npm-i' && args.length > 0) {
    const line = npmInstallCommand(args, await packedOrPack());
    console.log(`In your project (the tarballs are named by absolute path):\n\n${line}`);
  } else {
    console.error(USAGE);
    process.exit(2);
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((/** @type {unknown} */ error) => {
    if (error instanceof LocalPackagesError) console.error(error.message);
    else console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
