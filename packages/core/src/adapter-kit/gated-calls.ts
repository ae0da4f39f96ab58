/**
 * Approvals of a framework whose approval gate stands before the tool's `execute` and hands the
 * gate no call id (Mastra's `requireApproval`: the run suspends, the app resumes it approved or
 * declined), bound to the exact call by core's approvals (docs/design.md, "Approvals"):
 * - each call the model emits is recorded when the framework announces it (`inputCallbacks`):
 *   only an announcement of a call the model was seen streaming, or one of a run's first pass,
 *   counts (a resumed run announces its snapshot's call again, and a snapshot can be edited);
 * - a call that reaches `execute` through the gate is approved there (`run`, `approved`): only a
 *   call the model asked for, with exactly its arguments (other arguments: `DriftError`; a call
 *   rejected on the store first stays rejected);
 * - the framework never calls `execute` for a declined call, so a decision taken out of the run
 *   goes through the handle the wrapped tool carries (`handle`, found with `gatedCallOf`): the
 *   call identified as `execute` identifies it, asked for (`request`), then decided (`decide`).
 */
import type { Approval, Approvals } from '../approvals/approvals.js';
import { InvalidInputError } from '../errors/index.js';
import type { Call, ExecutionContext, ToolPolicy } from '../executor.js';
import type { Adapter } from './adapter.js';
import { type PreparedCall, type SettledRun, settleRun } from './pipeline.js';

/** Where a wrapped tool keeps its `GatedCall` (a `Symbol.for`: works across installs). */
const GATED_CALL = Symbol.for('idempotent-tools.gated-call');

/** A decision on a call, as the human gave it. */
export interface GatedDecision {
  decision: 'approved' | 'rejected';
  /** Who decides (a user id, an email): stored with the decision. */
  by: string;
  /** Why (a rejection's reason, mostly). @default undefined */
  reason?: string | undefined;
}

/** What a wrapped tool exposes to the helpers that decide on its suspended calls. */
export interface GatedCall {
  readonly approvals: Approvals;
  /** The approval of this call (identified as `execute` identifies it), asked for under `ref`. */
  request(args: unknown, context: Record<string, unknown>, ref: string): Promise<Approval>;
  /**
   * Store a decision on it. The first decision wins: the same one sent again returns it, the
   * other one throws `ApprovalConflictError`.
   */
  decide(approval: Approval, decision: GatedDecision): Promise<Approval>;
}

/** What a tool's input callbacks are handed (see `GatedCalls.inputCallbacks`). */
export type InputOptions = { toolCallId?: unknown; input?: unknown; messages?: unknown };

/** One tool's calls behind its framework's gate (see the module's comment). */
export interface GatedCalls {
  /**
   * The tool's input callbacks (`onInputStart`, `onInputAvailable`, as the AI SDK's and Mastra's
   * tools take them), recording each call the model emits before the tool's own callback runs:
   * a call is the model's when the model was seen streaming it (`onInputStart`), or when it is
   * announced in a run's first pass (with the run's input `messages`; a resumed run, which
   * announces its snapshot's call again, has none). `valid`: the input as the framework
   * validates it, undefined when refused (then nothing is recorded).
   */
  inputCallbacks(
    own: { onInputStart?: unknown; onInputAvailable?: unknown },
    valid: (input: unknown) => { args: unknown } | undefined,
  ): Record<'onInputStart' | 'onInputAvailable', (options: InputOptions) => Promise<void>>;
  /**
   * Run the prepared call (`execute` gets the execution context), approved first when it came
   * through the gate (`approved`, by `by`, bound to `ref` and the emitted input `args`).
   */
  run(
    adapter: Adapter<never>,
    prepared: PreparedCall<unknown>,
    gate: { approved: boolean; ref: string; by: string; args: unknown },
    execute: (context: ExecutionContext) => unknown,
  ): Promise<SettledRun>;
  /**
   * The `GatedCall` of the tool, which identifies a suspended call with `prepare` (undefined: the
   * tool's schema refuses its input; `args` is the input as validated, `prepared` the pipeline's).
   */
  handle(
    prepare: (
      args: unknown,
      context: Record<string, unknown>,
    ) => Promise<{ args: unknown; prepared: PreparedCall<unknown> } | undefined>,
  ): { [GATED_CALL]: GatedCall };
}

/**
 * The calls of one tool behind its framework's gate, on `approvals`. `gated`: the tool's own gate
 * (its calls are recorded when the model emits them, and only those are approved); a call of a
 * run-wide gate is approved without the check.
 */
