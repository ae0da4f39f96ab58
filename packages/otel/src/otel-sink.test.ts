import {
  combineSinks,
  createIdempotency,
  createMemoryStore,
  createReplayRateMonitor,
  DriftError,
  type IdempotencyEvent,
} from '@idempotent-tools/core';
import { context, metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createOtelSink, DURATION_BUCKETS, OTEL_NAMES, observeReplayRate } from './index.js';

const SECRET = 'sk_live_never_recorded';

/** The real SDK with in-memory exporters. */
function sdk() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spans)],
  });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracer = tracerProvider.getTracer('test');
  const meter = meterProvider.getMeter('test');
  /** Every metric of the last collection, by name. */
  const collect = async () => {
    exporter.reset();
    await reader.forceFlush();
    const all = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    return new Map(all.map((m) => [m.descriptor.name, m]));
  };
  return { spans, tracer, meter, collect, tracerProvider, meterProvider };
}

const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  context.disable();
});

const call = (turnId = 't1', args: unknown = { card: SECRET }) => ({
  toolName: 'charge_card',
  turnId,
  scope: 'acme',
  args,
});

describe('createOtelSink: spans', () => {
  test('a span per call, from its start to its end, with the outcome as attributes', async () => {
    const { spans, tracer, meter } = sdk();
    const events: Array<{ startedAt: number; endedAt: number; key: string }> = [];
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: combineSinks(createOtelSink({ tracer, meter }), (e) => events.push(e)),
      exposeArgs: true, // the sink never records them anyway
    });
    await idempotency.run(call(), async () => ({ secret: SECRET }));
    await idempotency.run(call(), async () => ({ secret: SECRET }));
    const finished = spans.getFinishedSpans();
    expect(finished.map((s) => s.name)).toEqual([
      'idempotent_tools.run charge_card',
      'idempotent_tools.run charge_card',
    ]);
    const [executed, replayed] = finished;
    const { key, fingerprint } = idempotency.keyOf(call());
    expect(executed!.attributes).toEqual({
      'gen_ai.tool.name': 'charge_card',
      'idempotent_tools.outcome': 'executed',
      'idempotent_tools.replayed': false,
      'idempotent_tools.store': 'memory',
      'idempotent_tools.key': key,
      'idempotent_tools.turn_id': 't1',
      'idempotent_tools.scope': 'acme',
      'idempotent_tools.args.fingerprint': fingerprint,
      'idempotent_tools.args.bytes': expect.any(Number),
      'idempotent_tools.result.bytes': Buffer.byteLength(JSON.stringify({ v: { secret: SECRET } })),
    });
    expect(replayed!.attributes).toMatchObject({
      'idempotent_tools.outcome': 'replayed',
      'idempotent_tools.replayed': true,
    });
    expect(executed!.status.code).toBe(SpanStatusCode.UNSET);
    // Times are the call's own, in ms.
    const toMs = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;
    expect(Math.round(toMs(executed!.startTime))).toBe(events[0]!.startedAt);
    expect(Math.round(toMs(executed!.endTime))).toBe(events[0]!.endedAt);
    expect(JSON.stringify(finished.map((s) => s.attributes))).not.toContain(SECRET);
  });

  test('errors: status ERROR and error.type', async () => {
    const { spans, tracer, meter } = sdk();
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: createOtelSink({ tracer, meter }),
    });
    const policy = { businessKey: () => 'same' };
    await idempotency.run(call('t', { a: 1 }), async () => 1, policy);
    await expect(idempotency.run(call('t', { a: 2 }), async () => 2, policy)).rejects.toSatisfy(
      DriftError.isInstance,
    );
    await expect(
      idempotency.run(call('t2'), async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const [, drift, failed] = spans.getFinishedSpans();
    expect(drift!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'drift (drift)' });
    expect(drift!.attributes['error.type']).toBe('drift');
    expect(failed!.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed!.attributes).toMatchObject({
      'idempotent_tools.outcome': 'failed',
      'error.type': 'tool_error',
    });
  });

  test('the span is a child of the span active when the call ran', async () => {
    const { spans, tracer, meter } = sdk();
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: createOtelSink({ tracer, meter }),
    });
    await tracer.startActiveSpan('agent turn', async (turn) => {
      await idempotency.run(call(), async () => 1);
      turn.end();
    });
    const [child, parent] = spans.getFinishedSpans();
    expect(parent!.name).toBe('agent turn');
    expect(child!.spanContext().traceId).toBe(parent!.spanContext().traceId);
    expect(child!.parentSpanContext?.spanId).toBe(parent!.spanContext().spanId);
  });

  test('options: recordScope false, extra attributes, span name, spans off', async () => {
    const { spans, tracer, meter, collect } = sdk();
    const sink = createOtelSink({
      tracer,
      meter,
      recordScope: false,
      attributes: { 'service.component': 'agent' },
      spanName: (e) => `tool ${e.toolName}`,
    });
    const idempotency = createIdempotency({ store: createMemoryStore(), onEvent: sink });
    await idempotency.run(call(), async () => 1);
    const [span] = spans.getFinishedSpans();
    expect(span!.name).toBe('tool charge_card');
    expect(span!.attributes['service.component']).toBe('agent');
    expect(span!.attributes).not.toHaveProperty('idempotent_tools.scope');
    expect(span!.attributes).not.toHaveProperty('idempotent_tools.turn_id');

    const quiet = createOtelSink({ tracer, meter, spans: false, metrics: false });
    const countCalls = async () =>
      (await collect())
        .get(OTEL_NAMES.calls)
        ?.dataPoints.reduce((n, p) => n + (p.value as number), 0);
    const before = await countCalls();
    quiet({
      key: 'v1_x',
      toolName: 'x',
      scope: undefined,
      turnId: 't',
      outcome: 'executed',
      store: 'memory',
      startedAt: Date.now(),
      endedAt: Date.now(),
      durationMs: 0,
      argsFingerprint: 'fp',
      argsBytes: 2,
    });
    expect(spans.getFinishedSpans()).toHaveLength(1);
    expect(await countCalls()).toBe(before);
  });
});

