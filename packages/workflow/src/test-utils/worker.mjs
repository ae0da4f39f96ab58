// One worker process of the Workflow SDK's local world: `start <workflow> <amount>` or
// `resume <runId>` (the local world re-enqueues active runs on start). Prints `RUN`, then
// `RESULT` or `ERROR` as JSON lines.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setWorld } from '@workflow/core/runtime';
import { createLocalWorld } from '@workflow/world-local';
import { getRun, start } from 'workflow/api';

const [mode, target, amount] = process.argv.slice(2);
const dir = process.env.WF_DIR;
const out = join(dir, 'out');
const world = createLocalWorld({ dataDir: process.env.WF_DATA, recoverActiveRuns: true });
const lazy = (file) => {
  let handler;
  return async (req) => {
    handler ??= (await import(pathToFileURL(join(out, file)).href)).POST;
    return handler(req);
  };
};
world.registerHandler('__wkf_workflow_', lazy('workflows.mjs'));
world.registerHandler('__wkf_step_', lazy('steps.mjs'));
await world.start?.();
setWorld(world);
const print = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const run =
  mode === 'start'
    ? await start({ workflowId: `workflow//./workflows/charge//${target}` }, [Number(amount)])
    : getRun(target);
print({ run: run.runId });
try {
  print({ result: await run.returnValue });
} catch (error) {
  print({ error: String(error?.message ?? error), status: await run.status });
}
await world.close?.();
process.exit(0);
