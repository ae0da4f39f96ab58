/**
 * `@idempotent-tools/langchain/langgraph`: tasks of LangGraph's functional API whose side effect
 * runs once per thread, place in the run and arguments, across resumes after an interrupt,
 * whole-graph retries, subgraphs and a crashed process resumed from a persistent checkpointer
 * (LangGraph re-runs a task whose result it did not keep: each re-run is a lookup first); and
 * tasks that ask a person first (`approvalTask`: an interrupt, the resume value the decision).
 */
import {
  type Approval,
  ApprovalRejectedError,
  type AskedDecision,
  ConfigurationError,
  createApprovals,
} from '@idempotent-tools/core';
import { interrupt, isGraphInterrupt, type TaskOptions, task } from '@langchain/langgraph';
import { type IdempotentTaskOptions, taskCalls } from './langgraph-call.js';

export { type Approval, ApprovalRejectedError, createApprovals } from '@idempotent-tools/core';
export type { IdempotentTaskOptions, TaskCall } from './langgraph-call.js';

const nameOf = (nameOrOptions: string | TaskOptions) =>
  (typeof nameOrOptions === 'string' ? nameOrOptions : nameOrOptions?.name) as string;

/**
 * A LangGraph task (`task(name, fn)`) whose side effect runs once per thread
 * (`configurable.thread_id`), run (`configurable.turn_id`, else the thread is one run), place in
 * the run and arguments. A repeat returns the stored value (JSON round trip of the first).
 * Call `interrupt()` in `fn` only before its side effect: an interrupted call did not finish.
 *
 * ```ts
 * const charge = idempotentTask('charge', (order: Order) => bank.charge(order), { store });
 * ```
 * @throws ConfigurationError (when made) on bad options; (when called) with no thread id, or on a
 *   thread that already finished a run and no `turn_id`
 */
export function idempotentTask<Args extends unknown[], Result>(
  nameOrOptions: string | TaskOptions,
  fn: (...args: Args) => Result | Promise<Result>,
  options: IdempotentTaskOptions<Args, Result>,
): (...args: Args) => Promise<Result> {
  const { prepare, run } = taskCalls('idempotentTask', nameOf(nameOrOptions), fn, options);
  const call = async (...args: Args) => run(await prepare(args), fn);
  return task(nameOrOptions, call as never) as (...args: Args) => Promise<Result>;
}

/** The interrupt value an approval task pauses with (`result.__interrupt__[i].value`). */
export interface ApprovalRequest<Args extends unknown[] = unknown[]> {
  type: 'approval_request';
  /** Echo it back in the resume value: the decision is bound to this call and no other. */
  approvalKey: string;
  /** The task's name. */
  taskName: string;
  /** The arguments the person approves (the exact call). */
  args: Args;
  /** The task's `description` for this call, when it has one. */
  description?: string;
  /** Why the previous resume value was not taken: nothing ran or was decided; asked again. */
  refused?: string;
}

/** The resume value of an approval interrupt: `new Command({ resume: decision })`. */
export type ApprovalDecision =
  | { type: 'approve'; approvalKey: string; by: string }
  | { type: 'reject'; approvalKey: string; by: string; reason?: string | undefined };

/** Options of `approvalTask(name, fn, options)`: `idempotentTask`'s, and these. */
export type ApprovalTaskOptions<
  Args extends unknown[] = unknown[],
  Result = unknown,
  Rejected = never,
> = IdempotentTaskOptions<Args, Result> & {
  /** Whether this call needs approval; one that does not runs as an `idempotentTask`. @default true */
  needsApproval?: boolean | ((...args: Args) => boolean | Promise<boolean>) | undefined;
  /** Shown to the person in the interrupt value. @default undefined */
  description?: string | ((...args: Args) => string) | undefined;
  /** The task's value for a rejected call. @default undefined (it throws `ApprovalRejectedError`) */
  onRejected?: ((approval: Approval, ...args: Args) => Rejected | Promise<Rejected>) | undefined;
};

/** The resume value's JSON Schema, surfaced to clients on `Interrupt.response_schema`. */
const RESPONSE_SCHEMA = {
  type: 'object' as const,
  required: ['type', 'approvalKey', 'by'],
  properties: {
    type: { enum: ['approve', 'reject'] },
    approvalKey: { type: 'string' },
    by: { type: 'string', minLength: 1 },
    reason: { type: 'string' },
  },
};

/** Whether an interrupt value is an approval task's request. */
export function isApprovalRequest(value: unknown): value is ApprovalRequest {
  const v = value as Partial<ApprovalRequest> | null;
  return v?.type === 'approval_request' && typeof v.approvalKey === 'string';
}

