export {
  type ApprovalCaseOptions,
  type ApprovalDriver,
  type ChargeArgs,
  type PendingApproval,
  runApprovalCases,
} from './approval-cases.js';
export { createTestClock, sleep, type TestClock, type TestClockOptions } from './clock.js';
export {
  countEffects,
  newScenarioFiles,
  type RunWorkersOptions,
  runWorkers,
  type WorkerCallResult,
  type WorkerReport,
  type WorkerScenario,
} from './processes.js';
export { type MissingService, SERVICE_SKIP_LOG_ENV, serviceAvailable } from './service.js';
export {
  type ExpectLike,
  type ExpectMatchers,
  runStoreConformance,
  type StoreConformanceOptions,
} from './store-conformance.js';
export { runStoreFuzz, type StoreFuzzOptions } from './store-fuzz.js';
export { inWindow, TIMER_SLACK_MS, WINDOW_FACTORS, type Window, waitFor } from './timing.js';
export {
  runTurnIdentityCases,
  type SayOptions,
  type TurnIdentityCaseOptions,
  type TurnIdentityConversation,
  type TurnIdentityDriver,
} from './turn-identity-cases.js';
export { uniqueKey } from './unique-key.js';
