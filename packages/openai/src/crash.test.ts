import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, crashFiles, runChild } from '@idempotent-tools/testing';
import { expectResumedTicket, startScriptedServer } from '@idempotent-tools/testing/openai';
import { afterAll, describe, expect, test } from 'vitest';
import { createIdempotency, createToolDispatcher } from './index.js';
import {
  CRASH_PROMPT,
  chatTurn,
  client,
  ticketArgs,
  ticketModel,
  ticketSystem,
} from './test-utils/app.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'openai-adapter-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inChild = (env: Record<string, string>) => runChild(child, { cwd: packageDir, env });

describe('a process killed mid-turn (SQLite store), then the turn resumed in another process', () => {
  for (const mode of ['after-effect', 'after-persist'] as const) {
    test(`Chat Completions, killed ${mode}: never a second side effect`, async () => {
      const { dbPath: db, effectsFile: effects } = crashFiles(dir, `chat-${mode}`);
      const server = await startScriptedServer({ respond: ticketModel });
      try {
        const killed = await inChild({
          CRASH_MODE: mode,
          CRASH_DB: db,
          CRASH_EFFECTS: effects,
          CRASH_BASE_URL: server.baseURL,
        });
        expect(killed.signal, killed.out).toBe('SIGKILL');
        expect(countEffects(effects)).toBe(1);

        const store = openSqliteStore(db);
        const tools = createToolDispatcher(createIdempotency({ store }), {
          create_ticket: { schema: ticketArgs, execute: ticketSystem(effects).create },
        });
        const { messages } = await chatTurn(client(server.baseURL), tools, [
          { role: 'user', content: CRASH_PROMPT },
        ]);
        store.close();
        const toolMessage = messages.find((m) => m.role === 'tool');
        expectResumedTicket(expect, JSON.parse(toolMessage?.content as string), mode);
        expect(countEffects(effects)).toBe(1);
      } finally {
        await server.close();
      }
    });
  }
});