/** The decision in a resume value (an `ApprovalDecision`), or why it is none. */
function decisionOf(answer: unknown, approvalKey: string): AskedDecision | string {
  const { type, approvalKey: key, by, reason } = (answer ?? {}) as Record<string, unknown>;
  const decision = {
    approvalKey: key,
    status: type === 'approve' ? 'approved' : 'rejected',
    by,
    reason,
  };
  const fine =
    (type === 'approve' || type === 'reject') &&
    typeof key === 'string' &&
    typeof by === 'string' &&
    by !== '' &&
    (reason === undefined || typeof reason === 'string');
  if (fine) return decision as AskedDecision;
  return `The resume value ${JSON.stringify(answer) ?? 'undefined'} is not a decision: nothing ran and nothing was decided. Resume with new Command({ resume: { type: 'approve' | 'reject', approvalKey: '${approvalKey}', by, reason? } }).`;
}

/**
 * A LangGraph task whose call asks a person first, bound to the exact call: it pauses with
 * `interrupt(request)` (an `ApprovalRequest`), takes the resume value (an `ApprovalDecision`) as
 * the decision of that call (core's `askInRun`: write-once, a resume sent twice is one decision,
 * a resume that is not this call's asks again with `refused`), then runs `fn` once (as
 * `idempotentTask`). A rejection stays one (`ApprovalRejectedError`, or `onRejected`'s value); a
 * decision made on the store first (`createApprovals(idempotency).approve(key, { by })`) is
 * used without interrupting.
 *
 * ```ts
 * const refund = approvalTask('refund', (order: Order) => bank.refund(order), { store });
 * // ... paused: const [{ value }] = result.__interrupt__; (an ApprovalRequest)
 * await graph.invoke(new Command({ resume: { type: 'approve', approvalKey: value.approvalKey, by: 'alice' } }), config);
 * ```
 * @throws ConfigurationError (when made) on bad options; as `idempotentTask` when called
 */
export function approvalTask<Args extends unknown[], Result, Rejected = never>(
  nameOrOptions: string | TaskOptions,
  fn: (...args: Args) => Result | Promise<Result>,
  options: ApprovalTaskOptions<Args, Result, Rejected>,
): (...args: Args) => Promise<Result | Rejected> {
  const caller = 'approvalTask';
  const name = nameOf(nameOrOptions);
  const { needsApproval = true, description, onRejected, ...rest } = options ?? {};
  const checks = [
    ['needsApproval', needsApproval, 'boolean function', 'is a boolean or (...args) => boolean'],
    ['description', description, 'string function', 'is a string or (...args) => string'],
    ['onRejected', onRejected, 'function', "is (approval, ...args) => the task's value"],
  ] as const;
  for (const [option, value, types, example] of checks) {
    if (value !== undefined && !types.split(' ').includes(typeof value)) {
      throw new ConfigurationError({
        option,
        message: `${caller}(${name}): ${option} ${example}.`,
      });
    }
  }
  const own = checks.map(([option]) => option);
  const { adapter, prepare, run: runTask } = taskCalls(caller, name, fn, rest, own);
  const ttl = (rest as { ttl?: unknown }).ttl;
  const approvals = createApprovals(adapter.executor, typeof ttl === 'number' ? { ttl } : {});
  const effect = (a: unknown) => fn(...(a as Args)); // of the args as the executor hands them

  const run = async (...args: Args): Promise<Result | Rejected> => {
    const prepared = await prepare(args);
    const { call, policy } = prepared;
    const asks = typeof needsApproval === 'function' ? await needsApproval(...args) : needsApproval;
    if (!asks) return runTask(prepared, fn);
    const text = typeof description === 'function' ? description(...args) : description;
    const shown = text === undefined ? {} : { description: text };
    const approval = await approvals.askInRun(
      call,
      {
        ask: ({ approvalKey, refused }) => {
          const request = { type: 'approval_request', approvalKey, taskName: name, args, ...shown };
          const asked = refused === undefined ? request : { ...request, refused };
          return interrupt(asked, { responseSchema: RESPONSE_SCHEMA });
        },
        stops: isGraphInterrupt,
        decisionOf,
      },
      policy,
    );
    if (approval.status === 'rejected') {
      if (onRejected !== undefined) return onRejected(approval, ...args);
      throw new ApprovalRejectedError({ approval, callKey: approval.callKey });
    }
    return (await approvals.run(call, effect, policy as never)).value as Result;
  };
  return task(nameOrOptions, run as never) as (...args: Args) => Promise<Result | Rejected>;
}
