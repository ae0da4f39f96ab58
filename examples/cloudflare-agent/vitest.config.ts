import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Hang detectors only: no test has a time budget a slow or busy machine could miss.
    testTimeout: 600_000,
    hookTimeout: 600_000,
  },
});
