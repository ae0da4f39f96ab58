import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { turnIdFromModelMessages } from './index.js';

const user = (text: string): ModelMessage => ({ role: 'user', content: text });
const image = (bytes: number[]): ModelMessage => ({
  role: 'user',
  content: [{ type: 'image', image: new Uint8Array(bytes).buffer }],
});

describe('turnIdFromModelMessages', () => {
  it('keeps the id while the loop appends assistant and tool messages', () => {
    const turn = [user('Charge me.')];
    const later: ModelMessage[] = [
      ...turn,
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'charge', input: {} }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c1',
            toolName: 'charge',
            output: { type: 'json', value: {} },
          },
        ],
      },
    ];
    expect(turnIdFromModelMessages(turn)).toMatch(/^t_[A-Za-z0-9_-]{43}$/);
    expect(turnIdFromModelMessages(later)).toBe(turnIdFromModelMessages(turn));
  });

  it('changes with a new user message, and with the bytes of binary parts', () => {
    const first = turnIdFromModelMessages([user('Charge me.')]);
    expect(turnIdFromModelMessages([user('Charge me.'), user('Again.')])).not.toBe(first);
    expect(turnIdFromModelMessages([image([1, 2])])).not.toBe(
      turnIdFromModelMessages([image([1, 3])]),
    );
  });

  it('is undefined without a user message, and a typed error for non-JSON content', () => {
    expect(turnIdFromModelMessages([{ role: 'system', content: 'Be brief.' }])).toBeUndefined();
    const bad = [{ role: 'user', content: [{ type: 'text', text: 'x', n: 1n }] }] as never;
    expect(() => turnIdFromModelMessages(bad)).toThrow(
      expect.objectContaining({ code: 'invalid_input', field: 'turnId' }),
    );
  });
});
