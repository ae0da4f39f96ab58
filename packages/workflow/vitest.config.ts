import { defineConfig } from 'vitest/config';
import { sharedTest } from '../../vitest.shared.js';

// Hang-detector timeouts only (see vitest.shared.ts).
export default defineConfig({ test: sharedTest });
