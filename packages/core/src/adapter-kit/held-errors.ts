/**
 * Developer errors that must end a run even when a layer between the wrapped tool and the
 * adapter's hook around the call turns what the tool threw into a message for the model
 * (LangChain's `toolRetryMiddleware` with `onFailure: 'continue'`): the tool holds its error by
 * the call's id (`hold`), the hook around the call throws it when the layer below returns
 * (`around`). Held only while the call is in flight.
 */

/** See the module's comment. */
export interface HeldErrors {
  /** Hold the developer error of the call `callId` (until `around` for that call returns). */
  hold(callId: string, error: unknown): void;
  /**
   * Run the call (`run`, the layers below the hook); throw the error held for `callId` meanwhile,
   * if any, instead of its answer. Nothing is held for a call without an id.
   */
  around<T>(callId: string | undefined, run: () => T | Promise<T>): Promise<T>;
}

export function createHeldErrors(): HeldErrors {
  const held = new Map<string, unknown>();
  return {
    hold: (callId, error) => void held.set(callId, error),
    async around(callId, run) {
      try {
        const out = await run();
        if (callId && held.has(callId)) throw held.get(callId);
        return out;
      } finally {
        if (callId) held.delete(callId);
      }
    },
  };
}
