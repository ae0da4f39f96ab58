/**
 * Store-level mutations (the mutation table, mutations.ts): a real store wrapped so that it
 * answers wrongly, as a buggy store would. Never used outside a mutation run.
 *
 * - `live-as-stale` (c): a claim that meets a live `in_progress` record answers `stale`, and a
 *   takeover of a live record succeeds (the store's lease check is broken): the executor must not
 *   trust the store's clock alone.
 * - `other-key-replayed` (d): a claim that meets a `completed` record answers with the outcome of
 *   another key this store saw finish (a key collision in the engine).
 */
import type { ClaimResult, IdempotencyStore } from '@idempotent-tools/core';

export function wrapStore(
  store: IdempotencyStore,
  mutation: 'live-as-stale' | 'other-key-replayed',
): IdempotencyStore {
  const outcomes = new Map<string, string>();
  const remember = (key: string, outcome: string | undefined) => {
    if (outcome === undefined) return;
    outcomes.set(key, outcome);
    if (outcomes.size > 200) outcomes.delete(outcomes.keys().next().value as string);
  };
  const overrides: Partial<IdempotencyStore> = {
    async claim(input) {
      const result = await store.claim(input);
      if (mutation === 'live-as-stale' && result.status === 'in_progress') {
        return { status: 'stale', record: result.record } satisfies ClaimResult;
      }
      if (mutation === 'other-key-replayed' && result.status === 'completed') {
        remember(input.key, result.record.outcome);
        for (const [key, outcome] of outcomes) {
          if (key !== input.key && outcome !== result.record.outcome) {
            return { status: 'completed', record: { ...result.record, outcome } };
          }
        }
      }
      return result;
    },
    async complete(input) {
      const done = await store.complete(input);
      if (done && input.state === 'completed') remember(input.key, input.outcome);
      return done;
    },
    async takeover(input) {
      if (await store.takeover(input)) return true;
      if (mutation !== 'live-as-stale') return false;
      // The broken lease check: a live record is taken over all the same.
      const record = await store.get(input.key);
      if (record?.state !== 'in_progress' || record.token !== input.staleToken) return false;
      await store.release(input.key, input.staleToken);
      const claimed = await store.claim({
        key: input.key,
        fingerprint: record.fingerprint,
        token: input.token,
        leaseMs: input.leaseMs,
        ttlMs: input.ttlMs,
        ...(record.meta === undefined ? {} : { meta: record.meta }),
      });
      return claimed.status === 'acquired';
    },
  };
  return new Proxy(store, {
    get(target, name) {
      if (name in overrides) return overrides[name as keyof IdempotencyStore];
      const value = Reflect.get(target, name);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
