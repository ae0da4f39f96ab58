const symbol = Symbol.for('idempotent-tools.NotAnOutcome');

/**
 * Thrown by a tool function to hand a value back that is not the call's outcome: the executor
 * releases the claim (a retry runs the tool again), whatever `onToolError` and `isTerminalError`
 * say, and rethrows it; the adapter catches it and passes `value` on. For framework results that
 * must never be replayed: an error the tool returned as its output (an MCP `isError` result, the
 * Agents SDK's error text), an MCP `input_required` round.
 */
export class NotAnOutcome {
  readonly [symbol] = true;
  constructor(readonly value: unknown) {}

  static isInstance(thrown: unknown): thrown is NotAnOutcome {
    return (
      thrown != null &&
      typeof thrown === 'object' &&
      symbol in thrown &&
      Reflect.get(thrown, symbol) === true
    );
  }
}
