import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type IdempotencyStore,
} from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild, type TurnIdentityDriver } from '@idempotent-tools/testing';
import { type BaseCheckpointSaver, MemorySaver } from '@langchain/langgraph';
import { openSqliteSaver } from './node-sqlite-saver.js';
import { type ChatInput, chatWorkflow } from './task-chat.js';

const child = fileURLToPath(new URL('./task-chat-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Where the thread lives: `memory` (MemorySaver + the memory store), or `sqlite` (LangGraph's
 * SqliteSaver + the SQLite store, files that another process opens too).
 */
export type TaskSaver = 'memory' | 'sqlite';

/** Run one turn in another process on the same files; its refusal comes back as one. */
async function inChild(env: Record<string, string>): Promise<void> {
  const { code, stderr } = await runChild(child, { cwd: packageDir, env });
  if (code === 0) return;
  const failed = (() => {
    try {
      return JSON.parse(stderr) as { code?: string; option?: string; message?: string };
    } catch {
      return { message: stderr };
    }
  })();
  if (failed.code === 'configuration') {
    throw new ConfigurationError({ option: failed.option ?? '', message: failed.message ?? '' });
  }
  throw new Error(`the child process exited with ${code}: ${failed.message}`);
}

/**
 * The identity cases over LangGraph tasks (an entrypoint with one `idempotentTask`), for
 * threads: the app is a chat whose thread is the conversation. Each user message is a run with
 * the app's id of the message as `turn_id` (a thread of several runs); a run whose reply is lost
 * fails after the task ran and is retried with the same `turn_id`. `sayReturningNothing` is the
 * other kind of app: no `turn_id` (the thread is one run), a workflow that returns nothing; on
 * SQLite every other such run is made by another process. No conversation: an app that passes
 * no thread (its graph then has no checkpointer).
 */
export function createTaskDriver(saver: TaskSaver) {
  return async (): Promise<TurnIdentityDriver> => {
    const dir = mkdtempSync(join(tmpdir(), 'langgraph-identity-'));
    const files = {
      CHECKPOINT_FILE: join(dir, 'checkpoints.db'),
      SQLITE_FILE: join(dir, 'idempotency.db'),
      EFFECTS_FILE: join(dir, 'effects.log'),
    };
    const store: IdempotencyStore & { close?: () => void } =
      saver === 'sqlite' ? openSqliteStore(files.SQLITE_FILE) : createMemoryStore();
    const checkpointer: BaseCheckpointSaver & { close?: () => void } =
      saver === 'sqlite' ? openSqliteSaver(files.CHECKPOINT_FILE) : new MemorySaver();
    const idempotency = createIdempotency({ store });
    const effectsFile = files.EFFECTS_FILE;
    const workflow = chatWorkflow({ checkpointer, idempotency, effectsFile });
    let messages = 0;
    return {
      conversation(threadId) {
        const run = (input: ChatInput, turnId?: string) => {
          if (threadId === undefined) {
            return chatWorkflow({ idempotency, effectsFile }).invoke(input);
          }
          const configurable = { thread_id: threadId, ...(turnId ? { turn_id: turnId } : {}) };
          return workflow.invoke(input, { configurable });
        };
        let words = '';
        let turn = '';
        let quiet = 0;
        return {
          say: async (text) => {
            words = text;
            turn = `msg-${++messages}`;
            await run({ text }, turn);
          },
          resend: async () => {
            await run({ text: words }, turn);
          },
          sayLosingReply: async (text) => {
            words = text;
            turn = `msg-${++messages}`;
            const lost = await run({ text, lose: true }, turn).then(
              () => false,
              () => true,
            );
            if (!lost) throw new Error('the reply was meant to be lost');
            await run({ text }, turn);
          },
          sayReturningNothing: async (text) => {
            const input = { text, quiet: true };
            if (saver === 'sqlite' && threadId !== undefined && quiet++ % 2 === 0) {
              return inChild({ ...files, THREAD_ID: threadId, INPUT: JSON.stringify(input) });
            }
            const out = await run(input);
            if (out !== undefined) throw new Error('the run was meant to return nothing');
          },
        };
      },
      effects: () => countEffects(effectsFile),
      close: async () => {
        store.close?.();
        checkpointer.close?.();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };
}
