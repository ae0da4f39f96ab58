import { ServiceSkipReporter } from '@idempotent-tools/testing/vitest';
import { defineConfig } from 'vitest/config';
import { sharedTest } from '../../vitest.shared.js';

// A test skipped for a missing service counts as skipped, and the run names the service once.
export default defineConfig({
  test: {
    ...sharedTest,
    reporters: [new ServiceSkipReporter(), 'default'],
  },
});
