import type { EventHandler, IdempotencyEvent } from './events.js';

export interface BatchedSinkOptions {
  /** Write one batch (in order). A rejection drops the batch and is reported to `onError`. */
  write: (batch: IdempotencyEvent[]) => void | Promise<void>;
  /**
   * Most events per `write`; a full batch is written at once (off the call's path).
   * @default 100
   */
  batchSize?: number;
  /**
   * Longest an event waits in the buffer before it is written, in ms.
   * @default 1000
   */
  flushIntervalMs?: number;
  /**
   * Most events held while writes lag behind; further events are dropped (and counted) until
   * the buffer drains, so a slow or dead backend never grows memory without bound.
   * @default 10000
   */
  maxBuffered?: number;
  /** Told about every failed write and the events it lost. @default ignore */
  onError?: (error: unknown, batch: IdempotencyEvent[]) => void;
}

/** An event sink that writes in batches, off the calls' path. */
export interface BatchedSink {
  /** The sink: buffers the event (never blocks, never throws). */
  readonly onEvent: EventHandler;
  /** Write every buffered event now; resolves when they are written (or dropped on error). */
  flush(): Promise<void>;
  /** Flush, then stop: later events are dropped (and counted). */
  close(): Promise<void>;
  /** Events not written yet (buffered, or in a write under way). */
  readonly pending: number;
  /** Events lost: buffer full, failed writes, or sent after `close`. */
  readonly dropped: number;
}

function positive(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${field} must be a whole number >= 1, got ${String(value)}`);
  }
  return value;
}

/**
 * Buffer events and write them in batches: every `batchSize` events or `flushIntervalMs`,
 * whichever comes first, one write at a time. The audit logs of the SQL stores are built on it;
 * use it for a sink of your own that writes somewhere slow.
 *
 * ```ts
 * const sink = createBatchedSink({ write: (batch) => warehouse.insert(batch) });
 * createIdempotency({ store, onEvent: sink.onEvent });
 * process.on('SIGTERM', () => sink.close());
 * ```
 */
export function createBatchedSink(options: BatchedSinkOptions): BatchedSink {
  if (options === null || typeof options !== 'object' || typeof options.write !== 'function') {
    throw new TypeError('createBatchedSink needs { write(batch) }.');
  }
  const batchSize = positive('batchSize', options.batchSize ?? 100);
  const flushIntervalMs = positive('flushIntervalMs', options.flushIntervalMs ?? 1000);
  const maxBuffered = positive('maxBuffered', options.maxBuffered ?? 10_000);
  const { write, onError } = options;

  let buffer: IdempotencyEvent[] = [];
  let dropped = 0;
  /** Events handed to the write chain, not written yet. */
  let queued = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /** The chain of writes: one at a time, in order. */
  let writing: Promise<void> = Promise.resolve();

  const writeBatch = async (batch: IdempotencyEvent[]): Promise<void> => {
    try {
      await write(batch);
      queued -= batch.length;
    } catch (error) {
      queued -= batch.length;
      dropped += batch.length;
      try {
        onError?.(error, batch);
      } catch {
        // The error reporter must not break the chain.
      }
    }
  };

  const drain = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    while (buffer.length > 0) {
      const batch = buffer.slice(0, batchSize);
      buffer = buffer.slice(batch.length);
      queued += batch.length;
      writing = writing.then(() => writeBatch(batch));
    }
    return writing;
  };

  const onEvent: EventHandler = (event) => {
    if (closed || buffer.length + queued >= maxBuffered) {
      dropped++;
      return;
    }
    buffer.push(event);
    if (buffer.length >= batchSize) {
      void drain();
    } else if (timer === undefined) {
      timer = setTimeout(() => void drain(), flushIntervalMs);
      timer.unref?.();
    }
  };

  return {
    onEvent,
    flush: drain,
    close: async () => {
      closed = true;
      await drain();
    },
    get pending() {
      return buffer.length + queued;
    },
    get dropped() {
      return dropped;
    },
  };
}
