import { type Crash, runChargeAgent } from './crash-agent.js';

await runChargeAgent({
  dbPath: process.env.CRASH_DB ?? '',
  effectsFile: process.env.CRASH_EFFECTS ?? '',
  crash: process.env.CRASH_AT as Crash,
});
