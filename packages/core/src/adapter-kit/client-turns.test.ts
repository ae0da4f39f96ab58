import { describe, expect, test } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import { checkSessionWindow, createClientTurns } from './client-turns.js';

type Info = { meta?: Record<string, unknown>; session?: string; client?: string };
const turns = (window: number | false = 1000, ttl?: number) =>
  createClientTurns<Info>({
    ...{ window, ttl, keyField: 'key', turnField: 'turn' },
    label: (field) => `meta.${field}`,
    meta: (call) => call.meta,
    task: (call) => call.meta?.task,
    session: (call) => call.session,
    who: (call) => [call.client],
  });

describe('createClientTurns', () => {
  test('the key first, then the turn id, then the task, then the session; scoped by the client', () => {
    const t = turns();
    const meta = { key: 'k', turn: 't', task: 'x' };
    expect(t.of({ meta, client: 'a' })).toEqual({
      kind: 'key',
      turnId: 'key:["a","k"]',
      key: ['client-key', 'a', 'k'],
    });
    expect(t.turn({ meta: { turn: 't', task: 'x' } })).toBe('turn:t');
    expect(t.turn({ meta: { task: 'x' }, client: 'a' })).toBe('task:["a","x"]');
    expect(t.turn({ session: 's', client: 'a' })).toBe('session:s');
    expect(t.turn({})).toBeUndefined();
    expect(turns(false).turn({ session: 's' })).toBeUndefined();
  });

  test('a key or turn id that is not a non-empty string is refused, naming the field', () => {
    const t = turns();
    expect(() => t.of({ meta: { turn: '' } })).toThrow(InvalidInputError);
    expect(() => t.of({ meta: { key: 7 } })).toThrow(/meta\.key must be a non-empty string, got 7/);
    // a good key wins before a bad turn id is read
    expect(t.turn({ meta: { key: 'k', turn: 3 } })).toBe('key:k');
  });

  test('the policy: a key is the business key; a session turn is kept for the window', () => {
    const t = turns(1000, 5000);
    const keyed = t.policy({ meta: { key: 'k' } }, undefined, { ttl: 9 });
    expect(keyed.ttl).toBe(9);
    expect((keyed.businessKey as (args: unknown) => unknown)({})).toEqual(['client-key', 'k']);
    const own = () => 'mine';
    expect(t.policy({ meta: { key: 'k' } }, undefined, { businessKey: own }).businessKey).toBe(own);
    const session = { session: 's' };
    const framework = { source: 'framework' } as never;
    expect(t.policy(session, framework, undefined).ttl).toBe(1000);
    expect(t.policy(session, framework, { ttl: 400 }).ttl).toBe(400);
    expect(t.policy(session, { source: 'explicit' } as never, undefined).ttl).toBeUndefined();
    expect(t.policy({ meta: { turn: 't' } }, framework, undefined)).toEqual({});
  });

  test('checkSessionWindow: a whole number of ms or false', () => {
    expect(checkSessionWindow(false)).toBeUndefined();
    expect(checkSessionWindow(300_000)).toBeUndefined();
    expect(checkSessionWindow(1.5)).toMatch(/whole number of milliseconds/);
    expect(checkSessionWindow(0)).toMatch(/got 0/);
    expect(checkSessionWindow(true)).toMatch(/got true/);
  });
});
