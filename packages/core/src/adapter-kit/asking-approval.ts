/**
 * The `approval` policy field of an adapter that asks the person itself before a tool runs (MCP
 * elicitation; core's `runAsking`): the option checked when the tools are wrapped
 * (`AdapterSpec.policyFields`), with the question, who decides and how long to wait resolved per
 * call, and the person's answer as core's `ApprovalAnswer`; and the run of a prepared call that
 * asks (`runAsking`).
 */
import type { Approval, ApprovalAnswer, Approvals, AskApproval } from '../approvals/approvals.js';
import { ApprovalPendingError, ConfigurationError } from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import type { ExecutionContext, ToolPolicy } from '../executor.js';
import type { Adapter, PolicyFieldCheck } from './adapter.js';
import { type CallOutcome, type PreparedCall, runPrepared, settleRun } from './pipeline.js';

/** How to ask the person about a call of one tool (`Info`: the adapter's call info). */
export interface AskingApprovalPolicy<Info> {
  /**
   * What the person is asked. A string gets the call's arguments appended (the approval is for
   * these arguments only); a function of the call returns the whole message.
   * @default "Allow <tool> to run with these arguments?" and the arguments
   */
  message?: string | ((call: Info) => string) | undefined;
  /**
   * Who decides, stored with the decision (and named in a rejection the model reads).
   * @default the adapter's (e.g. the client that asked)
   */
  by?: ((call: Info) => string | undefined) | undefined;
  /**
   * How long to wait for the person's answer, in ms; no answer in time is "not decided" (the
   * next call asks again).
   * @default 600000 (10 minutes)
   */
  timeout?: number | undefined;
}

/** The `approval` of one tool, checked: what to ask, who decides, how long to wait. */
export interface AskingApproval<Info> {
  message(call: Info): string;
  by(call: Info): string;
  timeout: number;
  /**
   * The person's answer to the question about `approval`: accepted, declined, or undefined
   * (closed without deciding, no answer in time).
   * @throws ApprovalPendingError (`closed`) when nothing was decided: nothing runs, the next call
   *   asks again
   */
  answer(call: Info, accepted: boolean | undefined, approval: Approval): ApprovalAnswer;
}

/** What an adapter fills in of the `approval` field: the call's arguments and who decides. */
export interface AskingApprovalSpec<Info> {
  /** The arguments shown in the default message (the tool's own, without the repeat argument). */
  args(call: Info): unknown;
  /** Who decides when the policy does not say. */
  by(call: Info): string;
}

const FIELDS = ['message', 'by', 'timeout'];

/**
 * The check of an `approval` policy field (`true`, `false` or `{ message?, by?, timeout? }`): a
 * `ConfigurationError` naming the field for a bad value, or for a tool that runs without the
 * wrapper (excluded, unsafe) and so would never ask; `false` is no approval. Its value is an
 * `AskingApproval` (read back with `adapter.policyField(name, 'approval')`).
 */
export function askingApprovalField<Info>(spec: AskingApprovalSpec<Info>): PolicyFieldCheck {
  return (given, { toolName, treatment, caller }): AskingApproval<Info> | undefined => {
    const option = `policies.${toolName}.approval`;
    const refuse = (field: string, why: string) =>
      new ConfigurationError({
        option: `${option}${field}`,
        message: `${caller}: ${option}${field}: ${why}`,
      });
    if (given === false) return undefined;
    const policy = (given === true ? {} : given) as AskingApprovalPolicy<Info>;
    if (policy === null || typeof policy !== 'object' || Array.isArray(policy)) {
      throw refuse('', 'must be true or { message?, by?, timeout? }.');
    }
    const unknown = unknownOption(policy, FIELDS);
    if (unknown !== undefined) {
      throw refuse(`.${unknown.name}`, `${unknown.message}. The fields are ${FIELDS.join(', ')}.`);
    }
    if (treatment !== 'wrap') {
      throw refuse(
        '',
        `${toolName} is in ${treatment}, so it runs without the wrapper and never asks. Take it out of ${treatment}, or leave out approval.`,
      );
    }
    const { message, by, timeout = 600_000 } = policy;
    const text = typeof message === 'string' && message.trim() !== '';
    if (typeof message !== 'function' && message !== undefined && !text) {
      throw refuse('.message', 'must be a non-empty string or a function of the call.');
    }
    if (by !== undefined && typeof by !== 'function') {
      throw refuse('.by', 'must be a function of the call returning who decides.');
    }
    if (!Number.isSafeInteger(timeout) || timeout <= 0) {
      throw refuse('.timeout', `must be a whole number of ms, got ${String(timeout)}.`);
    }
    const ask = `Allow ${toolName} to run with these arguments?`;
    const decider = (call: Info) => (by?.(call) || spec.by(call)).slice(0, 512);
    return {
      message: (call) =>
        typeof message === 'function'
          ? message(call)
          : `${message ?? ask}\n\n${JSON.stringify(spec.args(call), null, 2)}`,
      by: decider,
      timeout,
      answer(call, accepted, approval) {
        if (accepted === undefined) throw new ApprovalPendingError({ approval, closed: true });
        if (accepted) return { approved: true, by: decider(call) };
        return { approved: false, by: decider(call), reason: 'the user declined it' };
      },
    };
  };
}

/**
 * `runPrepared` for a tool that may ask the person first: with `ask` (the adapter's question,
 * see `AskApproval`), through core approvals' `runAsking` (asked only while nothing is decided,
 * the answer stored before the tool runs; a rejection is the model's text); without, as
 * `runPrepared`. What `ask` throws is told apart as any error of the call (`CallOutcome`).
 */
export async function runAsking<Info>(
  adapter: Adapter<Info>,
  approvals: Approvals,
  prepared: PreparedCall<Info>,
  execute: (args: unknown, context: ExecutionContext) => unknown,
  ask: AskApproval | undefined,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<CallOutcome> {
  if (ask === undefined) return runPrepared(adapter, prepared, execute, mark);
  const { args, call } = prepared;
  const policy = prepared.policy as ToolPolicy<unknown, unknown> | undefined;
  const fn = (_key: unknown, context: ExecutionContext) => execute(args, context);
  const run = () => approvals.runAsking(call, fn, policy, ask);
  const settled = await settleRun(adapter as Adapter<never>, run, mark);
  return 'text' in settled ? { text: settled.text } : settled;
}