export function createGatedCalls(
  approvals: Approvals,
  tool: { toolName: string; policy: ToolPolicy | undefined; gated: boolean },
): GatedCalls {
  const { toolName, policy, gated } = tool;
  /** The call as the model emitted it, in no turn (a resume in another process may not know it). */
  const emitted = (args: unknown): Call => ({ toolName, turnId: 'emitted', args });
  const streaming = new Set<string>();
  const decide: GatedCall['decide'] = ({ key }, { decision, by, reason }) =>
    decision === 'approved'
      ? approvals.approve(key, { by })
      : approvals.reject(key, { by, reason });
  return {
    inputCallbacks(own, valid) {
      const ownStart = own.onInputStart as ((options: InputOptions) => unknown) | undefined;
      const announce = own.onInputAvailable as ((options: InputOptions) => unknown) | undefined;
      return {
        async onInputStart(options) {
          const id = options?.toolCallId;
          if (typeof id === 'string') streaming.add(id);
          if (streaming.size > 10_000) streaming.delete(streaming.values().next().value as string);
          await ownStart?.(options);
        },
        async onInputAvailable(options) {
          const id = options?.toolCallId;
          const streamed = typeof id === 'string' && streaming.delete(id);
          const firstPass = Array.isArray(options?.messages) && options.messages.length > 0;
          const checked = valid(options?.input);
          if (typeof id === 'string' && (streamed || firstPass) && checked !== undefined) {
            await approvals.recordAsked(emitted(checked.args), id, policy);
          }
          await announce?.(options);
        },
      };
    },
    run(adapter, prepared, gate, execute) {
      const { call: key, policy: own } = prepared;
      const asked = gated ? emitted(gate.args) : undefined;
      const { ref, by } = gate;
      return settleRun(adapter, async () => {
        if (gate.approved) await approvals.approveCall(key, { policy: own, ref, by, asked });
        return adapter.executor.run(key, (_key, context) => execute(context), own as never);
      });
    },
    handle(prepare) {
      const request = async (given: unknown, context: Record<string, unknown>, ref: string) => {
        const identified = await prepare(given, context);
        if (identified === undefined) {
          throw new InvalidInputError({
            field: 'args',
            message: `The suspended call of ${toolName} has arguments its inputSchema refuses: the framework will not run it. Nothing was decided.`,
          });
        }
        const { call: key, policy: own } = identified.prepared;
        if (gated) await approvals.checkAsked(emitted(identified.args), ref, own);
        return approvals.requestApproval(key, { policy: own, ref });
      };
      return { [GATED_CALL]: { approvals, request, decide } };
    },
  };
}

/** The `GatedCall` a wrapped tool carries (`GatedCalls.handle`), undefined for another tool. */
export function gatedCallOf(tool: unknown): GatedCall | undefined {
  return (tool as { [GATED_CALL]?: GatedCall } | null | undefined)?.[GATED_CALL];
}

/**
 * The one call of a suspended run that waits for an approval: the run's only one, or the one
 * named `toolCallId`; the run found by `find` (once its id is checked).
 * @throws InvalidInputError (field `runId`: none given; `toolCallId`: none such, or several
 *   waiting and none named); nothing was decided
 */
export async function waitingCall<
  R extends { toolCalls?: readonly { toolCallId?: unknown; requiresApproval?: unknown }[] },
>(
  runId: unknown,
  find: (runId: string) => Promise<R | undefined>,
  toolCallId: string | undefined,
): Promise<{
  run: R | undefined;
  call: NonNullable<R['toolCalls']>[number] & { toolCallId: string };
}> {
  if (typeof runId !== 'string' || runId === '') {
    throw new InvalidInputError({
      field: 'runId',
      message:
        "Pass the runId of the suspended run (its output's runId, or the framework's list of suspended runs).",
    });
  }
  const run = await find(runId);
  const waiting = (run?.toolCalls ?? []).filter(
    (c) => c.requiresApproval && (toolCallId === undefined || c.toolCallId === toolCallId),
  );
  const found = waiting[0];
  if (found === undefined || waiting.length > 1 || typeof found.toolCallId !== 'string') {
    throw new InvalidInputError({
      field: 'toolCallId',
      message:
        waiting.length > 1
          ? `The run ${runId} waits for the approval of ${waiting.length} tool calls: pass the toolCallId of one.`
          : `No tool call${toolCallId === undefined ? '' : ` ${toolCallId}`} of the run ${runId} is waiting for an approval (it was decided already, the run finished, or it is another agent's). Nothing was decided.`,
    });
  }
  return { run, call: found as NonNullable<R['toolCalls']>[number] & { toolCallId: string } };
}

/**
 * Whether a framework's approval policy asks for an approval: `true`, or a function (asked with
 * `args`) that says so; a function that throws asks (a gate that cannot tell stops the call).
 */
export async function policyAsks(policy: unknown, ...args: unknown[]): Promise<boolean> {
  if (typeof policy !== 'function') return policy === true;
  try {
    return Boolean(await policy(...args));
  } catch {
    return true;
  }
}

/**
 * A framework's method that resumes a suspended call (`resume`), with the decision stored first
 * (`record`, e.g. through `GatedCall.decide`): who decided (`by`) is not passed on, nor the
 * reason of an approval.
 */
export function decidedFirst<T, O extends { by: string; reason?: string | undefined }, R>(
  decision: GatedDecision['decision'],
  record: (target: T, options: O & { decision: GatedDecision['decision'] }) => Promise<unknown>,
  resume: (target: T, options: Omit<O, 'by'>) => R,
): (target: T, options: O) => Promise<Awaited<R>> {
  return async (target: T, options: O): Promise<Awaited<R>> => {
    await record(target, { ...options, decision });
    const { by: _by, reason, ...rest } = options;
    const given = decision === 'rejected' && reason !== undefined ? { ...rest, reason } : rest;
    return resume(target, given as Omit<O, 'by'>) as Awaited<R>;
  };
}
