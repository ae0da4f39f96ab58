#!/usr/bin/env node
import { quietSqliteWarning } from './quiet.js';

// Before node:sqlite can load (main.js loads the stores): Node 22 would print its warning.
quietSqliteWarning();
const { main } = await import('./main.js');

const code = await main(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
// Exit once the output is flushed, without waiting for a client library's leftover timers.
process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
