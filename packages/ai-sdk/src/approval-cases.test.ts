/**
 * The shared approval cases (`runApprovalCases`) through the AI SDK's own `needsApproval` flow:
 * generateText and streamText over the real `@ai-sdk/openai` client and the scripted OpenAI
 * server, with the SDK's signed approvals (`experimental_toolApprovalSecret`) off and on.
 */
import { runApprovalCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { approvalDriver } from './test-utils/approval-driver.js';

const SECRET = 'a-test-secret-of-32-bytes-or-more!!';
const runs = [
  { api: 'chat', mode: 'generateText' },
  { api: 'responses', mode: 'generateText' },
  { api: 'chat', mode: 'streamText' },
] as const;

for (const { api, mode } of runs) {
  for (const secret of [undefined, SECRET]) {
    runApprovalCases({
      name: `ai-sdk: ${mode} over @ai-sdk/openai ${api}, signed approvals ${secret === undefined ? 'off' : 'on'}`,
      describe,
      test,
      expect,
      createDriver: approvalDriver({ api, mode, secret }),
      supports: ['reject', 'approveEdited', 'approveForOther', 'forge'],
    });
  }
}
