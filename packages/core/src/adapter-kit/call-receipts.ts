/**
 * One call's pipeline for a framework whose answer tells code more than the model reads
 * (LangChain's `ToolMessage.metadata`, a protocol's `_meta`): the outcome with its receipt (the
 * key, replayed or not, the executor's outcome, an idempotency error's code), and what the tool
 * returned when it ran for this call (before the store's JSON round trip: a framework object the
 * adapter may pass on as it is).
 */
import { IdempotencyError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import type { IdempotentResult } from '../executor/types.js';
import type { ExecutionContext, ToolPolicy } from '../executor.js';
import type { Adapter } from './adapter.js';
import { audienceOf, errorText } from './calls.js';
import { type CallInput, type PreparedCall, prepareCall } from './pipeline.js';

/** What code reads of one call besides its output. */
export interface CallReceipt {
  /** The call's idempotency key; undefined for an error that names none (bad arguments). */
  key: string | undefined;
  /** True when the tool did not run for this call: the output is the stored outcome. */
  replayed: boolean;
  /** `executed`, `replayed`, `waited`, `reconciled`, or `error` (an idempotency error). */
  outcome: IdempotentResult<unknown>['outcome'] | 'error';
  /** The idempotency error's code, when `outcome` is `error`. */
  error?: string;
}

/**
 * `runWithReceipt`'s answer: the output (not marked: the adapter marks it where its framework's
 * shape says) with its receipt and, when the tool ran for this call, what it returned (`fresh`);
 * the model's error text with its receipt and the error it tells of (`cause`, undefined for bad
 * arguments: `orThrow` throws it); an error for the developer (nothing ran); the tool's own error
 * (its claim released).
 */
export type ReceiptedOutcome =
  | { output: unknown; receipt: CallReceipt; fresh?: { value: unknown } }
  | { text: string; receipt: CallReceipt; cause: unknown }
  | { developer: unknown }
  | { error: unknown };

/** The receipt of the model's error text (`cause`: the error it tells of, if any). */
function refused(text: string, cause: unknown): ReceiptedOutcome {
  const key = (cause as { key?: unknown } | null | undefined)?.key;
  return {
    text,
    cause,
    receipt: {
      key: typeof key === 'string' ? key : undefined,
      replayed: false,
      outcome: 'error',
      // Without an error, the text is `parseArguments`' (the arguments are invalid input).
      error: IdempotencyError.isInstance(cause) ? cause.code : 'invalid_input',
    },
  };
}

/**
 * The whole pipeline of one call (`prepareCall`, then the executor's run), answered with its
 * receipt (see `ReceiptedOutcome`). `execute` is given the tool's own args; the call's policy is
 * the prepared one. A value handed back as `NotAnOutcome` is the output, fresh and not stored.
 */
export async function runWithReceipt<Info>(
  adapter: Adapter<Info>,
  given: CallInput<Info>,
  execute: (args: unknown, context: ExecutionContext, prepared: PreparedCall<Info>) => unknown,
): Promise<ReceiptedOutcome> {
  const prepared = await prepareCall(adapter, given);
  if ('developer' in prepared) return prepared;
  if ('text' in prepared) return refused(prepared.text, prepared.cause);
  const call = prepared.prepared;
  let fresh: { value: unknown } | undefined;
  const fn = async (_key: unknown, context: ExecutionContext) => {
    const value = await execute(call.args, context, call);
    fresh = { value };
    return value;
  };
  try {
    const result = await adapter.executor.run(call.call, fn, call.policy as ToolPolicy<unknown>);
    const { key, replayed, outcome, value } = result;
    const receipt = { key, replayed, outcome };
    return fresh === undefined ? { output: value, receipt } : { output: value, receipt, fresh };
  } catch (error) {
    if (NotAnOutcome.isInstance(error)) {
      const { key } = adapter.executor.keyOf(call.call, call.policy);
      const receipt = { key, replayed: false, outcome: 'executed' as const };
      return { output: error.value, receipt, fresh: { value: error.value } };
    }
    const audience = audienceOf(error);
    if (audience === 'model') return refused(errorText(error) as string, error);
    return audience === 'developer' ? { developer: error } : { error };
  }
}
