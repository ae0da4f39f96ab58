import { type EventHandler, type IdempotencyEvent, isReplay } from './events.js';

export interface ReplayRateMonitorOptions {
  /**
   * Share of replays (0 to 1) over the window at or above which the monitor alerts. A replay is
   * a call that returned a stored outcome instead of running (`isReplay`): many of them mean the
   * agent (or the framework under it) is retrying a lot.
   * @default 0.5
   */
  threshold?: number;
  /**
   * The alert ends when the rate falls below this (hysteresis: no flapping around the threshold),
   * or when the window holds no call at all.
   * @default threshold * 0.8
   */
  recoverBelow?: number;
  /**
   * Fewest calls in the window before the rate can raise an alert: three replays out of four
   * calls say little.
   * @default 20
   */
  minCalls?: number;
  /**
   * Length of the sliding window, in ms.
   * @default 60000
   */
  windowMs?: number;
  /**
   * The window slides by `windowMs / buckets`: more buckets, a finer slide, a little more memory.
   * @default 12
   */
  buckets?: number;
  /** Called once when the rate rises to the threshold (with enough calls). */
  onAlert?: (snapshot: ReplayRateSnapshot) => void;
  /** Called once when an alert ends. */
  onRecover?: (snapshot: ReplayRateSnapshot) => void;
  /**
   * Which events count (e.g. one tool, one scope: make one monitor each).
   * @default every event
   */
  filter?: (event: IdempotencyEvent) => boolean;
  /**
   * The clock, in ms since the epoch. Tests pass a controllable one.
   * @default Date.now
   */
  now?: () => number;
}

/** The window as the monitor sees it. */
export interface ReplayRateSnapshot {
  /** Calls in the window. */
  calls: number;
  /** Replays among them. */
  replays: number;
  /** `replays / calls`, 0 without calls. */
  rate: number;
  /** Whether an alert is on. */
  alerting: boolean;
  /** Alerts raised since the monitor was created. */
  alerts: number;
  threshold: number;
  minCalls: number;
  windowMs: number;
  /** The monitor's clock when the snapshot was taken. */
  at: number;
}

export interface ReplayRateMonitor {
  /** The sink: counts the event and raises or ends an alert. */
  readonly onEvent: EventHandler;
  /**
   * Look at the window now and raise or end an alert. Events do this on their own; call it on a
   * timer too so an alert ends when traffic stops.
   */
  check(): ReplayRateSnapshot;
  /** The window now, without raising or ending anything (for a gauge). */
  snapshot(): ReplayRateSnapshot;
  /** Forget every counted call and end any alert silently. */
  reset(): void;
}

function checkRate(field: string, value: number, min: number): number {
  if (typeof value !== 'number' || !(value >= min && value <= 1)) {
    throw new RangeError(`${field} must be a number from ${min} to 1, got ${String(value)}`);
  }
  return value;
}

function checkWhole(field: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`${field} must be a whole number >= ${min}, got ${String(value)}`);
  }
  return value;
}

/**
 * Watch the replay rate over a sliding window and raise an alert when it spikes: a sudden rise
 * in replays means something keeps retrying (a model in a loop, a timeout too short, a flaky
 * network between the agent and its tools). Alerts need `minCalls` calls in the window; they end
 * when the rate falls below `recoverBelow`.
 *
 * ```ts
 * const monitor = createReplayRateMonitor({
 *   threshold: 0.3,
 *   onAlert: (s) => logger.warn(s, 'replay rate spike'),
 *   onRecover: (s) => logger.info(s, 'replay rate back to normal'),
 * });
 * setInterval(() => monitor.check(), 10_000).unref();
 * createIdempotency({ store, onEvent: combineSinks(createLoggerSink(logger), monitor) });
 * ```
 */
export function createReplayRateMonitor(options: ReplayRateMonitorOptions = {}): ReplayRateMonitor {
  const threshold = checkRate('threshold', options.threshold ?? 0.5, Number.MIN_VALUE);
  const recoverBelow = checkRate('recoverBelow', options.recoverBelow ?? threshold * 0.8, 0);
  if (recoverBelow > threshold) {
    throw new RangeError(
      `recoverBelow (${recoverBelow}) must not be above threshold (${threshold})`,
    );
  }
  const minCalls = checkWhole('minCalls', options.minCalls ?? 20, 1);
  const windowMs = checkWhole('windowMs', options.windowMs ?? 60_000, 1);
  const bucketCount = checkWhole('buckets', options.buckets ?? 12, 1);
  const bucketMs = Math.max(1, Math.floor(windowMs / bucketCount));
  const slots = Math.ceil(windowMs / bucketMs);
  const now = options.now ?? Date.now;
  const { onAlert, onRecover, filter } = options;

  // A ring of buckets; `ids[i]` is the bucket number (floor(time / bucketMs)) slot i holds.
  const ids = new Array<number>(slots).fill(Number.NaN);
  const calls = new Array<number>(slots).fill(0);
  const replays = new Array<number>(slots).fill(0);
  let alerting = false;
  let alerts = 0;

  const slotOf = (id: number): number => ((id % slots) + slots) % slots;

  const snapshot = (): ReplayRateSnapshot => {
    const at = now();
    const current = Math.floor(at / bucketMs);
    let c = 0;
    let r = 0;
    for (let i = 0; i < slots; i++) {
      const id = ids[i]!;
      if (id > current - slots && id <= current) {
        c += calls[i]!;
        r += replays[i]!;
      }
    }
    return {
      calls: c,
      replays: r,
      rate: c === 0 ? 0 : r / c,
      alerting,
      alerts,
      threshold,
      minCalls,
      windowMs,
      at,
    };
  };

  const notify = (
    handler: ((s: ReplayRateSnapshot) => void) | undefined,
    s: ReplayRateSnapshot,
  ) => {
    try {
      handler?.(s);
    } catch {
      // An alert handler must never break a call.
    }
  };

  const check = (): ReplayRateSnapshot => {
    const s = snapshot();
    if (!alerting && s.calls >= minCalls && s.rate >= threshold) {
      alerting = true;
      alerts++;
      const raised = { ...s, alerting, alerts };
      notify(onAlert, raised);
      return raised;
    }
    if (alerting && (s.calls === 0 || s.rate < recoverBelow)) {
      alerting = false;
      const recovered = { ...s, alerting };
      notify(onRecover, recovered);
      return recovered;
    }
    return s;
  };

  const onEvent: EventHandler = (event) => {
    try {
      if (filter !== undefined && !filter(event)) return;
    } catch {
      return;
    }
    const id = Math.floor(now() / bucketMs);
    const slot = slotOf(id);
    if (ids[slot] !== id) {
      ids[slot] = id;
      calls[slot] = 0;
      replays[slot] = 0;
    }
    calls[slot]!++;
    if (isReplay(event)) replays[slot]!++;
    check();
  };

  return {
    onEvent,
    check,
    snapshot,
    reset: () => {
      ids.fill(Number.NaN);
      calls.fill(0);
      replays.fill(0);
      alerting = false;
    },
  };
}
