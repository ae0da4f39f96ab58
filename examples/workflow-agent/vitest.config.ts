import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Hang detectors only: no test has a time budget a slow or busy machine could miss.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    // Node 22 warns `ExperimentalWarning: SQLite is an experimental feature` when node:sqlite
    // loads (Node 24 does not): keep it out of the test output.
    execArgv: ['--disable-warning=ExperimentalWarning'],
  },
});
