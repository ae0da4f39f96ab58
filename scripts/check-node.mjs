#!/usr/bin/env node
// The first thing `pnpm install` (preinstall) and `pnpm demo` run: refuse a Node.js that is too
// old, saying what to install, before anything fails later with advice meant for library users.
// Written for any Node.js a user may have (no syntax or API newer than Node 12).
const MINIMUM = [22, 13, 0];
const version = process.versions.node;
const parts = version.split('.').map((part) => Number.parseInt(part, 10));
let tooOld = false;
for (let i = 0; i < MINIMUM.length; i += 1) {
  if (parts[i] > MINIMUM[i]) break;
  if (parts[i] < MINIMUM[i]) {
    tooOld = true;
    break;
  }
}
if (tooOld) {
  console.error(
    [
      '',
      'idempotent-tools needs Node.js ' +
        MINIMUM.join('.') +
        ' or newer; this is Node.js ' +
        version +
        '.',
      'Its demo, examples and SQLite store use node:sqlite, which Node.js ships from 22.13.',
      'Install Node.js 24 (LTS): https://nodejs.org/en/download, or `nvm install 24`, `fnm install 24`,',
      '`volta install node@24`; then run the same command again.',
      '',
    ].join('\n'),
  );
  process.exit(1);
}
