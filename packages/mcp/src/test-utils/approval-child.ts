import type { Answer } from './approval-app.js';
import { type ApprovalCrash, runApprovalHost } from './approval-host.js';

const { result, asked } = await runApprovalHost({
  dbPath: process.env.APPROVAL_DB ?? '',
  effectsFile: process.env.APPROVAL_EFFECTS ?? '',
  turnId: process.env.APPROVAL_TURN ?? '',
  answers: (process.env.APPROVAL_ANSWERS ?? '').split(',').filter(Boolean) as Answer[],
  crash: (process.env.APPROVAL_CRASH || undefined) as ApprovalCrash,
});
process.stdout.write(`${JSON.stringify({ result, asked })}\n`);
