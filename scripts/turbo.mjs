#!/usr/bin/env node
// @ts-check
/**
 * turbo, as the root scripts run it, on every platform: no telemetry, no update notice (set here
 * rather than as a POSIX `VAR=1 command` prefix, which cmd.exe and PowerShell do not read).
 *
 *   node scripts/turbo.mjs [--quiet] <turbo arguments...>
 *
 * `--quiet` runs turbo with its output hidden and, only when it fails, runs it again with the
 * errors shown: a build that is up to date prints nothing.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const quiet = args[0] === '--quiet';
if (quiet) args.shift();

const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', TURBO_NO_UPDATE_NOTIFIER: '1' };
// turbo's own launcher (a Node script that starts the binary for this platform).
const turbo = require.resolve('turbo/bin/turbo');
/** @param {'inherit' | 'ignore'} output */
const run = (output) =>
  spawnSync(process.execPath, [turbo, ...args], { env, stdio: ['ignore', output, output] });

let result = run(quiet ? 'ignore' : 'inherit');
if (quiet && result.status !== 0) result = run('inherit');
if (result.error !== undefined) throw result.error;
process.exit(result.status ?? 1);
