/**
 * `onReplay` (issue 20): a per-tool hook that shapes what a replay returns; the stored outcome
 * never changes.
 */
import { describe, expect, test } from 'vitest';
import { InvalidInputError, ReplayedFailureError } from '../errors/index.js';
import { createIdempotency, type ReplayContext, type ToolPolicy } from '../executor.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore } from '../store/memory-store.js';

interface Link {
  url: string;
  signedAt: number;
  originalRanAt?: number;
}

function setup() {
  const store = createMemoryStore();
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({ store, onEvent: (event) => events.push(event) });
  let runs = 0;
  const tool = async (args: { file: string }): Promise<Link> => {
    runs++;
    return { url: `https://files.example/${args.file}?sig=${runs}`, signedAt: runs };
  };
  const contexts: ReplayContext[] = [];
  let signed = 100;
  const policy: ToolPolicy<{ file: string }, Link> = {
    onReplay: (value, context) => {
      contexts.push(context);
      signed++;
      return { ...value, url: `${value.url.split('?')[0]}?sig=${signed}`, signedAt: signed };
    },
  };
  const call = { toolName: 'share_file', turnId: 'turn-1', args: { file: 'report.pdf' } };
  return { store, events, idempotency, tool, policy, call, contexts, runs: () => runs };
}

