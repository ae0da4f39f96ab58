/**
 * Issue 17: on Node 22 every `sqlite:` run of the bin printed `ExperimentalWarning: SQLite is an
 * experimental feature`. The bin drops that one warning and no other. Checked in a child process
 * on any Node: the warning is emitted by hand, then node:sqlite is used for real (Node 22 warns).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

test('the SQLite ExperimentalWarning is dropped; every other warning is printed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-cli-quiet-'));
  const script = join(dir, 'child.mts');
  const quiet = fileURLToPath(new URL('./quiet.ts', import.meta.url));
  writeFileSync(
    script,
    `import { quietSqliteWarning } from ${JSON.stringify(quiet)};
quietSqliteWarning();
process.emitWarning('SQLite is an experimental feature and might change at any time', 'ExperimentalWarning');
process.emitWarning('SQLite is an experimental feature and might change at any time', { type: 'ExperimentalWarning' });
process.emitWarning('Another feature is experimental', 'ExperimentalWarning');
process.emitWarning('a plain warning');
const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
new DatabaseSync(':memory:').close();
`,
  );
  try {
    const stderr = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', script], {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let text = '';
      child.stderr.on('data', (chunk) => {
        text += chunk;
      });
      child.on('error', reject);
      child.on('close', () => resolve(text));
    });
    expect(stderr).not.toContain('SQLite is an experimental feature');
    expect(stderr).toContain('ExperimentalWarning: Another feature is experimental');
    expect(stderr).toContain('Warning: a plain warning');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
