import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, crashFiles, runChild } from '@idempotent-tools/testing';
import { expectResumedTicket } from '@idempotent-tools/testing/openai';
import { Agent, run, setTracingDisabled, tool } from '@openai/agents';
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { wrapAgentTools } from './agents.js';
import { createIdempotency } from './index.js';
import { CRASH_PROMPT, ticketArgs, ticketSystem } from './test-utils/app.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'openai-agents-adapter-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
setTracingDisabled(true);

const inChild = (env: Record<string, string>) => runChild(child, { cwd: packageDir, env });

describe('a process killed mid-turn (SQLite store), then the turn resumed in another process', () => {
  for (const mode of ['after-effect', 'after-persist'] as const) {
    test(`@openai/agents, killed ${mode}: never a second side effect`, async () => {
      const { dbPath: db, effectsFile: effects } = crashFiles(dir, `agents-${mode}`);
      const killed = await inChild({
        CRASH_MODE: mode,
        CRASH_DB: db,
        CRASH_EFFECTS: effects,
      });
      expect(killed.signal, killed.out).toBe('SIGKILL');
      expect(countEffects(effects)).toBe(1);

      const store = openSqliteStore(db);
      const model = new ScriptedModel([
        [functionCall('create_ticket', { title: CRASH_PROMPT }, { callId: 'resumed' })],
        [assistantMessage('done')],
      ]);
      const ticket = tool({
        name: 'create_ticket',
        description: 'Open a ticket.',
        parameters: ticketArgs,
        execute: ticketSystem(effects).create,
      });
      const agent = wrapAgentTools(
        createIdempotency({ store }),
        new Agent({ name: 'a', tools: [ticket], model }),
      );
      await run(agent, CRASH_PROMPT, { context: { conversationId: 'chat-1' } });
      store.close();
      const sent = model.calls[1]?.request.input as Array<{
        type: string;
        output?: { text: string };
      }>;
      const result = sent.find((i) => i.type === 'function_call_result');
      expectResumedTicket(expect, JSON.parse(result?.output?.text as string), mode);
      expect(countEffects(effects)).toBe(1);
    });
  }
});
