import {
  type EventHandler,
  type IdempotencyEvent,
  isReplay,
  type ReplayRateMonitor,
} from '@idempotent-tools/core';
import {
  type Attributes,
  context,
  type Meter,
  metrics,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';

/** Instrumentation scope of the tracer and meter this package gets by default. */
export const INSTRUMENTATION_NAME = '@idempotent-tools/otel';
export const INSTRUMENTATION_VERSION = '0.1.0';

/** Names of the instruments and attributes (stable: dashboards and alerts depend on them). */
export const OTEL_NAMES = {
  calls: 'idempotent_tools.calls',
  duration: 'idempotent_tools.call.duration',
  replayRate: 'idempotent_tools.replay_rate',
  replayRateAlerting: 'idempotent_tools.replay_rate.alerting',
  windowCalls: 'idempotent_tools.replay_rate.window.calls',
  attributes: {
    toolName: 'gen_ai.tool.name',
    outcome: 'idempotent_tools.outcome',
    replayed: 'idempotent_tools.replayed',
    store: 'idempotent_tools.store',
    key: 'idempotent_tools.key',
    turnId: 'idempotent_tools.turn_id',
    scope: 'idempotent_tools.scope',
    argsFingerprint: 'idempotent_tools.args.fingerprint',
    argsBytes: 'idempotent_tools.args.bytes',
    resultBytes: 'idempotent_tools.result.bytes',
    waitedMs: 'idempotent_tools.waited_ms',
    errorType: 'error.type',
  },
} as const;

/** Bucket boundaries of the duration histogram, in seconds (a replay is ~1 ms, a tool seconds). */
export const DURATION_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
];

/** Outcomes that end the call without an error (span status OK); the others are ERROR. An unguarded call (fail-open) ran: OK, with its outcome attribute. */
const SUCCESS = new Set(['executed', 'replayed', 'waited', 'reconciled', 'unguarded']);

export interface OtelSinkOptions {
  /**
   * The tracer for the spans.
   * @default trace.getTracer('@idempotent-tools/otel') (the global tracer provider)
   */
  tracer?: Tracer;
  /**
   * The meter for the counter and the histogram.
   * @default metrics.getMeter('@idempotent-tools/otel') (the global meter provider)
   */
  meter?: Meter;
  /** Record a span per call. @default true */
  spans?: boolean;
  /** Record the `idempotent_tools.calls` counter and the `idempotent_tools.call.duration` histogram. @default true */
  metrics?: boolean;
  /**
   * Put the scope (tenant / user id) and the turn id on spans. Never on metrics (unbounded
   * cardinality). Turn it off when the scope is personal data your traces must not hold.
   * @default true
   */
  recordScope?: boolean;
  /**
   * The span name.
   * @default (event) => `idempotent_tools.run ${event.toolName}`
   */
  spanName?: (event: IdempotencyEvent) => string;
  /** Attributes added to every span and data point (e.g. `{ 'service.component': 'agent' }`). */
  attributes?: Attributes;
}

/**
 * An event sink that reports every call to OpenTelemetry: a span (from the call's start to its
 * end, child of the span active when the call ran) with the outcome as attributes, a counter of
 * calls by tool and outcome, and a duration histogram. Raw args and results are never recorded.
 *
 * ```ts
 * const idempotency = createIdempotency({ store, onEvent: createOtelSink() });
 * ```
 */
