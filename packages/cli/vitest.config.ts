import { defineConfig } from 'vitest/config';

// Every test spawns the real bin (a Node process each): give them room.
export default defineConfig({ test: { testTimeout: 60_000, hookTimeout: 60_000 } });
