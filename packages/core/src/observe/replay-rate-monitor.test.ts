import { describe, expect, test } from 'vitest';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import type { CallOutcome, IdempotencyEvent } from './events.js';
import { createReplayRateMonitor, type ReplayRateSnapshot } from './replay-rate-monitor.js';

function event(outcome: CallOutcome, overrides: Partial<IdempotencyEvent> = {}): IdempotencyEvent {
  return {
    key: 'v1_k',
    toolName: 'charge',
    scope: undefined,
    turnId: 't',
    outcome,
    store: 'memory',
    startedAt: 0,
    endedAt: 0,
    durationMs: 0,
    argsFingerprint: 'fp',
    argsBytes: 2,
    ...overrides,
  };
}

/** A monitor on a clock the test moves, recording its alerts and recoveries. */
function setup(options: Parameters<typeof createReplayRateMonitor>[0] = {}) {
  let now = 1_000_000;
  const alerts: ReplayRateSnapshot[] = [];
  const recoveries: ReplayRateSnapshot[] = [];
  const monitor = createReplayRateMonitor({
    threshold: 0.5,
    minCalls: 10,
    windowMs: 60_000,
    buckets: 12,
    now: () => now,
    onAlert: (s) => alerts.push(s),
    onRecover: (s) => recoveries.push(s),
    ...options,
  });
  const send = (count: number, outcome: CallOutcome, extra: Partial<IdempotencyEvent> = {}) => {
    for (let i = 0; i < count; i++) monitor.onEvent(event(outcome, extra));
  };
  return {
    monitor,
    alerts,
    recoveries,
    send,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('createReplayRateMonitor', () => {
  test('no alert below the threshold', () => {
    const { send, alerts, monitor } = setup();
    send(60, 'executed');
    send(40, 'replayed');
    expect(alerts).toHaveLength(0);
    expect(monitor.snapshot()).toMatchObject({
      calls: 100,
      replays: 40,
      rate: 0.4,
      alerting: false,
    });
  });

  test('a spike over the threshold alerts once, with the window in the snapshot', () => {
    const { send, alerts, monitor } = setup();
    send(10, 'executed');
    send(10, 'replayed'); // reaches 0.5 at the 20th call
    send(30, 'waited'); // still alerting: no second alert
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({
      calls: 20,
      replays: 10,
      rate: 0.5,
      alerting: true,
      alerts: 1,
      threshold: 0.5,
      minCalls: 10,
      windowMs: 60_000,
    });
    expect(monitor.snapshot()).toMatchObject({ calls: 50, replays: 40, alerting: true });
  });

  test('too few calls never alert, whatever the rate', () => {
    const { send, alerts } = setup();
    send(9, 'replayed');
    expect(alerts).toHaveLength(0);
    send(1, 'replayed');
    expect(alerts).toHaveLength(1);
  });

  test('replays are replayed, waited, reconciled and replayed terminal failures', () => {
    const { send, monitor } = setup({ minCalls: 1000 });
    send(1, 'replayed');
    send(1, 'waited');
    send(1, 'reconciled');
    send(1, 'failed', { errorCode: 'replayed_failure' });
    send(1, 'failed', { errorCode: 'tool_error' });
    for (const o of ['executed', 'drift', 'in-progress', 'persist-failed'] as const) send(1, o);
    send(1, 'outcome-unknown');
    send(1, 'store-unavailable');
    expect(monitor.snapshot()).toMatchObject({ calls: 11, replays: 4 });
  });

  test('recovers when the rate falls below recoverBelow (hysteresis), then can alert again', () => {
    const { send, alerts, recoveries, advance } = setup({ recoverBelow: 0.3 });
    send(20, 'replayed');
    expect(alerts).toHaveLength(1);
    // 20 replays out of 50: 0.4, below the threshold but not below recoverBelow: still alerting.
    send(30, 'executed');
    expect(recoveries).toHaveLength(0);
    send(20, 'executed'); // 20 / 67 < 0.3 at the 17th
    expect(recoveries).toHaveLength(1);
    expect(recoveries[0]).toMatchObject({ alerting: false, calls: 67, replays: 20 });
    // The old calls slide out of the window; a new spike alerts again.
    advance(61_000);
    send(10, 'replayed');
    expect(alerts).toHaveLength(2);
    expect(alerts[1]).toMatchObject({ calls: 10, replays: 10, alerts: 2 });
  });

  test('the window slides: old calls leave it bucket by bucket', () => {
    const { send, advance, monitor } = setup();
    send(10, 'executed'); // bucket 0
    advance(30_000);
    send(10, 'replayed'); // 30 s later
    expect(monitor.snapshot()).toMatchObject({ calls: 20, replays: 10 });
    advance(35_000); // the first 10 are now 65 s old: out
    expect(monitor.snapshot()).toMatchObject({ calls: 10, replays: 10, rate: 1 });
    advance(30_000); // all out
    expect(monitor.snapshot()).toMatchObject({ calls: 0, replays: 0, rate: 0 });
  });

  test('check() ends an alert once traffic stops and the window empties', () => {
    const { send, advance, monitor, recoveries } = setup();
    send(20, 'replayed');
    expect(monitor.snapshot().alerting).toBe(true);
    advance(30_000);
    expect(monitor.check().alerting).toBe(true); // still in the window
    advance(40_000);
    const s = monitor.check();
    expect(s).toMatchObject({ alerting: false, calls: 0 });
    expect(recoveries).toHaveLength(1);
    expect(monitor.check().alerting).toBe(false);
    expect(recoveries).toHaveLength(1);
  });

  test('a filter narrows the monitor (one tool)', () => {
    const { send, monitor } = setup({ filter: (e) => e.toolName === 'deploy' });
    send(5, 'replayed', { toolName: 'deploy' });
    send(50, 'replayed', { toolName: 'other' });
    expect(monitor.snapshot().calls).toBe(5);
  });

  test('handlers that throw break nothing; reset forgets everything', () => {
    const { monitor } = setup({
      onAlert: () => {
        throw new Error('pager down');
      },
    });
    for (let i = 0; i < 20; i++) monitor.onEvent(event('replayed'));
    expect(monitor.snapshot()).toMatchObject({ alerting: true, alerts: 1 });
    monitor.reset();
    expect(monitor.snapshot()).toMatchObject({ alerting: false, calls: 0 });
  });

  test('bad options are RangeErrors', () => {
    expect(() => createReplayRateMonitor({ threshold: 0 })).toThrow(RangeError);
    expect(() => createReplayRateMonitor({ threshold: 1.5 })).toThrow(RangeError);
    expect(() => createReplayRateMonitor({ threshold: 0.3, recoverBelow: 0.5 })).toThrow(
      /recoverBelow/,
    );
    expect(() => createReplayRateMonitor({ minCalls: 0 })).toThrow(RangeError);
    expect(() => createReplayRateMonitor({ windowMs: 1.5 })).toThrow(RangeError);
  });

  test('fed by the executor: a retry storm raises the alert', async () => {
    const alerts: ReplayRateSnapshot[] = [];
    const monitor = createReplayRateMonitor({
      threshold: 0.5,
      minCalls: 10,
      onAlert: (s) => alerts.push(s),
    });
    const idempotency = createIdempotency({ store: createMemoryStore(), onEvent: monitor.onEvent });
    for (let turn = 0; turn < 5; turn++) {
      await idempotency.run({ toolName: 't', turnId: `${turn}`, args: {} }, async () => turn);
    }
    expect(alerts).toHaveLength(0);
    // The model retries the last call over and over.
    for (let i = 0; i < 10; i++) {
      await idempotency.run({ toolName: 't', turnId: '4', args: {} }, async () => 4);
    }
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ calls: 10, replays: 5 });
  });
});
