/**
 * For adapters of a workflow engine that pauses a run and resumes it with a value (a LangGraph
 * interrupt): a task whose call asks a person first, bound to the exact call. The request the run
 * pauses with, the decision it is resumed with, the task's own options and its run (core
 * approvals' `askInRun`, then the call once) are implemented here; the adapter only pauses.
 */
import { type Approval, type AskedDecision, createApprovals } from '../approvals/approvals.js';
import { ApprovalRejectedError } from '../errors/index.js';
import type { PreparedCall } from './pipeline.js';
import {
  createTaskAdapter,
  type TaskAdapter,
  type TaskSpec,
  type TaskWrapOptions,
} from './tasks.js';

/** The value an approval task pauses its run with. */
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

/** The value an approval task's run is resumed with. */
export type ApprovalDecision =
  | { type: 'approve'; approvalKey: string; by: string }
  | { type: 'reject'; approvalKey: string; by: string; reason?: string | undefined };

/** The options of an approval task: a task's (`TaskWrapOptions`), and these. */
export type ApprovalTaskOptions<
  Info,
  Args extends unknown[] = unknown[],
  Result = unknown,
  Rejected = never,
> = TaskWrapOptions<Info, Args, Result> & {
  /** Whether this call needs approval; one that does not runs as a plain task. @default true */
  needsApproval?: boolean | ((...args: Args) => boolean | Promise<boolean>) | undefined;
  /** Shown to the person in the request. @default undefined */
  description?: string | ((...args: Args) => string) | undefined;
  /** The task's value for a rejected call. @default undefined (it throws `ApprovalRejectedError`) */
  onRejected?: ((approval: Approval, ...args: Args) => Rejected | Promise<Rejected>) | undefined;
};

/** The JSON Schema of an `ApprovalDecision`, for an engine that shows clients what to resume with. */
export const APPROVAL_DECISION_SCHEMA = {
  type: 'object' as const,
  required: ['type', 'approvalKey', 'by'],
  properties: {
    type: { enum: ['approve', 'reject'] },
    approvalKey: { type: 'string' },
    by: { type: 'string', minLength: 1 },
    reason: { type: 'string' },
  },
};

/** Whether a value a run paused with is an approval task's request. */
export function isApprovalRequest(value: unknown): value is ApprovalRequest {
  const v = value as Partial<ApprovalRequest> | null;
  return v?.type === 'approval_request' && typeof v.approvalKey === 'string';
}

/** How an engine pauses a run for an approval task (with the task's `TaskSpec`). */
export interface ApprovalTaskSpec<Info> extends TaskSpec<Info> {
  /** Pause the run with the request: throws to stop it (`stops`), or returns the resume value. */
  pause(request: ApprovalRequest): unknown;
  /** Whether an error `pause` threw stops the run to wait for the person. */
  stops(error: unknown): boolean;
  /** How the app resumes with a decision, completing "Resume with ...". */
  resume(decision: string): string;
}

/** An approval task's adapter: a task's, and `ask` (see `createApprovalTask`). */
export interface ApprovalTask<Info, Args extends unknown[], Result, Rejected>
  extends TaskAdapter<Info, Args> {
  /** Run a prepared call: asked first (when it needs approval), then run once; its value. */
  ask(prepared: PreparedCall<Info>): Promise<Result | Rejected>;
}

/** The decision in a resume value (an `ApprovalDecision`), or why it is none. */
function decisionOf(answer: unknown, approvalKey: string, spec: ApprovalTaskSpec<never>) {
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
  const shape = `{ type: 'approve' | 'reject', approvalKey: '${approvalKey}', by, reason? }`;
  return `The resume value ${JSON.stringify(answer) ?? 'undefined'} is not a decision: nothing ran and nothing was decided. Resume with ${spec.resume(shape)}.`;
}

/**
 * The adapter of a task whose call asks a person first (`ask`): the run pauses with an
 * `ApprovalRequest` (`spec.pause`), takes the resume value as the decision of that call (core's
 * `askInRun`: write-once, a resume sent twice is one decision, a value that is not this call's
 * asks again with `refused`), then runs `fn` once. A rejection stays one (`ApprovalRejectedError`,
 * or `onRejected`'s value); a decision made on the store first is used without pausing.
 * @throws ConfigurationError for a bad `needsApproval`, `description` or `onRejected` (the
 *   kit's `optionChecks`; and see `createTaskAdapter`)
 */
export function createApprovalTask<Info, Args extends unknown[], Result, Rejected = never>(
  fn: (...args: Args) => Result | Promise<Result>,
  options: ApprovalTaskOptions<Info, Args, Result, Rejected>,
  spec: ApprovalTaskSpec<Info>,
): ApprovalTask<Info, Args, Result, Rejected> {
  const { name } = spec;
  const { needsApproval = true, description, onRejected } = options ?? {};
  const kinds: Record<string, [types: string, example: string]> = {
    needsApproval: ['boolean function', 'a boolean or (...args) => boolean'],
    description: ['string function', 'a string or (...args) => string'],
    onRejected: ['function', "(approval, ...args) => the task's value"],
  };
  const checks = Object.entries(kinds).map(([option, [types, example]]) => {
    const check = (value: unknown) =>
      types.split(' ').includes(typeof value) ? undefined : `${option} of ${name} is ${example}.`;
    return [option, check] as const;
  });
  const optionChecks = { ...spec.optionChecks, ...Object.fromEntries(checks) };
  const tasks = createTaskAdapter<Info, Args>(fn, options, { ...spec, optionChecks });
  const ttl = (options as { ttl?: unknown } | undefined)?.ttl;
  const approvals = createApprovals(tasks.adapter.executor, typeof ttl === 'number' ? { ttl } : {});
  const effect = (a: unknown) => fn(...(a as Args)); // of the args as the executor hands them

  const ask = async (prepared: PreparedCall<Info>): Promise<Result | Rejected> => {
    const { call, policy } = prepared;
    const args = prepared.args as Args;
    const asks = typeof needsApproval === 'function' ? await needsApproval(...args) : needsApproval;
    if (!asks) return tasks.run(prepared, fn);
    const text = typeof description === 'function' ? description(...args) : description;
    const shown = text === undefined ? {} : { description: text };
    const approval = await approvals.askInRun(
      call,
      {
        ask: ({ approvalKey, refused }) => {
          const request: ApprovalRequest = {
            type: 'approval_request',
            approvalKey,
            taskName: name,
            args,
            ...shown,
          };
          return spec.pause(refused === undefined ? request : { ...request, refused });
        },
        stops: spec.stops,
        decisionOf: (answer, approvalKey) => decisionOf(answer, approvalKey, spec as never),
      },
      policy,
    );
    if (approval.status === 'rejected') {
      if (onRejected !== undefined) return onRejected(approval, ...args);
      throw new ApprovalRejectedError({ approval, callKey: approval.callKey });
    }
    return (await approvals.run(call, effect, policy as never)).value as Result;
  };
  return { ...tasks, ask };
}
