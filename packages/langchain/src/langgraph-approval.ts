/**
 * A LangGraph task that asks a person before its side effect: `interrupt()` with the approval of
 * this exact call (its key, task name and arguments), the human's `Command({ resume })` stored as
 * the decision (core's approvals: write-once, on the idempotency store), then the effect run once
 * (the idempotent task's executor). The decision outlives the checkpoint: a resume sent again, a
 * run resumed in another process, a parallel task re-run, a whole-graph retry find it; a resume
 * for other arguments is refused.
 */
import {
  type Approval,
  ApprovalConflictError,
  ApprovalRejectedError,
  ConfigurationError,
  createApprovals,
} from '@idempotent-tools/core';
import { interrupt, isGraphInterrupt, type TaskOptions, task } from '@langchain/langgraph';
import { type IdempotentTaskOptions, taskCalls } from './langgraph-call.js';

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
  /**
   * Why the previous resume value was not taken (not a decision, or the approval of another
   * call: other arguments): nothing ran and nothing was decided; this call is asked again.
   */
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
  /**
   * Whether this call needs approval (e.g. `(order) => order.amount > 100`); a call that does
   * not runs as an `idempotentTask`. @default true
   */
  needsApproval?: boolean | ((...args: Args) => boolean | Promise<boolean>) | undefined;
  /** Shown to the person in the interrupt value. @default undefined */
  description?: string | ((...args: Args) => string) | undefined;
  /**
   * The task's value when the call was rejected (now or before: the rejection is stored).
   * @default undefined (the task throws `ApprovalRejectedError`)
   */
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

/**
 * The record that the `index`-th interrupt of an approval paused the run (the request was put to
 * the person): an approval request of its own, on the same store. A resume value that reaches an
 * interrupt which never paused the run (a `Command({ resume, goto })` made up before anything
 * was asked) is no decision.
 */
const askedCall = (approval: Approval, index: number) => ({
  toolName: 'idempotent-tools/approval-asked',
  turnId: approval.key,
  scope: approval.scope,
  args: { interrupt: index },
});

/** Why a resume value is not a decision of this call, or undefined when it is one. */
function problemOf(answer: unknown, request: ApprovalRequest): string | undefined {
  const a = answer as Partial<Record<keyof ApprovalDecision | 'reason', unknown>> | null;
  const fine =
    a !== null &&
    typeof a === 'object' &&
    (a.type === 'approve' || a.type === 'reject') &&
    typeof a.approvalKey === 'string' &&
    typeof a.by === 'string' &&
    a.by !== '' &&
    (a.reason === undefined || typeof a.reason === 'string');
  if (fine) return undefined;
  return `The resume value ${JSON.stringify(answer) ?? 'undefined'} is not a decision: nothing ran and nothing was decided. Resume with new Command({ resume: { type: 'approve' | 'reject', approvalKey: '${request.approvalKey}', by, reason? } }).`;
}

/**
 * A LangGraph task whose call asks a person first, bound to the exact call: it pauses with
 * `interrupt(request)` (an `ApprovalRequest`: `approvalKey`, `taskName`, `args`), stores the
 * resume value (an `ApprovalDecision`: approve / reject, `by`, `reason`) as the decision of that
 * call, then runs `fn` once (as `idempotentTask`). The decision is write-once on the store: a
 * resume sent twice is one decision (the first), a rejection stays one (`ApprovalRejectedError`,
 * or `onRejected`'s value), a resume whose `approvalKey` is another call's is refused
 * (`DriftError` when it was for other arguments). A decision made on the store first
 * (`createApprovals(idempotency).approve(key, { by })`) is used without interrupting.
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
  const name = (typeof nameOrOptions === 'string' ? nameOrOptions : nameOrOptions?.name) as string;
  const { needsApproval = true, description, onRejected, ...rest } = options ?? {};
  const check = (option: string, value: unknown, types: string[], example: string) => {
    if (value !== undefined && !types.includes(typeof value)) {
      throw new ConfigurationError({
        option,
        message: `${caller}(${name}): ${option} ${example}.`,
      });
    }
  };
  check(
    'needsApproval',
    needsApproval,
    ['boolean', 'function'],
    'is a boolean or (...args) => boolean',
  );
  check('description', description, ['string', 'function'], 'is a string or (...args) => string');
  check('onRejected', onRejected, ['function'], "is (approval, ...args) => the task's value");
  const own = ['needsApproval', 'description', 'onRejected'];
  const { executor, policy, callOf } = taskCalls(caller, name, fn, rest, own);
  const ttl = (rest as { ttl?: unknown }).ttl;
  const approvals = createApprovals(executor, typeof ttl === 'number' ? { ttl } : {});
  const effect = (a: Args) => fn(...a);

  const decide = async (approval: Approval, decision: ApprovalDecision): Promise<Approval> => {
    try {
      return decision.type === 'approve'
        ? await approvals.approve(approval.key, { by: decision.by })
        : await approvals.reject(approval.key, { by: decision.by, reason: decision.reason });
    } catch (error) {
      // Decided the other way first: that decision stands.
      if (!ApprovalConflictError.isInstance(error)) throw error;
      return (await approvals.getApproval(approval.key)) ?? approval;
    }
  };

  const run = async (...args: Args): Promise<Result | Rejected> => {
    const call = await callOf(args);
    const asks = typeof needsApproval === 'function' ? await needsApproval(...args) : needsApproval;
    if (!asks) return (await executor.run(call, effect, policy)).value;
    let approval = await approvals.requestApproval(call, { policy });
    if (approval.status === 'pending') {
      const request: ApprovalRequest<Args> = {
        type: 'approval_request',
        approvalKey: approval.key,
        taskName: name,
        args,
      };
      const text = typeof description === 'function' ? description(...args) : description;
      if (text !== undefined) request.description = text;
      // Pauses the first time; on resume, returns the person's answer. An answer that is not a
      // decision of this call asks again (LangGraph replays the earlier answers on each resume).
      let asked: ApprovalRequest<Args> = request;
      for (let index = 0; ; index++) {
        let answer: unknown;
        try {
          answer = interrupt(asked, { responseSchema: RESPONSE_SCHEMA });
        } catch (error) {
          // The run pauses here: the request is put to the person; remember that it was.
          if (isGraphInterrupt(error)) await approvals.requestApproval(askedCall(approval, index));
          throw error;
        }
        let refused = problemOf(answer, request);
        const decision = answer as ApprovalDecision;
        if (refused === undefined && decision.approvalKey !== approval.key) {
          // Another call's approval (DriftError when it was for other arguments): not this one's.
          refused = await approvals
            .run(call, effect, policy, { approvalKey: decision.approvalKey })
            .then(
              () => 'refused',
              (error: Error) => error.message,
            );
        }
        const put = approvals.keyOf(askedCall(approval, index));
        if (refused === undefined && (await approvals.getApproval(put)) === undefined) {
          refused = `The resume value came before this call was asked for (no interrupt of this approval paused the run for it): nothing ran and nothing was decided. Resume the run when it asks, with the approvalKey it asks with.`;
        }
        if (refused === undefined) {
          approval = await decide(approval, decision);
          break;
        }
        asked = { ...request, refused };
      }
    }
    if (approval.status === 'rejected') {
      if (onRejected !== undefined) return onRejected(approval, ...args);
      throw new ApprovalRejectedError({ approval, callKey: approval.callKey });
    }
    return (await approvals.run(call, effect, policy)).value;
  };
  return task(nameOrOptions, run as never) as (...args: Args) => Promise<Result | Rejected>;
}
