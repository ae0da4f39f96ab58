/**
 * A process killed mid-turn (SQLite store), then the same turn resumed in another process with
 * the real client against the scripted server: never a second side effect.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects } from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/gemini';
import { afterAll, describe, expect, test } from 'vitest';
import { createIdempotency } from './index.js';
import { CRASH_PROMPT, client, runTurn, ticketModel, ticketSystem } from './test-utils/app.js';
import { ticketFunctions } from './test-utils/drivers.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'google-genai-adapter-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runChild(
  env: Record<string, string>,
): Promise<{ signal: NodeJS.Signals | null; out: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', child], {
      cwd: packageDir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (out += d));
    proc.on('error', reject);
    proc.on('close', (_code, signal) => resolve({ signal, out }));
  });
}

describe('a process killed mid-turn (SQLite store), then the turn resumed in another process', () => {
  for (const mode of ['after-effect', 'after-persist'] as const) {
    test(`automatic function calling, killed ${mode}: never a second side effect`, async () => {
      const db = join(dir, `${mode}.db`);
      const effects = join(dir, `${mode}.effects`);
      const server = await startScriptedServer({ respond: ticketModel });
      try {
        const killed = await runChild({
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
