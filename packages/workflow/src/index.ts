/**
 * Idempotent steps for Vercel's Workflow SDK (`workflow`): a step's side effect runs once per
 * workflow run and step, across the engine's re-runs of a step it did not record (a crash after
 * the effect, a timeout, a retry). The call's identity is the engine's own: the run id
 * (`getWorkflowMetadata().workflowRunId`) and the step id (`getStepMetadata().stepId`), which
 * stay the same on every attempt of one step.
 */
import {
  ConfigurationError,
  createIdempotency,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  OutcomeUnknownError,
  type ToolPolicy,
} from '@idempotent-tools/core';
import { FatalError, getStepMetadata, getWorkflowMetadata } from 'workflow';

export {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  currentExecutionContext,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  IdempotencyError,
  type IdempotencyStore,
  OutcomeUnknownError,
  type ToolPolicy,
} from '@idempotent-tools/core';

/** Options of `idempotentStep(name, fn, options)`: the executor's, the tool's policy, a scope. */
export type IdempotentStepOptions<Args, Result> = ExecutorOptions &
  ToolPolicy<Args, Result> & {
    /** Tenant / user: records of one scope are invisible to another. */
    scope?: string | ((args: Args) => string | undefined) | undefined;
  };

const POLICY_KEYS = ['businessKey', 'reconcile', 'onReplay'] as const;

/**
 * The effect of one Workflow SDK step, run once: call the returned function inside a
 * `"use step"` function. The key is the workflow run id, the step id and the arguments; the
 * engine's re-run of the step (a crash before it recorded the step) replays the stored result;
 * an attempt that died mid-way goes to `reconcile`, else fails with `OutcomeUnknownError` (as the
 * engine's `FatalError`, so it does not retry a step whose effect is unknown; `cause` is the error).
 * `ctx.key` is the same on every attempt: send it as the vendor's `Idempotency-Key`.
 *
 * ```ts
 * const charge = idempotentStep('charge', (order: Order, ctx) =>
 *   bank.charge(order, { idempotencyKey: ctx.key }), { store });
 * async function chargeStep(order: Order) { 'use step'; return charge(order); }
 * ```
 * @throws ConfigurationError when called outside a step (no step metadata)
 */
export function idempotentStep<Args, Result>(
  name: string,
  fn: (args: Args, ctx: ExecutionContext) => Result | Promise<Result>,
  options: IdempotentStepOptions<Args, Result>,
): (args: Args) => Promise<Result> {
  const executorOptions: Record<string, unknown> = { ...options };
  const policy: ToolPolicy<Args, Result> = {};
  for (const key of POLICY_KEYS) {
    if (options[key] !== undefined) Object.assign(policy, { [key]: options[key] });
    delete executorOptions[key];
  }
  delete executorOptions.scope;
  const idempotency: Idempotency =
    'idempotency' in options
      ? options.idempotency
      : createIdempotency(executorOptions as unknown as Parameters<typeof createIdempotency>[0]);
  return async (args: Args) => {
    let stepId: string;
    let runId: string;
    try {
      stepId = getStepMetadata().stepId;
      runId = getWorkflowMetadata().workflowRunId;
    } catch (cause) {
      throw new ConfigurationError({
        message: `idempotentStep('${name}') was called outside a "use step" function (${String(cause)}): call it inside the step, where getStepMetadata() gives the step id`,
        option: 'use step',
      });
    }
    const scope = typeof options.scope === 'function' ? options.scope(args) : options.scope;
    try {
      const { value } = await idempotency.run(
        { toolName: name, turnId: `${runId}/${stepId}`, scope, args },
        fn,
        policy,
      );
      return value;
    } catch (error) {
      // Re-running the step cannot tell whether the effect happened: stop the engine's retries.
      if (error instanceof OutcomeUnknownError)
        throw Object.assign(new FatalError(error.message), { cause: error });
      throw error;
    }
  };
}
