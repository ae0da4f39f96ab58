/**
 * Durable turn links. A framework that continues a turn with a request holding only tool outputs
 * (the Responses API with `previous_response_id` or `conversation`, an agent run resumed from a
 * saved state) names the turn by nothing but the ids of the calls it answers. When the turn of a
 * call is known, the adapter links the call id to it; a later step finds the turn through any call
 * id it answers, in this process (a bounded map) or in another one after a crash or restart (a
 * small record in the idempotency store, kept as long as the tool outcomes: the executor's `ttl`).
 */
import type { Idempotency } from '../executor.js';

/** The tool name of link records (in the store's records and in the executor's events). */
export const TURN_LINK_TOOL = 'idempotent-tools.turn-link';

export interface TurnLinks<T> {
  /** Link call ids to `value`; `durable`: also in the store, where the first value of an id wins. */
  remember(ids: readonly string[], value: T, durable: boolean): Promise<void>;
  /** The value linked to the first of `ids` that has one (`durable`: also in the store), or undefined. */
  find(ids: readonly string[], durable?: boolean): Promise<T | undefined>;
}

const missing = new Error('no turn link');

export function createTurnLinks<T>(executor: Idempotency, limit = 10_000): TurnLinks<T> {
  const memory = new Map<string, T>();
  const keep = (id: string, value: T) => {
    memory.delete(id);
    memory.set(id, value);
    if (memory.size > limit) memory.delete(memory.keys().next().value as string);
  };
  const call = (id: string) => ({ toolName: TURN_LINK_TOOL, turnId: 'link', args: { id } });
  return {
    async remember(ids, value, durable) {
      await Promise.all(
        ids.map(async (id) => {
          if (!durable) return keep(id, value);
          keep(id, (await executor.run<{ id: string }, T>(call(id), () => value)).value);
        }),
      );
    },
    async find(ids, durable = true) {
      for (const id of ids) if (memory.has(id)) return memory.get(id);
      for (const id of durable ? ids : []) {
        try {
          const { value } = await executor.run<{ id: string }, T>(
            call(id),
            () => {
              throw missing;
            },
            { isTerminalError: () => false },
          );
          keep(id, value);
          return value;
        } catch (error) {
          if (error !== missing) throw error;
        }
      }
      return undefined;
    },
  };
}
