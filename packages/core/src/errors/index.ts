export {
  ApprovalConflictError,
  ApprovalPendingError,
  ApprovalRejectedError,
} from './approvals-errors.js';
export { ConfigurationError } from './configuration-error.js';
export { DriftError } from './drift-error.js';
export { IdempotencyError, type IdempotencyErrorCode } from './idempotency-error.js';
export { InProgressError } from './in-progress-error.js';
export { InvalidInputError } from './invalid-input-error.js';
export { OutcomeUnknownError } from './outcome-unknown-error.js';
export { PersistFailedError, type PersistFailedReason } from './persist-failed-error.js';
export {
  RecordIntegrityError,
  type RecordIntegrityReason,
} from './record-integrity-error.js';
export { ReplayedFailureError } from './replayed-failure-error.js';
export { StoreUnavailableError } from './store-unavailable-error.js';
