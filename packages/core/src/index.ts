export * from './canonicalize.js';
export * from './derive-key.js';
export * from './errors/index.js';
export type * from './events.js';
export * from './executor.js';
export * from './memory-store.js';
export * from './model-output.js';
export type * from './store.js';
