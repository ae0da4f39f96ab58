import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { refuseUnidentified } from './anonymous-runs.js';

type Info = { thread?: string; turn?: string };
const sources = {
  turn: (info: Info) => info.turn,
  conversation: (info: Info) => info.thread,
  howTo: 'the thread id',
};
const adapter = (options: object = {}) =>
  createAdapter<Info>({ store: createMemoryStore(), ...options }, { caller: 'test', ...sources });

describe('refuseUnidentified: a run nothing identifies, refused before it starts', () => {
  test("the framework's turn or conversation, or an option: the run goes on", () => {
    expect(() => refuseUnidentified(adapter(), {}, sources, { thread: 't-1' })).not.toThrow();
    expect(() => refuseUnidentified(adapter(), {}, sources, { turn: 'u-1' })).not.toThrow();
    const fixed = { conversationId: 'chat-1' };
    expect(() => refuseUnidentified(adapter(fixed), fixed, sources, {})).not.toThrow();
  });

  test('none of them: the ConfigurationError that says what to pass', () => {
    let error: unknown;
    try {
      refuseUnidentified(adapter(), {}, sources, {});
    } catch (e) {
      error = e;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/the thread id/);
  });
});
