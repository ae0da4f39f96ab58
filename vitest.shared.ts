/**
 * What every package's vitest config shares. No test has a wall-clock budget a loaded machine can
 * miss: CI runs on a shared, noisy 2-core machine next to other work, so the timeouts are hang
 * detectors, far above any run (`scripts/check-test-timeouts.mjs` refuses a test or hook that
 * sets a shorter one). Timings belong in bench/.
 */
export const HANG_DETECTOR_MS = 600_000;

export const sharedTest = {
  testTimeout: HANG_DETECTOR_MS,
  hookTimeout: HANG_DETECTOR_MS,
  teardownTimeout: 60_000,
  // No performance hints ("faster with isolate: false"): nobody asked for them in `pnpm test`.
  experimental: { diagnostics: false },
} as const;
