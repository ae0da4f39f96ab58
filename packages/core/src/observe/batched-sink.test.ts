import { describe, expect, test } from 'vitest';
import { createBatchedSink } from './batched-sink.js';
import type { IdempotencyEvent } from './events.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function event(i: number): IdempotencyEvent {
  return {
    key: `k${i}`,
    toolName: 't',
    scope: undefined,
    turnId: 'x',
    outcome: 'executed',
    store: 'memory',
    startedAt: i,
    endedAt: i,
    durationMs: 0,
    argsFingerprint: 'fp',
    argsBytes: 2,
  };
}

describe('createBatchedSink', () => {
  test('writes full batches at once and the rest after the interval, in order', async () => {
    const batches: string[][] = [];
    const sink = createBatchedSink({
      write: (batch) => void batches.push(batch.map((e) => e.key)),
      batchSize: 3,
      flushIntervalMs: 20,
    });
    for (let i = 0; i < 7; i++) sink.onEvent(event(i));
    await sleep(0);
    expect(batches).toEqual([
      ['k0', 'k1', 'k2'],
      ['k3', 'k4', 'k5'],
    ]);
    expect(sink.pending).toBe(1);
    await sleep(40);
    expect(batches.at(-1)).toEqual(['k6']);
    expect(sink.pending).toBe(0);
  });

  test('flush writes everything now; one write at a time', async () => {
    let running = 0;
    let most = 0;
    const written: string[] = [];
    const sink = createBatchedSink({
      write: async (batch) => {
        running++;
        most = Math.max(most, running);
        await sleep(5);
        written.push(...batch.map((e) => e.key));
        running--;
      },
      batchSize: 2,
      flushIntervalMs: 10_000,
    });
    for (let i = 0; i < 9; i++) sink.onEvent(event(i));
    await sink.flush();
    expect(written).toEqual(Array.from({ length: 9 }, (_, i) => `k${i}`));
    expect(most).toBe(1);
  });

  test('a failed write drops its batch, reports it, and the next writes go on', async () => {
    const errors: number[] = [];
    let fail = true;
    const written: string[] = [];
    const sink = createBatchedSink({
      write: async (batch) => {
        if (fail) throw new Error('db down');
        written.push(...batch.map((e) => e.key));
      },
      onError: (_e, batch) => errors.push(batch.length),
    });
    sink.onEvent(event(1));
    await sink.flush();
    fail = false;
    sink.onEvent(event(2));
    await sink.flush();
    expect(errors).toEqual([1]);
    expect(written).toEqual(['k2']);
    expect(sink.dropped).toBe(1);
  });

  test('a slow backend: at most maxBuffered events held, the rest dropped and counted', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const sink = createBatchedSink({ write: () => gate, batchSize: 5, maxBuffered: 10 });
    for (let i = 0; i < 25; i++) sink.onEvent(event(i));
    expect(sink.pending).toBe(10);
    expect(sink.dropped).toBe(15);
    release();
    await sink.flush();
    expect(sink.pending).toBe(0);
  });

  test('close flushes, then drops', async () => {
    const written: string[] = [];
    const sink = createBatchedSink({ write: (b) => void written.push(...b.map((e) => e.key)) });
    sink.onEvent(event(1));
    await sink.close();
    sink.onEvent(event(2));
    await sink.flush();
    expect(written).toEqual(['k1']);
    expect(sink.dropped).toBe(1);
  });

  test('bad options', () => {
    expect(() => createBatchedSink({} as never)).toThrow(/write/);
    expect(() => createBatchedSink({ write: () => {}, batchSize: 0 })).toThrow(RangeError);
  });
});