export function createOtelSink(options: OtelSinkOptions = {}): EventHandler {
  const tracer = options.tracer ?? trace.getTracer(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION);
  const meter = options.meter ?? metrics.getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION);
  const withSpans = options.spans ?? true;
  const withMetrics = options.metrics ?? true;
  const recordScope = options.recordScope ?? true;
  const spanName = options.spanName ?? ((event) => `idempotent_tools.run ${event.toolName}`);
  const extra = options.attributes ?? {};
  const a = OTEL_NAMES.attributes;

  const calls = withMetrics
    ? meter.createCounter(OTEL_NAMES.calls, {
        description: 'Idempotent tool calls, by tool, outcome and store.',
        unit: '{call}',
      })
    : undefined;
  const duration = withMetrics
    ? meter.createHistogram(OTEL_NAMES.duration, {
        description:
          'Duration of idempotent tool calls (the tool run, or the replay), by tool and outcome.',
        unit: 's',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      })
    : undefined;

  return (event) => {
    const failed = !SUCCESS.has(event.outcome);
    const common: Attributes = {
      ...extra,
      [a.toolName]: event.toolName,
      [a.outcome]: event.outcome,
      [a.replayed]: isReplay(event),
      [a.store]: event.store,
    };
    if (failed && event.errorCode !== undefined) common[a.errorType] = event.errorCode;

    if (calls !== undefined && duration !== undefined) {
      calls.add(1, common);
      duration.record(Math.max(0, event.durationMs) / 1000, common);
    }

    if (withSpans) {
      const attributes: Attributes = {
        ...common,
        [a.key]: event.key,
        [a.argsFingerprint]: event.argsFingerprint,
        [a.argsBytes]: event.argsBytes,
      };
      if (recordScope && event.turnId !== undefined) attributes[a.turnId] = event.turnId;
      if (recordScope && event.scope !== undefined) attributes[a.scope] = event.scope;
      if (event.resultBytes !== undefined) attributes[a.resultBytes] = event.resultBytes;
      if (event.waitedMs !== undefined) attributes[a.waitedMs] = event.waitedMs;
      const span = tracer.startSpan(
        spanName(event),
        { kind: SpanKind.INTERNAL, startTime: new Date(event.startedAt), attributes },
        context.active(),
      );
      if (failed) {
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: `${event.outcome}${event.errorCode === undefined ? '' : ` (${event.errorCode})`}`,
        });
      }
      span.end(new Date(event.endedAt));
    }
  };
}

export interface ObserveReplayRateOptions {
  /** @default metrics.getMeter('@idempotent-tools/otel') */
  meter?: Meter;
  /** Attributes of the data points (e.g. `{ 'gen_ai.tool.name': 'deploy' }` for a monitor of one tool). */
  attributes?: Attributes;
}

/**
 * Report a replay-rate monitor as gauges, read at every metric collection:
 * `idempotent_tools.replay_rate` (0 to 1), `idempotent_tools.replay_rate.alerting` (0 or 1) and
 * `idempotent_tools.replay_rate.window.calls`. Returns a function that stops reporting.
 *
 * ```ts
 * const monitor = createReplayRateMonitor({ threshold: 0.3, onAlert });
 * observeReplayRate(monitor);
 * createIdempotency({ store, onEvent: combineSinks(createOtelSink(), monitor) });
 * ```
 */
export function observeReplayRate(
  monitor: ReplayRateMonitor,
  options: ObserveReplayRateOptions = {},
): () => void {
  const meter = options.meter ?? metrics.getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION);
  const attributes = options.attributes ?? {};
  const rate = meter.createObservableGauge(OTEL_NAMES.replayRate, {
    description: 'Share of calls in the monitor window that returned a stored outcome.',
    unit: '1',
  });
  const alerting = meter.createObservableGauge(OTEL_NAMES.replayRateAlerting, {
    description: '1 while the replay-rate monitor raises an alert, else 0.',
    unit: '1',
  });
  const windowCalls = meter.createObservableGauge(OTEL_NAMES.windowCalls, {
    description: 'Calls in the replay-rate monitor window.',
    unit: '{call}',
  });
  const callback = (result: {
    observe(metric: typeof rate, value: number, attributes?: Attributes): void;
  }) => {
    // Evaluate too, so an alert ends when traffic stops even without new events.
    const snapshot = monitor.check();
    result.observe(rate, snapshot.rate, attributes);
    result.observe(alerting, snapshot.alerting ? 1 : 0, attributes);
    result.observe(windowCalls, snapshot.calls, attributes);
  };
  const observables = [rate, alerting, windowCalls];
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
