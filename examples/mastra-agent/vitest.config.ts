import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Node 22 warns `ExperimentalWarning: SQLite is an experimental feature` when node:sqlite
    // loads (Node 24 does not): keep it out of the test output.
    execArgv: ['--disable-warning=ExperimentalWarning'],
  },
});
