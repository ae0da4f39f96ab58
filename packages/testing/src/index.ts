export {
  type ApprovalCaseOptions,
  type ApprovalDriver,
  type ChargeArgs,
  type PendingApproval,
  runApprovalCases,
} from './approval-cases.js';
export { createTestClock, sleep, type TestClock, type TestClockOptions } from './clock.js';
export {
  runStoreConformance,
  type StoreConformanceOptions,
} from './conformance/index.js';
export {
  type ChildResult,
  type CrashCaseOptions,
  type CrashDriver,
  type CrashFiles,
  type CrashPoint,
  crashFiles,
  lastJsonLine,
  type ResumedOutcome,
  runChild,
  runCrashCases,
} from './crash-cases.js';
export type { ExpectLike, ExpectMatchers } from './expect.js';
export {
  countEffects,
  newScenarioFiles,
  type RunWorkersOptions,
  runWorkers,
  type WorkerCallResult,
  type WorkerReport,
  type WorkerScenario,
} from './processes.js';
export {
  type RepeatCallResult,
  type RepeatCaseOptions,
  type RepeatDriver,
  runRepeatCases,
} from './repeat-cases.js';
export { type MissingService, SERVICE_SKIP_LOG_ENV, serviceAvailable } from './service.js';
export { runStoreFuzz, type StoreFuzzOptions } from './store-fuzz.js';
export {
  losingTicketSystem,
  retryTurn,
  type TicketSystem,
  ticketCrash,
  ticketSystem,
  withRetries,
} from './tickets.js';
export { inWindow, TIMER_SLACK_MS, WINDOW_FACTORS, type Window, waitFor } from './timing.js';
export {
  runTurnIdentityCases,
  type SayOptions,
  type TurnIdentityCaseOptions,
  type TurnIdentityConversation,
  type TurnIdentityDriver,
} from './turn-identity-cases.js';
export { uniqueKey } from './unique-key.js';
