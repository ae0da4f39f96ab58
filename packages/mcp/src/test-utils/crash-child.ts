import { type Crash, runHost } from './crash-host.js';

await runHost({
  dbPath: process.env.CRASH_DB ?? '',
  effectsFile: process.env.CRASH_EFFECTS ?? '',
  crash: process.env.CRASH_AT as Crash,
  turnId: process.env.CRASH_TURN || undefined,
});
