import type { EventHandler, IdempotencyEvent } from './events.js';

/** Something that takes events: a handler, or an object with `onEvent` (a monitor, an audit log). */
export type EventSink = EventHandler | { onEvent: EventHandler };

/**
 * One handler that passes every event to each sink in order. A sink that throws does not stop the
 * others (nor the call). `undefined`, `null` and `false` are skipped, so optional sinks can be
 * written inline.
 *
 * ```ts
 * createIdempotency({
 *   store,
 *   onEvent: combineSinks(createLoggerSink(logger), monitor, process.env.AUDIT && audit),
 * });
 * ```
 */
export function combineSinks(
  ...sinks: ReadonlyArray<EventSink | undefined | null | false | '' | 0>
): EventHandler {
  const handlers: EventHandler[] = [];
  for (const sink of sinks) {
    if (sink === undefined || sink === null || sink === false || sink === '' || sink === 0) {
      continue;
    }
    if (typeof sink === 'function') handlers.push(sink);
    else if (typeof sink === 'object' && typeof sink.onEvent === 'function') {
      handlers.push((event) => sink.onEvent(event));
    } else {
      throw new TypeError(
        'combineSinks takes event handlers ((event) => void) or objects with onEvent.',
      );
    }
  }
  return (event: IdempotencyEvent) => {
    for (const handler of handlers) {
      try {
        handler(event);
      } catch {
        // One broken sink must not silence the others.
      }
    }
  };
}
