/**
 * DBOS steps whose side effect runs once per workflow, step and arguments. DBOS runs a step at
 * least once: a worker killed after the effect and before DBOS checkpointed the step's output is
 * recovered by running the step again. An `idempotentStep` is `DBOS.registerStep(fn)` with a
 * lookup first, keyed by what DBOS itself knows of the call (the workflow id and the step's
 * function id, both the same on every recovery), so the re-run replays the stored outcome, or
 * meets the stale attempt (`reconcile`, else `OutcomeUnknownError`) instead of charging twice.
 */

import { DBOS, type StepConfig } from '@dbos-inc/dbos-sdk';
import { ConfigurationError, type ExecutorOptions } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';

/** What a `turnId` or `scope` function is given about one step call. */
export interface StepCall {
  stepName: string;
  /** The step's arguments. */
  args: readonly unknown[];
  /** `DBOS.workflowID`: the workflow the step runs in (the same when DBOS recovers it). */
  workflowID: string | undefined;
  /** `DBOS.stepID`: the step's function id in its workflow (the same when DBOS recovers it). */
  stepID: number | undefined;
}

/**
 * Options of `idempotentStep(name, fn, options)`: the executor's options (`{ store }`) or
 * `{ idempotency }`, the call's identity, the idempotency `policy`, and DBOS's own `StepConfig`.
 */
export type IdempotentStepOptions<
  Args extends unknown[] = unknown[],
  Result = unknown,
> = ExecutorOptions &
  Omit<kit.TaskWrapOptions<StepCall, Args, Result>, 'conversationId'> & {
    /**
     * DBOS's configuration of the step (`retriesAllowed`, `maxAttempts`, `intervalSeconds`,
     * `backoffRate`, `shouldRetry`, `timeoutMS`), as `DBOS.registerStep(fn, config)` takes it;
     * the name is the first argument.
     * @default {} (DBOS's defaults: no retries)
     */
    step?: Omit<StepConfig, 'name'> | undefined;
  };

const STEP_NAME_HOW_TO = '[A-Za-z0-9_.-]';

/**
 * A DBOS step (`DBOS.registerStep(fn, { name })`) whose side effect runs once per workflow
 * (`DBOS.workflowID`), place in the workflow (`DBOS.stepID`) and arguments. DBOS's re-run of a
 * step it had not checkpointed (a recovered workflow, a step retry) looks the call up first: a
 * stored outcome is returned (its JSON round trip), an attempt that died mid-way goes to
 * `policy.reconcile`, else fails with `OutcomeUnknownError`. Inside `fn`,
 * `currentExecutionContext().key` is the call's key: send it to the vendor as `Idempotency-Key`.
 *
 * ```ts
 * const charge = idempotentStep('charge', (order: Order) => bank.charge(order), { store });
 * const checkout = DBOS.registerWorkflow(async (order: Order) => charge(order), { name: 'checkout' });
 * ```
 * @throws ConfigurationError (when made) on bad options; (when called) outside a DBOS workflow
 *   without a `turnId` option
 */
export function idempotentStep<Args extends unknown[], Result>(
  name: string,
  fn: (...args: Args) => Result | Promise<Result>,
  options: IdempotentStepOptions<Args, Result>,
): (...args: Args) => Promise<Awaited<Result>> {
  if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    throw new ConfigurationError({
      option: 'name',
      message: `idempotentStep(name, fn, options): name must be 1 to 64 characters of ${STEP_NAME_HOW_TO} (it names the step in DBOS and in the keys), got ${JSON.stringify(name)}.`,
    });
  }
  const { step, ...wrapOptions } = (options ?? {}) as IdempotentStepOptions<Args, Result>;
  const { prepare, run } = kit.createTaskAdapter<StepCall, Args>(fn, wrapOptions, {
    caller: 'idempotentStep',
    name,
    turn: ({ workflowID }) => kit.idOf(workflowID),
    conversation: ({ workflowID }) => kit.idOf(workflowID),
    howTo:
      'a DBOS workflow to call the step from (DBOS.registerWorkflow), or the turnId option: outside a workflow DBOS runs a step as a plain function call',
    runs: {
      // The workflow id names one run: DBOS never starts a second run under it.
      finished: () => false,
      place: ({ stepID }) => [stepID ?? null],
      tag: ['dbs_', 'idempotent-tools/dbos-step'],
      runHowTo: 'the turnId option',
    },
  });
  const body = async (...args: Args): Promise<Awaited<Result>> => {
    const info: StepCall = {
      stepName: name,
      args,
      workflowID: DBOS.workflowID,
      stepID: DBOS.stepID,
    };
    return run(await prepare(args, info), fn) as Promise<Awaited<Result>>;
  };
  return DBOS.registerStep(body, { ...step, name });
}
