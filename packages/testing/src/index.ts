export { createTestClock, sleep, type TestClock, type TestClockOptions } from './clock.js';
export {
  type ExpectLike,
  type ExpectMatchers,
  runStoreConformance,
  type StoreConformanceOptions,
} from './store-conformance.js';
export { uniqueKey } from './unique-key.js';
