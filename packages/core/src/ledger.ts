/**
 * The ledger (design section 8 (docs/design.md)): a vendor call with no idempotency support, recorded by the same
 * executor and store as the tool that makes it. It is a nested `run` whose key is derived from the
 * tool call's key and a label: the `in_progress` claim is the pending row written before the call,
 * the stored outcome the done row, the claim on a retry the check that comes first, and a stale
 * claim goes to `reconcile`, else to `OutcomeUnknownError`. No second state machine.
 */
import { KEY_LIMITS } from './derive-key.js';
import { InvalidInputError } from './errors/index.js';
import type {
  ExecutionContext,
  Idempotency,
  IdempotentResult,
  ToolFunction,
  VendorCallArgs,
  VendorCallFunction,
  VendorCallPolicy,
} from './executor/types.js';
import { assertOwned, contextOrThrow, noteEffect } from './vendor.js';

export type { VendorCallArgs, VendorCallFunction, VendorCallPolicy };

/**
 * `idempotency.vendorCall(ctx, label, fn, policy?)`, bound to an executor's `run`.
 * @internal Use it as `idempotency.vendorCall`.
 */
export function createVendorCall(run: Idempotency['run']) {
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
    const call: ToolFunction<VendorCallArgs, Result> = (_args, vendor) => {
      assertOwned(parent);
      noteEffect(parent, 'ledger');
      return fn({
        ...vendor,
        signal: AbortSignal.any([vendor.signal, parent.signal]),
        stillOwned: () => vendor.stillOwned() && parent.stillOwned(),
      });
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
    });
  };
}
