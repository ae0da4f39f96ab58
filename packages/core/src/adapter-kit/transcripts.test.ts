import { describe, expect, it } from 'vitest';
import {
  type RunReader,
  readRuns,
  readTranscript,
  roleSource,
  type TranscriptReader,
} from './transcripts.js';

type Message = { role: string; content?: unknown };
const reader: TranscriptReader<Message> = {
  from: (m) =>
    m.role === 'system' ? 'prompt' : m.role === 'assistant' ? 'model' : (m.role as 'user'),
  content: (m) => m.content,
  isToolResult: (part) => (part as { type?: unknown }).type === 'tool_result',
};

describe('readTranscript', () => {
  it('user turns with their content; anything from the model or a tool answers; prompts never count', () => {
    const messages: Message[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'book it' },
      { role: 'assistant', content: [{ type: 'tool_use' }] },
      { role: 'user', content: [{ type: 'tool_result' }] },
      { role: 'tool', content: 'booked' },
      { role: 'user', content: [] },
    ];
    expect(readTranscript(messages, reader)).toEqual([
      { role: 'user', content: 'book it' },
      { role: 'answer' },
      { role: 'answer' },
      { role: 'answer' },
    ]);
  });

  it('a user message with tool results and words: the results answer, the words are a new turn', () => {
    const mixed = {
      role: 'user',
      content: [{ type: 'tool_result' }, { type: 'text', text: 'hi' }],
    };
    expect(readTranscript([mixed], reader)).toEqual([
      { role: 'answer' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    ]);
  });

  it('no messages, no transcript; a message the reader leaves out is skipped', () => {
    expect(readTranscript(undefined, reader)).toBeUndefined();
    expect(readTranscript([{ role: 'x' }], { ...reader, from: () => undefined })).toEqual([]);
  });
});

type RunMessage = {
  kind: 'user' | 'prompt' | 'text' | 'calls' | 'result';
  text?: string;
  tool?: string;
  error?: boolean;
};
const runs = (endsRun?: (toolName: string) => boolean | undefined): RunReader<RunMessage> => ({
  kind: (m) => m.kind,
  content: (m) => m.text,
  calls: (m) => (m.tool === undefined ? [] : [{ id: m.tool, name: m.tool }]),
  result: (m) => ({ callId: m.tool, error: m.error === true }),
  endsRun,
});
const user = (text: string): RunMessage => ({ kind: 'user', text });
const calls = (tool: string): RunMessage => ({ kind: 'calls', tool });
const result = (tool: string, error = false): RunMessage => ({ kind: 'result', tool, error });

describe('readRuns', () => {
  it('a run that ends with the model text answered; one that ends with tool calls broke: it answers nothing', () => {
    const answered = [user('hi'), calls('a'), result('a'), { kind: 'text' } as RunMessage];
    expect(readRuns([{ kind: 'prompt' }, ...answered, user('hi')], runs())).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'answer' },
      { role: 'answer' },
      { role: 'answer' },
      { role: 'user', content: 'hi' },
    ]);
    expect(
      readRuns(
        [user('hi'), calls('a'), user('hi')],
        runs(() => false),
      ),
    ).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'user', content: 'hi' },
    ]);
  });

  it('a run that ends with a tool result: answered by a tool that ends runs, broken by another, partial when unknown', () => {
    const thread = (...run: RunMessage[]) => [user('hi'), ...run];
    expect(
      readRuns(
        thread(calls('send'), result('send')),
        runs((t) => t === 'send'),
      ),
    ).toEqual([{ role: 'user', content: 'hi' }, { role: 'answer' }, { role: 'answer' }]);
    expect(
      readRuns(
        thread(calls('send'), result('send')),
        runs(() => false),
      ),
    ).toEqual([{ role: 'user', content: 'hi' }]);
    // An error result is handed back to the model: it does not end the run.
    expect(
      readRuns(
        thread(calls('send'), result('send', true)),
        runs(() => true),
      ),
    ).toEqual([{ role: 'user', content: 'hi' }]);
    const partial = [
      { role: 'user', content: 'hi' },
      { role: 'answer', partial: true },
      { role: 'answer', partial: true },
    ];
    expect(
      readRuns(
        thread(calls('x'), result('x')),
        runs(() => undefined),
      ),
    ).toEqual(partial);
    expect(readRuns(thread(calls('x'), result('x')), runs())).toEqual(partial);
  });
});

describe('roleSource', () => {
  it('the role names providers share: user, prompts, tool results, and the model for any other', () => {
    const roles = [
      'user',
      'system',
      'developer',
      'tool',
      'function',
      'assistant',
      'critic',
      undefined,
    ];
    expect(roles.map(roleSource)).toEqual([
      'user',
      'prompt',
      'prompt',
      'tool',
      'tool',
      'model',
      'model',
      'model',
    ]);
  });
});
