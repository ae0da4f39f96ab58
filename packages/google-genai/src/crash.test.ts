/**
 * A process killed mid-turn (SQLite store), then the same turn resumed in another process with
 * the real client against the scripted server: never a second side effect.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/gemini';
import { afterAll, describe, expect, test } from 'vitest';
import { createIdempotency } from './index.js';
import { CRASH_PROMPT, client, runTurn, ticketModel, ticketSystem } from './test-utils/app.js';
import { ticketFunctions } from './test-utils/drivers.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'google-genai-adapter-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inChild = (env: Record<string, string>) => runChild(child, { cwd: packageDir, env });

describe('a process killed mid-turn (SQLite store), then the turn resumed in another process', () => {
  for (const mode of ['after-effect', 'after-persist'] as const) {
    test(`automatic function calling, killed ${mode}: never a second side effect`, async () => {
      const db = join(dir, `${mode}.db`);
      const effects = join(dir, `${mode}.effects`);
      const server = await startScriptedServer({ respond: ticketModel });
      try {
        const killed = await inChild({
          CRASH_MODE: mode,
          CRASH_DB: db,
          CRASH_EFFECTS: effects,
          CRASH_BASE_URL: server.baseUrl,
        });
        expect(killed.signal, killed.out).toBe('SIGKILL');
        expect(countEffects(effects)).toBe(1);

        const store = openSqliteStore(db);
        const fns = await ticketFunctions(
          createIdempotency({ store }),
          ticketSystem(effects),
          'functions',
        );
        const history = await runTurn(client(server.baseUrl), fns, 'afc', {
          history: [],
          text: CRASH_PROMPT,
          system: 'You open tickets, rebuilt after the restart.',
          conversationId: 'chat-1',
        });
        store.close();
        const answer = history.at(-1)?.parts?.[0]?.text ?? '';
        if (mode === 'after-persist') {
          expect(answer).toContain('"ticket":"T-1"');
          expect(answer).toContain('"replayed":true');
        } else {
          expect(answer).toContain('"error":"outcome_unknown"');
          expect(answer).toContain('"next":"check-first"');
        }
        expect(countEffects(effects)).toBe(1);
      } finally {
        await server.close();
      }
    });
  }
});
