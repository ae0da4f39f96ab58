/**
 * The errors of approvals (see approvals/approvals.ts), each with its own code
 * (`approval_pending`: retry once approved; `approval_rejected`: a stored decision, do not retry;
 * `approval_conflict`: the other decision was taken first), the next step `errorForModel` gives
 * the model, and its own cross-install `isInstance`.
 */
import { hasMarker, IdempotencyError } from './idempotency-error.js';

/** An approval as the store keeps it (see `Approval` in approvals/approvals.ts). */
interface ApprovalFields {
  key: string;
  toolName: string;
  status: 'pending' | 'approved' | 'rejected';
  by?: string | undefined;
  reason?: string | undefined;
}

const pendingSymbol = Symbol.for('idempotent-tools.error.ApprovalPendingError');

/**
 * The call needs a person's approval and none was given yet. Nothing ran. Retryable: once it is
 * approved, the same call runs (once).
 */
export class ApprovalPendingError extends IdempotencyError {
  readonly [pendingSymbol] = true;
  /** The approval key: what `approve(key, ...)` / `reject(key, ...)` take. */
  readonly approvalKey: string;

  /**
   * @param options.closed the person was asked and closed the question without deciding (an
   *   adapter that asks them itself, `runAsking`): the next call asks again
   */
  constructor(options: {
    approval: ApprovalFields;
    callKey?: string | undefined;
    closed?: boolean | undefined;
  }) {
    const { approval } = options;
    const { toolName } = approval;
    super({
      code: 'approval_pending',
      key: options.callKey,
      retryable: true,
      message: options.closed
        ? `The user closed the approval request of ${toolName} without deciding. Nothing ran and nothing was decided. Ask the user whether to go ahead; to ask for approval again, call ${toolName} again with the same arguments later.`
        : `${toolName} needs a person's approval before it runs, and it has none yet (approval ${approval.key}). Nothing ran. Tell the user it is waiting for approval; once it is approved, the same call runs once.`,
    });
    this.name = 'ApprovalPendingError';
    this.approvalKey = approval.key;
  }

  static override isInstance(error: unknown): error is ApprovalPendingError {
    return hasMarker(error, pendingSymbol);
  }
}

const rejectedSymbol = Symbol.for('idempotent-tools.error.ApprovalRejectedError');

/**
 * A person rejected this exact call. It did not run and never will for these arguments in this
 * turn (the decision is stored and replayed for the ttl).
 */
export class ApprovalRejectedError extends IdempotencyError {
  readonly [rejectedSymbol] = true;
  readonly replayed = true as const;
  readonly approvalKey: string;
  /** Who rejected it. */
  readonly by: string | undefined;
  /** Why, when they said. */
  readonly reason: string | undefined;

  constructor(options: { approval: ApprovalFields; callKey?: string | undefined }) {
    const { approval } = options;
    const why = approval.reason === undefined ? '' : `: ${approval.reason}`;
    super({
      code: 'approval_rejected',
      key: options.callKey,
      retryable: false,
      message: `${approval.toolName} was rejected by ${approval.by || 'the approver'}${why}. It did not run and will not run with these arguments. Do not retry it; tell the user, or propose something else.`,
    });
    this.name = 'ApprovalRejectedError';
    this.approvalKey = approval.key;
    this.by = approval.by;
    this.reason = approval.reason;
  }

  static override isInstance(error: unknown): error is ApprovalRejectedError {
    return hasMarker(error, rejectedSymbol);
  }
}

const conflictSymbol = Symbol.for('idempotent-tools.error.ApprovalConflictError');

/**
 * A decision on an approval that was already decided the other way. The first decision stands
 * (`decided`); nothing changed. The same decision sent again is not an error.
 */
export class ApprovalConflictError extends IdempotencyError {
  readonly [conflictSymbol] = true;
  readonly approvalKey: string;
  /** The decision that stands. */
  readonly decided: 'approved' | 'rejected';
  /** Who made it. */
  readonly by: string | undefined;

  constructor(options: { approval: ApprovalFields; attempted: 'approved' | 'rejected' }) {
    const { approval, attempted } = options;
    const decided = approval.status === 'approved' ? 'approved' : 'rejected';
    super({
      code: 'approval_conflict',
      key: approval.key,
      retryable: false,
      message: `The call to ${approval.toolName} was already ${decided} by ${approval.by || 'someone'}; it cannot be ${attempted} now. The first decision stands and nothing changed.`,
    });
    this.name = 'ApprovalConflictError';
    this.approvalKey = approval.key;
    this.decided = decided;
    this.by = approval.by;
  }

  static override isInstance(error: unknown): error is ApprovalConflictError {
    return hasMarker(error, conflictSymbol);
  }
}