describe('onReplay', () => {
  test('shapes every replay from the stored outcome, which never changes; the first run is not shaped', async () => {
    const { store, idempotency, tool, policy, call, contexts, runs } = setup();
    const first = await idempotency.run(call, tool, policy);
    expect(first).toMatchObject({ replayed: false, outcome: 'executed' });
    expect(first.value).toEqual({ url: 'https://files.example/report.pdf?sig=1', signedAt: 1 });
    expect(contexts).toHaveLength(0);
    const stored = (await store.get(first.key))?.outcome;

    const second = await idempotency.run(call, tool, policy);
    const third = await idempotency.run(call, tool, policy);
    expect(runs()).toBe(1);
    expect(second).toMatchObject({ replayed: true, outcome: 'replayed', key: first.key });
    expect(second.value).toEqual({
      url: 'https://files.example/report.pdf?sig=101',
      signedAt: 101,
    });
    // Each replay starts from the stored value, not from the previous replay's shape.
    expect(third.value).toEqual({ url: 'https://files.example/report.pdf?sig=102', signedAt: 102 });
    expect((await store.get(first.key))?.outcome).toBe(stored);

    const record = await store.get(first.key);
    expect(contexts[0]).toEqual({
      key: first.key,
      toolName: 'share_file',
      turnId: 'turn-1',
      scope: undefined,
      outcome: 'replayed',
      createdAt: record?.createdAt,
      completedAt: record?.completedAt,
      expiresAt: record?.expiresAt,
    });
    expect(typeof contexts[0]?.completedAt).toBe('number');
  });

  test('an async hook, e.g. to add when the original ran', async () => {
    const { idempotency, tool, call } = setup();
    const policy: ToolPolicy<{ file: string }, Link> = {
      onReplay: async (value, context) => {
        await new Promise((resolve) => setImmediate(resolve));
        return { ...value, originalRanAt: context.createdAt };
      },
    };
    const first = await idempotency.run(call, tool, policy);
    expect(first.value.originalRanAt).toBeUndefined();
    const again = await idempotency.run(call, tool, policy);
    expect(again.value.originalRanAt).toEqual(expect.any(Number));
    expect(again.value.url).toBe(first.value.url);
  });

  test('the hook gets its own copy: changing it changes no later replay', async () => {
    const { idempotency, tool, call } = setup();
    const policy: ToolPolicy<{ file: string }, Link> = {
      onReplay: (value) => {
        value.url = 'changed';
        return value;
      },
    };
    await idempotency.run(call, tool, policy);
    expect((await idempotency.run(call, tool, policy)).value.url).toBe('changed');
    const plain = await idempotency.run(call, tool);
    expect(plain.value.url).toBe('https://files.example/report.pdf?sig=1');
  });

  test('a duplicate that waited for the running call is shaped too (outcome waited)', async () => {
    const store = createMemoryStore();
    let claims = 0;
    const claim = store.claim.bind(store);
    store.claim = (input) => {
      claims++;
      return claim(input);
    };
    const idempotency = createIdempotency({ store });
    const { call, policy, contexts } = setup();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    const slow = async (): Promise<Link> => {
      runs++;
      await gate;
      return { url: 'https://files.example/report.pdf?sig=1', signedAt: 1 };
    };
    const first = idempotency.run(call, slow, policy);
    // The duplicate is sent once the first holds the claim.
    while (runs === 0) await new Promise((resolve) => setImmediate(resolve));
    const duplicate = idempotency.run(call, slow, policy);
    // The duplicate has met the running call (its claim answered in progress) and waits; a wait
    // is counted in whole ms, so let at least one pass before the holder finishes.
    while (claims < 2) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setTimeout(resolve, 5));
    release();
    const [a, b] = await Promise.all([first, duplicate]);
    expect(runs).toBe(1);
    expect(a.replayed).toBe(false);
    expect(b).toMatchObject({ replayed: true, outcome: 'waited' });
    expect(b.value.signedAt).toBe(101);
    expect(contexts.map((c) => c.outcome)).toEqual(['waited']);
  });

  test('a hook that throws fails that call with its error; the record stays and the next replay works', async () => {
    const { store, events, idempotency, tool, call } = setup();
    let fail = true;
    const policy: ToolPolicy<{ file: string }, Link> = {
      onReplay: (value) => {
        if (fail) throw new Error('signing service down');
        return value;
      },
    };
    const first = await idempotency.run(call, tool, policy);
    const stored = (await store.get(first.key))?.outcome;
    await expect(idempotency.run(call, tool, policy)).rejects.toThrow('signing service down');
    expect(events.at(-1)).toMatchObject({ outcome: 'failed', errorCode: 'on_replay_error' });
    expect((await store.get(first.key))?.outcome).toBe(stored);
    fail = false;
    const again = await idempotency.run(call, tool, policy);
    expect(again).toMatchObject({ replayed: true, value: first.value });
    expect(events.at(-1)).toMatchObject({ outcome: 'replayed' });
  });

  test('a synchronous throw is the same failure (not an internal error)', async () => {
    const { events, idempotency, tool, call } = setup();
    const policy: ToolPolicy<{ file: string }, Link> = {
      onReplay: () => {
        throw new TypeError('bad hook');
      },
    };
    await idempotency.run(call, tool, policy);
    await expect(idempotency.run(call, tool, policy)).rejects.toThrow(TypeError);
    expect(events.at(-1)).toMatchObject({ outcome: 'failed', errorCode: 'on_replay_error' });
  });

  test('a stored terminal failure is replayed as a failure; the hook is not called', async () => {
    const { idempotency, call } = setup();
    let called = 0;
    const policy: ToolPolicy<{ file: string }, Link> = {
      isTerminalError: () => true,
      onReplay: (value) => {
        called++;
        return value;
      },
    };
    const failing = async (): Promise<Link> => {
      throw new Error('file not found');
    };
    await expect(idempotency.run(call, failing, policy)).rejects.toThrow('file not found');
    await expect(idempotency.run(call, failing, policy)).rejects.toBeInstanceOf(
      ReplayedFailureError,
    );
    expect(called).toBe(0);
  });

  test('onReplay that is not a function is refused before anything runs; it is per tool only', async () => {
    const { idempotency, tool, call, runs } = setup();
    const bad = { onReplay: 'refresh' } as unknown as ToolPolicy<{ file: string }, Link>;
    await expect(idempotency.run(call, tool, bad)).rejects.toMatchObject({
      field: 'onReplay',
    });
    expect(runs()).toBe(0);
    expect(() =>
      createIdempotency({
        store: createMemoryStore(),
        onReplay: (v: unknown) => v,
      } as never),
    ).toThrow(InvalidInputError);
  });
});
