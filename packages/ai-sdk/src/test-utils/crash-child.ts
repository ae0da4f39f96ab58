import { type Crash, runChargeAgent } from './crash-agent.js';

await runChargeAgent({
  baseURL: process.env.CRASH_BASE_URL ?? '',
  dbPath: process.env.CRASH_DB ?? '',
  effectsFile: process.env.CRASH_EFFECTS ?? '',
  crash: process.env.CRASH_AT as Crash,
});
