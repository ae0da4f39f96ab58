/**
 * The store-redis suite's global setup and teardown (test-only). Every throwaway `redis-server`
 * a test starts lives in a directory under one run directory; after the suite, the teardown
 * looks for a `redis-server` process whose working directory is in it (Redis changes into its
 * `--dir`), kills it, and fails the run naming it: a test that leaves a server behind is a bug.
 */
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let runDir: string | undefined;

export function setup(): void {
  runDir = mkdtempSync(join(tmpdir(), 'idem-redis-run-'));
  process.env.IDEM_REDIS_TEST_DIR = runDir;
}

/** The `redis-server` processes running in `dir` (Linux `/proc`; elsewhere none are found). */
function serversIn(dir: string): { pid: number; cwd: string }[] {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const found: { pid: number; cwd: string }[] = [];
  for (const pid of pids) {
    try {
      // The process title Redis sets ("redis-server 127.0.0.1:PORT"); its exe may be a link
      // target such as redis-check-rdb.
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmdline.startsWith('redis-server')) continue;
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      if (cwd.startsWith(dir)) found.push({ pid: Number(pid), cwd });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

export function teardown(): void {
  if (runDir === undefined) return;
  const left = serversIn(runDir);
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  rmSync(runDir, { recursive: true, force: true });
  if (left.length > 0) {
    throw new Error(
      `store-redis: ${left.length} redis-server process(es) outlived the tests that started them (pids ${left.map((l) => l.pid).join(', ')}, in ${left.map((l) => l.cwd).join(', ')}); they were killed now. Every test must stop the servers it starts (stopRedisServers in afterAll).`,
    );
  }
}
