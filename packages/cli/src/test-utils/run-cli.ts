/** The real bin, run from source with tsx (no build needed), as a child process. Test-only. */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const src = dirname(dirname(fileURLToPath(import.meta.url)));
const BIN = join(src, 'bin.ts');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', BIN, ...args], {
      cwd: dirname(src),
      env: { ...process.env, IDEMPOTENT_TOOLS_STORE: '', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Run with `--json` and parse stdout. */
export async function cliJson<T = Record<string, unknown>>(args: readonly string[]): Promise<T> {
  const run = await cli([...args, '--json']);
  if (run.code !== 0) throw new Error(`exit ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}
