import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type MissingService, SERVICE_SKIP_LOG_ENV } from './service.js';

/** The part of Vitest's task tree this reporter reads (structural: no import of Vitest). */
interface TaskLike {
  type: string;
  mode: string;
  tasks?: TaskLike[];
}
interface TestModuleLike {
  moduleId: string;
  task: TaskLike;
}

/**
 * A test left in mode `run` under a skipped suite is skipped. Vitest marks the tests of a skipped
 * suite as skipped, but not those of a suite that was itself declared skipped inside it
 * (`describe.skipIf(x)` passed to a conformance suite that nests it): they were neither run nor
 * counted, and dropped out of the summary.
 */
function propagateSkip(task: TaskLike, skipped: boolean): void {
  for (const child of task.tasks ?? []) {
    if (skipped && (child.mode === 'run' || child.mode === 'queued')) child.mode = 'skip';
    propagateSkip(child, skipped || child.mode === 'skip');
  }
}

function countSkipped(task: TaskLike): number {
  let count = 0;
  for (const child of task.tasks ?? []) {
    if (child.type === 'test' && child.mode === 'skip') count += 1;
    count += countSkipped(child);
  }
  return count;
}

/**
 * Vitest reporter: every test of a skipped suite counts as skipped, and the run prints one line
 * per service that `serviceAvailable` did not find, with how many tests that skipped:
 *
 * ```
 * [idempotent-tools] Redis at redis://127.0.0.1:6379 is not reachable (...): 97 tests skipped (start it: ...)
 * ```
 *
 * List it before Vitest's own reporter (it fixes the counts that one prints):
 * `reporters: [new ServiceSkipReporter(), 'default']`.
 */
export class ServiceSkipReporter {
  #dir: string | undefined;
  #log: string | undefined;

  onInit(): void {
    this.#dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-skips-'));
    this.#log = join(this.#dir, 'missing.jsonl');
    // The test workers start after this and inherit it.
    process.env[SERVICE_SKIP_LOG_ENV] = this.#log;
  }

  onTestModuleCollected(testModule: TestModuleLike): void {
    propagateSkip(testModule.task, testModule.task.mode === 'skip');
  }

  onTestRunEnd(testModules: readonly TestModuleLike[]): void {
    for (const module of testModules) propagateSkip(module.task, module.task.mode === 'skip');
    let text = '';
    try {
      text = this.#log === undefined ? '' : readFileSync(this.#log, 'utf8');
    } catch {
      // no service was missing
    }
    const services = new Map<string, { missing: MissingService; files: Set<string> }>();
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const missing = JSON.parse(line) as MissingService;
      const key = `${missing.name}\n${missing.url}`;
      const entry = services.get(key) ?? { missing, files: new Set<string>() };
      if (missing.file !== undefined) entry.files.add(missing.file);
      services.set(key, entry);
    }
    for (const { missing, files } of services.values()) {
      const modules = testModules.filter((m) => files.has(m.moduleId));
      const skipped = modules.reduce((sum, m) => sum + countSkipped(m.task), 0);
      const count =
        modules.length === 0
          ? 'its tests skipped'
          : `${skipped} test${skipped === 1 ? '' : 's'} skipped in ${modules.length} file${modules.length === 1 ? '' : 's'}`;
      process.stdout.write(
        `\n[idempotent-tools] ${missing.name} at ${missing.url} is not reachable (${missing.reason}): ${count} (start it: ${missing.start}; with CI=true they fail instead)\n`,
      );
    }
    if (this.#dir !== undefined) rmSync(this.#dir, { recursive: true, force: true });
    delete process.env[SERVICE_SKIP_LOG_ENV];
  }
}
