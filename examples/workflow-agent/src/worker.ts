/**
 * One worker process of the Workflow SDK's local world (`@workflow/world-local`, on disk in
 * `WF_DATA`), running the bundles built in `WF_OUT`: `start <workflow> <order JSON>` starts a
 * run, `resume <runId>` waits for one (the local world re-enqueues the runs still active when it
 * starts: `recoverActiveRuns`). Prints `{"run":…}`, then `{"result":…}` or `{"error":…}` lines.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLocalWorld } from '@workflow/world-local';
import { getRun, start } from 'workflow/api';
import { setWorld } from 'workflow/runtime';

const [mode, target, input] = process.argv.slice(2);
const out = process.env.WF_OUT ?? '';
const world = createLocalWorld({ dataDir: process.env.WF_DATA ?? '', recoverActiveRuns: true });
const lazy = (file: string) => {
  let handler: ((req: Request) => Promise<Response>) | undefined;
  return async (req: Request) => {
    handler ??= (
      (await import(pathToFileURL(join(out, file)).href)) as {
        POST: (req: Request) => Promise<Response>;
      }
    ).POST;
    return handler(req);
  };
};
world.registerHandler('__wkf_workflow_', lazy('workflows.mjs'));
world.registerHandler('__wkf_step_', lazy('steps.mjs'));
await world.start?.();
setWorld(world);

const print = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const run =
  mode === 'start'
    ? await start({ workflowId: `workflow//./checkout//${target}` }, [JSON.parse(input ?? '{}')])
    : getRun(target ?? '');
print({ run: run.runId });
try {
  print({ result: await run.returnValue });
} catch (error) {
  print({ error: String((error as Error)?.message ?? error), status: await run.status });
}
await world.close?.();
process.exit(0);
