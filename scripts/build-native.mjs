#!/usr/bin/env node
// @ts-check
/**
 * `pnpm build:native`: builds better-sqlite3's native binding, the one native dependency of the
 * repo (store-sqlite's optional driver, a dev dependency for its tests). `pnpm install` builds no
 * native code (pnpm-workspace.yaml `allowBuilds: better-sqlite3: false`); `.ci/run` runs this
 * before `pnpm test`. Until it has run, store-sqlite's better-sqlite3 tests are skipped (one line
 * says so); with CI=true they fail instead.
 *
 * node-gyp builds against `npm_config_nodedir` (set by .ci/run), else against this Node's own
 * headers when it ships them (include/node beside bin/): no header download.
 *
 *   node scripts/build-native.mjs [--force]   # --force rebuilds a binding that already loads
 */
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const force = process.argv.includes('--force');
const fromStore = createRequire(join(root, 'packages', 'store-sqlite', 'package.json'));
const dir = dirname(realpathSync(fromStore.resolve('better-sqlite3/package.json')));
const binding = join(dir, 'build', 'Release', 'better_sqlite3.node');

/** Whether the binding loads and opens a database, in a child (a failed dlopen stays there). */
function loads() {
  const code = `const D = require(${JSON.stringify(dir)}); new D(':memory:').close();`;
  return spawnSync(process.execPath, ['-e', code], { stdio: 'ignore' }).status === 0;
}

if (!force && existsSync(binding) && loads()) {
  console.log(`better-sqlite3: already built (${binding})`);
  process.exit(0);
}

/** node-gyp: the copy pnpm or npm bundles, else the registry's (npx). */
function nodeGyp() {
  const candidates = [];
  const execpath = process.env.npm_execpath;
  if (execpath !== undefined) {
    // pnpm: <pnpm>/bin/pnpm.cjs or <pnpm>/pnpm with dist/node_modules/node-gyp beside it.
    for (let d = dirname(realpathSync(execpath)), i = 0; i < 3; d = dirname(d), i++) {
      candidates.push(join(d, 'dist', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
      candidates.push(join(d, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
    }
  }
  const npmRoot = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' }).stdout?.trim();
  if (npmRoot)
    candidates.push(join(npmRoot, 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  const found = candidates.find((file) => existsSync(file));
  return found === undefined
    ? { command: 'npx', args: ['--yes', 'node-gyp'] }
    : { command: process.execPath, args: [found] };
}

const nodeRoot = dirname(dirname(process.execPath));
const nodedir =
  process.env.npm_config_nodedir ??
  (existsSync(join(nodeRoot, 'include', 'node', 'node.h')) ? nodeRoot : undefined);
const gyp = nodeGyp();
const args = [...gyp.args, 'rebuild', '--release', ...(nodedir ? [`--nodedir=${nodedir}`] : [])];
console.log(`better-sqlite3: building in ${dir}\n$ ${gyp.command} ${args.join(' ')}`);
const started = performance.now();
const built = spawnSync(gyp.command, args, {
  cwd: dir,
  stdio: 'inherit',
  env: { ...process.env, npm_config_update_notifier: 'false' },
});
if (built.status !== 0) {
  console.error(`better-sqlite3: node-gyp failed (exit ${built.status ?? built.signal})`);
  process.exit(1);
}
if (!loads()) {
  console.error(`better-sqlite3: built, but ${binding} does not load in Node ${process.version}`);
  process.exit(1);
}
const took = ((performance.now() - started) / 1000).toFixed(1);
console.log(`better-sqlite3: built and loads (${binding}, ${took}s)`);
