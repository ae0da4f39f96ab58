import { describe, expect, it } from 'vitest';
import { chatTranscript, contentBlocks } from './transcripts.js';

type Message = { role: string; content?: unknown };
const blocks = (m: Message) => contentBlocks(m.content);
const spec = {
  authored: (m: Message) => blocks(m).filter((b) => b.type !== 'tool_result'),
  calls: (m: Message) => blocks(m).some((b) => b.type === 'tool_use'),
};

describe('contentBlocks', () => {
  it('a string is one text block; an array is itself; anything else none', () => {
    expect(contentBlocks('hi')).toEqual([{ type: 'text', text: 'hi' }]);
    const list = [{ type: 'image' }];
    expect(contentBlocks(list)).toBe(list);
    expect(contentBlocks(undefined)).toEqual([]);
    expect(contentBlocks({ type: 'text' })).toEqual([]);
  });
});

describe('chatTranscript', () => {
  it('user turns with what the user wrote; answers without tool calls end a turn', () => {
    const messages: Message[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'book it' },
      { role: 'assistant', content: [{ type: 'tool_use' }] },
      { role: 'user', content: [{ type: 'tool_result' }] },
      { role: 'assistant', content: 'booked' },
      { role: 'user', content: [] },
    ];
    expect(chatTranscript(messages, spec)).toEqual([
      undefined,
      { role: 'user', content: [{ type: 'text', text: 'book it' }] },
      undefined,
      undefined,
      { role: 'answer' },
      undefined,
    ]);
  });

  it('answerRole names the model messages; no messages, no transcript', () => {
    const model = [{ role: 'model', content: 'hi' }];
    expect(chatTranscript(model, { ...spec, answerRole: 'model' })).toEqual([{ role: 'answer' }]);
    expect(chatTranscript(model, spec)).toEqual([undefined]);
    expect(chatTranscript(undefined, spec)).toBeUndefined();
  });
});
