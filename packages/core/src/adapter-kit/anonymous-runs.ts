/**
 * A run refused before it starts when nothing could identify its calls, for a framework with a
 * hook before the run (an agent's `beforeAgent`) whose errors reach the developer and that no
 * other layer turns into a message for the model.
 */
import type { Adapter } from './adapter.js';
import type { TurnIdentityOptions, TurnSources } from './turn-identity.js';

/**
 * Throw the `ConfigurationError` that names what to pass (`adapter.identify`'s) when neither the
 * options (`turnId`, `conversationId`) nor the framework's turn or conversation (`sources`, of
 * `info`: the run's, no tool's) identify the run; return when one of them does.
 */
export function refuseUnidentified<Info>(
  adapter: Adapter<Info>,
  options: TurnIdentityOptions<Info>,
  sources: Pick<TurnSources<Info>, 'turn' | 'conversation'>,
  info: Info,
): void {
  if (options.turnId !== undefined || options.conversationId !== undefined) return;
  if (sources.turn?.(info) !== undefined || sources.conversation?.(info) !== undefined) return;
  adapter.identify(info, '');
}
