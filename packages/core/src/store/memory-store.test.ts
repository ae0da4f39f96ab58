/**
 * The memory store answers an operation sent again as it answered the first time (the full
 * contract is proven by the conformance suite of `@idempotent-tools/testing`; these run on the
 * source, without a build).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { createMemoryStore } from './memory-store.js';

function setup() {
  let now = 1_000_000;
  const store = createMemoryStore({ now: () => now });
  const advance = (ms: number) => {
    now += ms;
  };
  const input = { key: 'k', fingerprint: 'fp', token: randomUUID(), leaseMs: 100, ttlMs: 1000 };
  return { store, advance, input };
}

describe('memory store: operations sent again', () => {
  test('a claim sent again with its own token is acquired, the record unchanged', async () => {
    const { store, input } = setup();
    const first = await store.claim(input);
    const again = await store.claim(input);
    expect(again).toEqual({ status: 'acquired', token: input.token, record: first.record });
    expect((await store.claim({ ...input, token: randomUUID() })).status).toBe('in_progress');
    expect(store.size).toBe(1);
  });

  test('after its lease ran out, a claim with its own token renews the lease; a takeover then fails', async () => {
    const { store, advance, input } = setup();
    const first = await store.claim(input);
    advance(150);
    const again = await store.claim(input);
    expect(again.status).toBe('acquired');
    expect(again.record.leaseExpiresAt).toBe(first.record.leaseExpiresAt + 150);
    expect(again.record.createdAt).toBe(first.record.createdAt);
    const takeover = {
      key: 'k',
      staleToken: input.token,
      token: randomUUID(),
      leaseMs: 100,
      ttlMs: 1000,
    };
    expect(await store.takeover(takeover)).toBe(false);
  });

  test('complete sent again: true with the same state and outcome, false otherwise', async () => {
    const { store, advance, input } = setup();
    await store.claim(input);
    const done = {
      key: 'k',
      token: input.token,
      state: 'completed',
      outcome: '"x"',
      ttlMs: 1000,
    } as const;
    expect(await store.complete(done)).toBe(true);
    const before = await store.get('k');
    advance(10);
    expect(await store.complete(done)).toBe(true);
    expect(await store.complete({ ...done, outcome: '"y"' })).toBe(false);
    expect(await store.complete({ ...done, state: 'failed' })).toBe(false);
    expect(await store.complete({ ...done, token: randomUUID() })).toBe(false);
    expect(await store.get('k')).toEqual(before);
  });

  test('takeover sent again by the new owner: true, nothing changed', async () => {
    const { store, advance, input } = setup();
    await store.claim(input);
    advance(150);
    const takeover = {
      key: 'k',
      staleToken: input.token,
      token: randomUUID(),
      leaseMs: 100,
      ttlMs: 1000,
    };
    expect(await store.takeover(takeover)).toBe(true);
    const before = await store.get('k');
    advance(10);
    expect(await store.takeover(takeover)).toBe(true);
    expect(await store.get('k')).toEqual(before);
    expect(await store.takeover({ ...takeover, token: randomUUID() })).toBe(false);
  });
});
