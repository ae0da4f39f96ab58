/**
 * A `CallOutcome` (see `pipeline.ts`) from an error, and back to what a framework that takes a
 * tool's return value and its thrown errors (the Agents SDK's `invoke`, a LangChain tool) gets.
 */
import { audienceOf, errorText } from './calls.js';
import type { CallOutcome } from './pipeline.js';

/**
 * An error told apart as the pipeline tells it (for a step the adapter runs besides it, e.g. a
 * bound approval): the model's text, an error for the developer, else the tool's own error.
 */
export function errorOutcome(error: unknown): CallOutcome {
  const audience = audienceOf(error);
  if (audience === 'model') return { text: errorText(error) as string };
  return audience === 'developer' ? { developer: error } : { error };
}

/**
 * The outcome as a tool's return value: its output or the model's text returned; an error for
 * the developer and the tool's own error thrown.
 */
export function returnOrThrow(outcome: CallOutcome): unknown {
  if ('output' in outcome) return outcome.output;
  if ('text' in outcome) return outcome.text;
  throw 'developer' in outcome ? outcome.developer : outcome.error;
}