describe('createOtelSink: metrics', () => {
  test('a counter of calls by tool and outcome, a duration histogram in seconds', async () => {
    const { tracer, meter, collect } = sdk();
    const events: IdempotencyEvent[] = [];
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: combineSinks(createOtelSink({ tracer, meter }), (e) => events.push(e)),
    });
    await idempotency.run(call(), async () => 1);
    for (let i = 0; i < 3; i++) await idempotency.run(call(), async () => 1);
    await idempotency
      .run(call('t2'), async () => {
        throw new Error('boom');
      })
      .catch(() => undefined);

    const collected = await collect();
    const counter = collected.get(OTEL_NAMES.calls)!;
    expect(counter.descriptor.unit).toBe('{call}');
    expect(counter.dataPointType).toBe(DataPointType.SUM);
    const byOutcome = Object.fromEntries(
      counter.dataPoints.map((p) => [p.attributes['idempotent_tools.outcome'], p.value]),
    );
    expect(byOutcome).toEqual({ executed: 1, replayed: 3, failed: 1 });
    for (const point of counter.dataPoints) {
      // Bounded cardinality: no key, scope or turn on metrics.
      expect(Object.keys(point.attributes).sort()).toEqual(
        expect.arrayContaining(['gen_ai.tool.name', 'idempotent_tools.outcome']),
      );
      expect(point.attributes).not.toHaveProperty('idempotent_tools.key');
      expect(point.attributes).not.toHaveProperty('idempotent_tools.scope');
    }
    const failed = counter.dataPoints.find(
      (p) => p.attributes['idempotent_tools.outcome'] === 'failed',
    );
    expect(failed?.attributes['error.type']).toBe('tool_error');

    const histogram = collected.get(OTEL_NAMES.duration)!;
    expect(histogram.descriptor.unit).toBe('s');
    expect(histogram.dataPointType).toBe(DataPointType.HISTOGRAM);
    const replayed = histogram.dataPoints.find(
      (p) => p.attributes['idempotent_tools.outcome'] === 'replayed',
    )!;
    const value = replayed.value as {
      count: number;
      sum: number;
      buckets: { boundaries: number[] };
    };
    expect(value.count).toBe(3);
    // In seconds: the events' own durations (in ms) / 1000, however long the replays took here.
    const replayedMs = events
      .filter((e) => e.outcome === 'replayed')
      .reduce((sum, e) => sum + e.durationMs, 0);
    expect(value.sum).toBeCloseTo(replayedMs / 1000, 9);
    expect(value.buckets.boundaries).toEqual(DURATION_BUCKETS);
  });

  test('the global providers are used by default', async () => {
    const { tracerProvider, meterProvider, spans, collect } = sdk();
    trace.setGlobalTracerProvider(tracerProvider);
    metrics.setGlobalMeterProvider(meterProvider);
    try {
      const idempotency = createIdempotency({
        store: createMemoryStore(),
        onEvent: createOtelSink(),
      });
      await idempotency.run(call(), async () => 1);
      expect(spans.getFinishedSpans()).toHaveLength(1);
      expect(spans.getFinishedSpans()[0]!.instrumentationScope.name).toBe('@idempotent-tools/otel');
      expect((await collect()).get(OTEL_NAMES.calls)?.dataPoints[0]?.value).toBe(1);
    } finally {
      trace.disable();
      metrics.disable();
    }
  });
});

describe('observeReplayRate', () => {
  test('the monitor window as gauges; alerting flips with a retry storm; stop unregisters', async () => {
    const { meter, collect } = sdk();
    let now = 1_000_000;
    const monitor = createReplayRateMonitor({ threshold: 0.5, minCalls: 4, now: () => now });
    const stop = observeReplayRate(monitor, { meter, attributes: { 'gen_ai.tool.name': 'all' } });
    const idempotency = createIdempotency({ store: createMemoryStore(), onEvent: monitor.onEvent });
    const gauges = async () => {
      const c = await collect();
      const value = (name: string) => c.get(name)?.dataPoints[0]?.value;
      return {
        rate: value(OTEL_NAMES.replayRate),
        alerting: value(OTEL_NAMES.replayRateAlerting),
        calls: value(OTEL_NAMES.windowCalls),
        attributes: c.get(OTEL_NAMES.replayRate)?.dataPoints[0]?.attributes,
      };
    };
    await idempotency.run(call('a'), async () => 1);
    await idempotency.run(call('b'), async () => 1);
    expect(await gauges()).toEqual({
      rate: 0,
      alerting: 0,
      calls: 2,
      attributes: { 'gen_ai.tool.name': 'all' },
    });
    for (let i = 0; i < 6; i++) await idempotency.run(call('b'), async () => 1);
    expect(await gauges()).toMatchObject({ rate: 0.75, alerting: 1, calls: 8 });
    // Traffic stops; the collection itself ends the alert once the window is empty.
    now += 120_000;
    expect(await gauges()).toMatchObject({ rate: 0, alerting: 0, calls: 0 });
    stop();
    for (let i = 0; i < 6; i++) await idempotency.run(call('b'), async () => 1);
    expect(monitor.snapshot().rate).toBe(1);
    // No longer observed: the gauges keep their last values.
    expect(await gauges()).toMatchObject({ rate: 0, alerting: 0, calls: 0 });
  });
});
