/**
 * The ledger (design section 8 (docs/design.md)): a vendor call with no idempotency support, recorded by the same
 * executor and store as the tool that makes it. It is a nested `run` whose key is derived from the
 * tool call's key and a label: the `in_progress` claim is the pending row written before the call,
 * the stored outcome the done row, the claim on a retry the check that comes first, and a stale
 * claim goes to `reconcile`, else to `OutcomeUnknownError`. No second state machine.
 */

import { ConfigurationError, InvalidInputError } from '../errors/index.js';
import { assertOwned, contextOrThrow, noteEffect } from '../executor/context.js';
import type {
  ExecutionContext,
  Idempotency,
  IdempotentResult,
  ToolFunction,
  VendorCallArgs,
  VendorCallFunction,
  VendorCallPolicy,
} from '../executor/types.js';
import { KEY_LIMITS } from '../keys/derive-key.js';

export type { VendorCallArgs, VendorCallFunction, VendorCallPolicy };

/**
 * `idempotency.vendorCall(ctx, label, fn, policy?)`, bound to an executor's `run`.
 * @internal Use it as `idempotency.vendorCall`.
 */
export function createVendorCall(run: Idempotency['run']) {
  /** Labels each attempt has running or done: a label names one vendor call of an attempt. */
  const labels = new WeakMap<ExecutionContext, Map<string, 'running' | 'done'>>();
  return async function vendorCall<Result>(
    context: ExecutionContext | undefined,
    label: string,
    fn: VendorCallFunction<Result>,
    policy: VendorCallPolicy<Result> = {},
  ): Promise<IdempotentResult<Result>> {
    if (typeof label !== 'string' || label.length === 0 || label.length > KEY_LIMITS.toolName) {
      throw new InvalidInputError({
        field: 'label',
        message: `vendorCall needs a label of 1 to ${KEY_LIMITS.toolName} characters naming the vendor call, e.g. 'bank.transfer'; it must stay the same across retries.`,
      });
    }
    if (typeof fn !== 'function') {
      throw new InvalidInputError({ field: 'fn', message: 'The vendor call must be a function.' });
    }
    const parent = contextOrThrow(context, 'vendorCall');
    // The tool call no longer owns its claim: do not start a vendor call.
    assertOwned(parent);
    const used = labels.get(parent) ?? new Map<string, 'running' | 'done'>();
    labels.set(parent, used);
    const state = used.get(label);
    if (state !== undefined) {
      // A second call with the label would be handed the first one's result (one ledger record
      // per label): a loop over recipients must name each call.
      throw new ConfigurationError({
        option: 'label',
        message: `vendorCall: the label ${JSON.stringify(label)} was used by another vendor call of this tool call (${state === 'running' ? 'still running' : 'already done'}), and one label names one vendor call: the second would get the first one's result and never reach the vendor. Give each call its own label from what makes it distinct, e.g. \`email.send:\${recipient}\` (not a counter, whose order may change between retries).`,
      });
    }
    used.set(label, 'running');
    const call: ToolFunction<VendorCallArgs, Result> = (_args, vendor) => {
      assertOwned(parent);
      noteEffect(parent, 'ledger');
      return fn({
        ...vendor,
        signal: AbortSignal.any([vendor.signal, parent.signal]),
        stillOwned: () => vendor.stillOwned() && parent.stillOwned(),
      });
    };
    const settled = (done: boolean) => {
      // A vendor call that threw may be tried again under its label (a retry of the same call).
      if (done) used.set(label, 'done');
      else used.delete(label);
    };
    return run({ toolName: label, turnId: parent.turnId, scope: parent.scope, args: {} }, call, {
      ...policy,
      onStale: policy.onStale ?? 'outcome-unknown',
      // A vendor request that threw may still have reached the vendor: keep the pending row.
      onToolError: policy.onToolError ?? 'keep',
      // Declared for this vendor call, never inherited from the executor's defaults.
      vendorDedupes: policy.vendorDedupes ?? false,
      onStoreUnavailable: policy.onStoreUnavailable ?? 'fail-closed',
      businessKey: () => parent.key,
    }).then(
      (result) => {
        settled(true);
        return result;
      },
      (error: unknown) => {
        settled(false);
        throw error;
      },
    );
  };
}
