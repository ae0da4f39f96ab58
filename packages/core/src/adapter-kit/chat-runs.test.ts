import { describe, expect, test } from 'vitest';
import { type ChatMessage, chatRunReader, chatToolCalls, createRunEnds } from './chat-runs.js';
import { readRuns } from './transcripts.js';

type Message = ChatMessage & { role?: string };
const roleOf = (m: Message) => (m.role === 'remove' ? null : m.role);
const user = (content: string): Message => ({ role: 'user', content });
const calls = (...names: string[]): Message => ({
  role: 'assistant',
  content: '',
  tool_calls: names.map((name, i) => ({ id: `c${i}`, name })),
});
const result = (name: string, status = 'success'): Message => ({
  role: 'tool',
  content: 'done',
  tool_call_id: 'c0',
  name,
  status,
});

describe('chatToolCalls / chatRunReader: chat messages kept as runs', () => {
  test("tool calls in LangChain's and Chat Completions' shapes; none for a message without", () => {
    const message = {
      tool_calls: [{ id: 'a', name: 'send' }, { id: 'b', function: { name: 'charge' } }, null],
    };
    expect(chatToolCalls(message)).toEqual([
      { id: 'a', name: 'send' },
      { id: 'b', name: 'charge' },
      {},
    ]);
    expect(chatToolCalls({ content: 'hi' })).toEqual([]);
  });

  test('kinds by role: user, prompts, results, the model text or its calls; null and no object left out', () => {
    const reader = chatRunReader(roleOf);
    expect(reader.kind(user('hi'))).toBe('user');
    expect(reader.kind({ role: 'system' })).toBe('prompt');
    expect(reader.kind({ role: 'developer' })).toBe('prompt');
    expect(reader.kind({ role: 'tool' })).toBe('result');
    expect(reader.kind({ role: 'function' })).toBe('result');
    expect(reader.kind({ role: 'assistant', content: 'hello' })).toBe('text');
    expect(reader.kind(calls('send'))).toBe('calls');
    expect(reader.kind({ role: 'remove' })).toBeUndefined();
    expect(reader.kind(null as unknown as Message)).toBeUndefined();
    expect(reader.result(result('send', 'error'))).toEqual({
      callId: 'c0',
      name: 'send',
      error: true,
    });
    expect(reader.content({ role: 'user' })).toBe('');
  });

  test('read as runs: a run that ended on a tool that ends runs answered its turn; on another, it broke', () => {
    const ends = (name: string) => name === 'finish';
    const reader = chatRunReader(roleOf, ends);
    const answered = readRuns([user('a'), calls('finish'), result('finish'), user('a')], reader);
    expect(answered).toEqual([
      { role: 'user', content: 'a' },
      { role: 'answer' },
      { role: 'answer' },
      { role: 'user', content: 'a' },
    ]);
    const broke = readRuns([user('a'), calls('send'), result('send'), user('a')], reader);
    expect(broke).toEqual([
      { role: 'user', content: 'a' },
      { role: 'user', content: 'a' },
    ]);
  });
});

describe('createRunEnds: which tools end a run, learnt from the tools seen', () => {
  test('seen one way: that way; seen both ways or not seen: undefined', () => {
    const runEnds = createRunEnds((tool) => (tool as { direct?: boolean }).direct === true);
    runEnds.learn({ name: 'finish', direct: true });
    runEnds.learn({ name: 'send' });
    runEnds.learn({ name: 'both', direct: true });
    runEnds.learn({ name: 'both' });
    runEnds.learn(null);
    runEnds.learn({ name: 5 });
    expect(runEnds.endsRun('finish')).toBe(true);
    expect(runEnds.endsRun('send')).toBe(false);
    expect(runEnds.endsRun('both')).toBeUndefined();
    expect(runEnds.endsRun('other')).toBeUndefined();
  });
});
