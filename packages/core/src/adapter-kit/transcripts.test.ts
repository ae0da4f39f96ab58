import { describe, expect, it } from 'vitest';
import { readTranscript, type TranscriptReader } from './transcripts.js';

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
