/**
 * An approval asked as a question the framework puts to the person (MCP elicitation), for
 * `runAsking`: the answer a retry of the call carries to a question this adapter asked, else the
 * question asked during the call (push), else the question as the call's reply (a round the
 * client answers by retrying the call). Adapters say only how their framework asks.
 */
import { type Approvals, type AskApproval, createApprovals } from '../approvals/approvals.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import type { ExecutionContext, ToolPolicy } from '../executor.js';
import { type Adapter, type AdapterSpec, createAdapter } from './adapter.js';
import {
  type AskingApproval,
  type AskingApprovalPolicy,
  type AskingApprovalSpec,
  askingApprovalField,
  runAsking,
} from './asking-approval.js';
import { type CallInput, type CallOutcome, prepareCall } from './pipeline.js';
import type { RepeatablePolicy } from './repeats.js';

/** The policy of one tool of an adapter that asks the person itself (`Info`: its call info). */
export type AskingToolPolicy<Args, Result, Info> = ToolPolicy<Args, Result> &
  RepeatablePolicy & {
    /**
     * Ask the person before the tool runs; the answer is stored, bound to the exact call. A tool
     * with an approval is wrapped even when it is annotated `readOnlyHint: true`.
     * @default false
     */
    approval?: boolean | AskingApprovalPolicy<Info> | undefined;
  };

/** An adapter whose tools may ask the person first, and the approvals that keep the answers. */
export interface AskingAdapter<Info> {
  adapter: Adapter<Info>;
  /** Core's approvals over the adapter's executor (with its `ttl`, if given). */
  approvals: Approvals;
  /** The checked `approval` of a tool (`askingApprovalField`); undefined: it asks nothing. */
  approval(toolName: string): AskingApproval<Info> | undefined;
  /** The tools of the policies that ask. */
  asking: string[];
}

/**
 * `createAdapter` with the `approval` policy field (`askingApprovalField` of `approval`), and
 * core's approvals over its executor.
 * @throws ConfigurationError (see `createAdapter`, `askingApprovalField`)
 */
export function createAskingAdapter<Info>(
  options: Record<string, unknown>,
  spec: AdapterSpec<Info>,
  approval: AskingApprovalSpec<Info>,
): AskingAdapter<Info> {
  const policyFields = { ...spec.policyFields, approval: askingApprovalField(approval) };
  const adapter = createAdapter<Info>(options as never, { ...spec, policyFields });
  const asks = (name: string) =>
    adapter.policyField(name, 'approval') as AskingApproval<Info> | undefined;
  const ttl = typeof options.ttl === 'number' ? options.ttl : undefined; // never with { idempotency }
  const approvals = createApprovals(adapter.executor, ttl === undefined ? {} : { ttl });
  const asking = Object.keys((options.policies ?? {}) as object).filter((name) => asks(name));
  return { adapter, approvals, approval: asks, asking };
}

/** How a framework asks the person about one call. */
export interface QuestionChannel {
  /** The answer this request carries to the question about `key` (an approval key), if any. */
  answered(key: string): unknown;
  /** Whether the person can be asked from here. */
  canAsk: boolean;
  /** Ask during the call and wait (the answer; a rejection is no answer). Undefined: ask by `round`. */
  push?: ((message: string) => Promise<unknown>) | undefined;
  /** The reply that carries the question about `key` (the call's outcome; nothing is stored). */
  round(key: string, message: string): unknown;
  /** What an answer says: accepted, declined, or undefined (closed without deciding). */
  accepted(answer: unknown): boolean | undefined;
  /** The error when the person cannot be asked (`canAsk` false): nothing runs. */
  refuse(): Error;
}

/**
 * The `AskApproval` of one call: an answer the request carries to the pending question, else (the
 * request stored first) the question pushed and its answer, else the question as a `NotAnOutcome`
 * reply. No answer (timed out, the client went away) decides nothing: the next call asks again.
 */
export function askByQuestion<Info>(
  approval: AskingApproval<Info>,
  call: Info,
  channel: QuestionChannel,
): AskApproval {
  return async ({ pending, request }) => {
    const answered = pending && channel.answered(pending.key);
    if (pending && answered !== undefined) {
      return approval.answer(call, channel.accepted(answered), pending);
    }
    if (!channel.canAsk) throw channel.refuse();
    const asked = await request();
    const message = approval.message(call);
    if (channel.push === undefined) throw new NotAnOutcome(channel.round(asked.key, message));
    const answer = await channel.push(message).catch(() => undefined);
    return approval.answer(call, channel.accepted(answer), asked);
  };
}

/**
 * The pipeline of a call that may ask first: `prepareCall`, then `runAsking` with the ask of the
 * prepared call (`askOf`, given its info; undefined: the call asks nothing).
 */
export async function runAskingCall<Info>(
  adapter: Adapter<Info>,
  approvals: Approvals,
  given: CallInput<Info>,
  execute: (args: unknown, context: ExecutionContext) => unknown,
  askOf: (info: Info) => AskApproval | undefined,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<CallOutcome> {
  const prepared = await prepareCall(adapter, given);
  if (!('prepared' in prepared)) return prepared;
  const ask = askOf(prepared.prepared.info);
  return runAsking(adapter, approvals, prepared.prepared, execute, ask, mark);
}
