/**
 * A process killed mid-turn (SQLite store), then the turn resumed in another process: the side
 * effect never runs a second time, through the dispatcher and through the SDK's tool runner.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/anthropic';
import { afterAll, describe, expect, test } from 'vitest';
import { createIdempotency, createToolDispatcher } from './index.js';
import {
  CRASH_PROMPT,
  client,
  dispatchTurn,
  runnerTurn,
  ticketArgs,
  ticketModel,
  ticketSystem,
  ticketTool,
} from './test-utils/app.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'anthropic-adapter-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inChild = (env: Record<string, string>) => runChild(child, { cwd: packageDir, env });

describe('a process killed mid-turn (SQLite store), then the turn resumed in another process', () => {
  for (const surface of ['dispatcher', 'runner'] as const) {
    for (const mode of ['after-effect', 'after-persist'] as const) {
      test(`${surface}, killed ${mode}: never a second side effect`, async () => {
        const db = join(dir, `${surface}-${mode}.db`);
        const effects = join(dir, `${surface}-${mode}.effects`);
        const server = await startScriptedServer({ respond: ticketModel });
        try {
          const killed = await inChild({
            CRASH_SURFACE: surface,
            CRASH_MODE: mode,
            CRASH_DB: db,
            CRASH_EFFECTS: effects,
            CRASH_BASE_URL: server.baseURL,
          });
          expect(killed.signal, killed.out).toBe('SIGKILL');
          expect(countEffects(effects)).toBe(1);

          const store = openSqliteStore(db);
          const idempotency = createIdempotency({ store });
          const system = ticketSystem(effects);
          const history = [{ role: 'user' as const, content: CRASH_PROMPT }];
          const { results } =
            surface === 'dispatcher'
              ? await dispatchTurn(
                  client(server.baseURL),
                  createToolDispatcher(idempotency, {
                    create_ticket: { schema: ticketArgs, execute: system.create },
                  }),
                  history,
                  { conversationId: 'chat-1' },
                )
              : await runnerTurn(client(server.baseURL), [ticketTool(system)], history, {
                  idempotency,
                  conversationId: 'chat-1',
                });
          store.close();
          const output = JSON.parse(results[0]?.content as string);
          if (mode === 'after-persist') {
            expect(output).toMatchObject({ ticket: 'T-1', title: CRASH_PROMPT, replayed: true });
            expect(results[0]?.is_error).toBeUndefined();
          } else {
            expect(output).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });
            expect(results[0]?.is_error).toBe(true);
          }
          expect(countEffects(effects)).toBe(1);
        } finally {
          await server.close();
        }
      });
    }
  }
});
