import { ServiceSkipReporter } from '@idempotent-tools/testing/vitest';
import { defineConfig } from 'vitest/config';

// A test skipped for a missing service counts as skipped, and the run names the service once.
// No performance hints ("faster with isolate: false"): nobody asked for them in `pnpm test`.
export default defineConfig({
  test: {
    reporters: [new ServiceSkipReporter(), 'default'],
    experimental: { diagnostics: false },
  },
});
