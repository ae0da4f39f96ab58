import { ServiceSkipReporter } from '@idempotent-tools/testing/vitest';
import { defineConfig } from 'vitest/config';
import { sharedTest } from '../../vitest.shared.js';

// A test skipped for a missing service counts as skipped, and the run names the service once.
export default defineConfig({
  test: {
    ...sharedTest,
    reporters: [new ServiceSkipReporter(), 'default'],
    // No redis-server a test starts may outlive the suite: the teardown checks (and fails).
    globalSetup: ['./src/test-utils/global-setup.ts'],
  },
});
