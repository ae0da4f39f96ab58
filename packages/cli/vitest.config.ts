import { ServiceSkipReporter } from '@idempotent-tools/testing/vitest';
import { defineConfig } from 'vitest/config';
import { sharedTest } from '../../vitest.shared.js';

// Every test spawns the real bin (a Node process each): give them room. A test skipped for a
// missing service counts as skipped, and the run names the service once. No performance hints.
export default defineConfig({
  test: {
    ...sharedTest,
    reporters: [new ServiceSkipReporter(), 'default'],
  },
});
