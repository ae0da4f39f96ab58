import { defineConfig } from 'vitest/config';

// No performance hints ("faster with isolate: false"): nobody asked for them in `pnpm test`.
export default defineConfig({ test: { experimental: { diagnostics: false } } });
