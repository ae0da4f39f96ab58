import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createTurnResolver, deriveTurnId, idOf, type TranscriptEntry } from './turn-identity.js';

const user = (content: unknown): TranscriptEntry => ({ role: 'user', content });
const answer: TranscriptEntry = { role: 'answer' };

describe('deriveTurnId', () => {
  test('distinct: two conversations with the same words get different turns', () => {
    const words = [user('Cancel my subscription.')];
    expect(deriveTurnId('chat-a', words)).not.toBe(deriveTurnId('chat-b', words));
  });

  test('distinct: two user turns of one conversation with the same text get different turns', () => {
    const third = [user('Draft it.'), answer, user('Yes, send it.'), answer, user('Yes, send it.')];
    const first = [user('Draft it.'), answer, user('Yes, send it.')];
    expect(deriveTurnId('chat', third)).not.toBe(deriveTurnId('chat', first));
  });

  test('stable: steps of a turn (tool calls and results left out) keep the turn', () => {
    const start = [user('Book it.')];
    const later = [user('Book it.'), undefined, undefined, undefined];
    expect(deriveTurnId('chat', later)).toBe(deriveTurnId('chat', start));
  });

  test('stable: a message sent again before any answer is the same turn (lost reply, re-sent)', () => {
    const once = [user('hi'), answer, user('Charge $5.')];
    const again = [user('hi'), answer, user('Charge $5.'), user('Charge $5.')];
    expect(deriveTurnId('chat', again)).toBe(deriveTurnId('chat', once));
    // After an answer, the same words are a new turn.
    const answered = [user('hi'), answer, user('Charge $5.'), answer, user('Charge $5.')];
    expect(deriveTurnId('chat', answered)).not.toBe(deriveTurnId('chat', once));
  });

  test('binary parts are told apart by their bytes', () => {
    const a = [user([{ type: 'image', image: new Uint8Array([1, 2, 3]) }])];
    const b = [user([{ type: 'image', image: new Uint8Array([1, 2, 4]) }])];
    expect(deriveTurnId('c', a)).not.toBe(deriveTurnId('c', b));
    expect(deriveTurnId('c', a)).toBe(
      deriveTurnId('c', [user([{ type: 'image', image: Buffer.from([1, 2, 3]) }])]),
    );
  });

  test('content is compared canonically (key order does not matter)', () => {
    expect(deriveTurnId('c', [user({ a: 1, b: 2 })])).toBe(
      deriveTurnId('c', [user({ b: 2, a: 1 })]),
    );
  });

  test('no user message: undefined; format tc_ + 43 base64url characters', () => {
    expect(deriveTurnId('c', [answer, undefined])).toBeUndefined();
    expect(deriveTurnId('c', [user('x')])).toMatch(/^tc_[A-Za-z0-9_-]{43}$/);
  });
});

describe('createTurnResolver', () => {
  type Info = { chat?: string; turn?: string; messages?: TranscriptEntry[] };
  const sources = {
    transcript: (call: Info) => call.messages,
    howTo: 'conversationId (your chat id) or turnId',
  };

  test('explicit wins, then the framework turn, then derived with the conversation', () => {
    const resolver = createTurnResolver<Info>(
      { turnId: (c) => c.turn, conversationId: (c) => c.chat },
      { ...sources, turn: (c) => (c.turn === undefined ? c.chat && `fw-${c.chat}` : undefined) },
      'test',
    );
    expect(resolver.resolve({ turn: 't1', chat: 'c' })).toEqual({
      turnId: 't1',
      source: 'explicit',
    });
    expect(resolver.resolve({ chat: 'c', messages: [user('x')] })).toEqual({
      turnId: 'fw-c',
      source: 'framework',
    });
  });

  test('messages without a conversation identity: refused, naming the option', () => {
    const resolver = createTurnResolver<Info>({}, sources, 'idempotentTools');
    expect(resolver.possible).toBe(false);
    let error: unknown;
    try {
      resolver.resolve({ messages: [user('Cancel my subscription.')] });
    } catch (e) {
      error = e;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ option: 'conversationId', retryable: false });
    expect((error as Error).message).toMatch(/idempotentTools: .*Pass conversationId/);
    // A tool that does not need a turn (business key): undefined, no error.
    expect(resolver.resolve({ messages: [] }, false)).toBeUndefined();
  });

  test('a conversation id with messages derives the turn', () => {
    const resolver = createTurnResolver<Info>({ conversationId: 'chat-1' }, sources, 'test');
    expect(resolver.possible).toBe(true);
    const resolved = resolver.resolve({ messages: [user('x')] });
    expect(resolved).toEqual({ turnId: deriveTurnId('chat-1', [user('x')]), source: 'derived' });
    expect(() => resolver.resolve({ messages: [answer] })).toThrow(/no user message/);
  });

  test('bad options and resolver results are ConfigurationErrors', () => {
    expect(() => createTurnResolver<Info>({ turnId: 5 as never }, sources, 't')).toThrow(
      expect.objectContaining({ option: 'turnId' }),
    );
    expect(() => createTurnResolver<Info>({ conversationId: '' }, sources, 't')).toThrow(
      expect.objectContaining({ option: 'conversationId' }),
    );
    const resolver = createTurnResolver<Info>({ turnId: () => '' }, sources, 't');
    expect(() => resolver.resolve({})).toThrow(expect.objectContaining({ option: 'turnId' }));
  });
});

describe('deriveTurnId: what answers a turn', () => {
  const partial: TranscriptEntry = { role: 'answer', partial: true };

  test('a turn answered only by a tool result: the same words after it are a new turn', () => {
    const once = [user('Yes, send it.')];
    const twice = [user('Yes, send it.'), answer, answer, user('Yes, send it.')];
    expect(deriveTurnId('chat', twice)).not.toBe(deriveTurnId('chat', once));
  });

  test('after only partial records, the same words cannot be told from a retry: refused, naming turnId', () => {
    expect(() => deriveTurnId('chat', [user('Pay.'), partial, partial, user('Pay.')])).toThrow(
      expect.objectContaining({ code: 'configuration', option: 'turnId' }),
    );
    // Other words are a new turn; an answer after the partial records settles it.
    const other = deriveTurnId('chat', [user('Pay.'), partial, user('Refund.')]);
    expect(other).toBe(deriveTurnId('chat', [user('Pay.'), answer, user('Refund.')]));
    expect(deriveTurnId('chat', [user('Pay.'), partial, answer, user('Pay.')])).toBe(
      deriveTurnId('chat', [user('Pay.'), answer, user('Pay.')]),
    );
    // An ambiguity of an earlier turn does not refuse a later one.
    expect(
      deriveTurnId('chat', [user('Pay.'), partial, user('Pay.'), answer, user('Thanks.')]),
    ).toMatch(/^tc_/);
  });
});

describe('idOf', () => {
  test('a non-empty string as it is, a number as its string', () => {
    expect(idOf('chat-1')).toBe('chat-1');
    expect(idOf(42)).toBe('42');
    expect(idOf(0)).toBe('0');
  });

  test('anything else is no id', () => {
    for (const value of ['', undefined, null, true, {}, ['chat-1']]) {
      expect(idOf(value)).toBeUndefined();
    }
  });
});
