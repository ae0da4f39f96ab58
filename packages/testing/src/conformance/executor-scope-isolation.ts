import { randomUUID } from 'node:crypto';
import {
  type Call,
  canonicalize,
  createIdempotency,
  type IdempotencyStore,
} from '@idempotent-tools/core';
import { HANG_DETECTOR_MS } from '../fixture-tests.js';
import type { ConformanceContext } from './types.js';

type CallParts = Pick<Call, 'toolName' | 'turnId' | 'scope'>;

/** The canonical parts array a turn-keyed call is hashed from (what a crafted value may imitate). */
function partsJson(call: CallParts, fingerprint: string): string {
  return canonicalize([
    'idempotent-tools/key',
    'v1',
    call.scope ?? null,
    'turn',
    call.turnId,
    call.toolName,
    fingerprint,
  ]);
}

/**
 * The executor on the store under test keeps scopes apart: one tool call under several scopes,
 * crafted values that try to collide, business keys, concurrent calls.
 */
export function defineExecutorScopeIsolationTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, define, expect } = ctx;

  /**
   * Run every call once (each must execute, with a key of its own), then again (each must replay
   * its own value), and check the stored meta is the call's own.
   */
  const expectIsolated = async (store: S, calls: readonly CallParts[], args: unknown) => {
    const idempotency = createIdempotency({ store });
    const keys = new Set<string>();
    let runs = 0;
    for (const [i, call] of calls.entries()) {
      const result = await idempotency.run({ ...call, args }, async () => {
        runs++;
        return { i, scope: call.scope ?? null };
      });
      expect(result.replayed).toBe(false);
      keys.add(result.key);
    }
    expect(keys.size).toBe(calls.length);
    expect(runs).toBe(calls.length);
    for (const [i, call] of calls.entries()) {
      const result = await idempotency.run({ ...call, args }, async () => {
        runs++;
        return 'ran again';
      });
      expect(result.replayed).toBe(true);
      expect(JSON.stringify(result.value)).toBe(JSON.stringify({ i, scope: call.scope ?? null }));
      const record = await store.get(result.key);
      expect(record?.meta?.scope).toBe(call.scope);
      expect(record?.meta?.turnId).toBe(call.turnId);
      expect(record?.meta?.toolName).toBe(call.toolName);
    }
    expect(runs).toBe(calls.length);
  };

  describe('executor: scope isolation', () => {
    define(
      'one tool call under two scopes (and none): three executions, each replays its own',
      async ({ store }) => {
        const turnId = `turn-${randomUUID()}`;
        await expectIsolated(
          store,
          [
            { toolName: 'create_ticket', turnId, scope: 'tenant-a' },
            { toolName: 'create_ticket', turnId, scope: 'tenant-b' },
            { toolName: 'create_ticket', turnId },
          ],
          { title: 'printer on fire' },
        );
      },
    );

    define(
      'crafted turn ids, tool names and scopes that try to collide across scopes are distinct calls',
      async ({ store }) => {
        const args = { nonce: randomUUID(), amount: 5 };
        const idempotency = createIdempotency({ store });
        const victim: CallParts = { toolName: 'charge', turnId: 't', scope: 'victim' };
        const fingerprint = idempotency.keyOf({ ...victim, args }).fingerprint;
        const victimParts = partsJson(victim, fingerprint);
        const unscopedParts = partsJson({ ...victim, scope: undefined }, fingerprint);
        const calls: CallParts[] = [
          victim,
          { toolName: 'charge', turnId: 't' },
          // Separators: "a" + "b:c" vs "a:b" + "c", in every pair of fields.
          { toolName: 'charge', scope: 'a', turnId: 'b:c' },
          { toolName: 'charge', scope: 'a:b', turnId: 'c' },
          { toolName: 'b:charge', scope: 'a', turnId: 'c' },
          { toolName: 'charge', scope: 'a', turnId: 'c:b' },
          { toolName: 'charge', scope: 'a\u0001b', turnId: 'c' },
          { toolName: 'charge', scope: 'a', turnId: 'b\u0001c' },
          // Swapped fields.
          { toolName: 'charge', scope: 'x', turnId: 'y' },
          { toolName: 'charge', scope: 'y', turnId: 'x' },
          { toolName: 'victim', scope: 'charge', turnId: 't' },
          // JSON of the parts array, and pieces of it, as a scope or a turn id.
          { toolName: 'charge', scope: victimParts, turnId: 't' },
          { toolName: 'charge', turnId: victimParts },
          { toolName: 'charge', turnId: unscopedParts },
          { toolName: 'charge', scope: 'victim","turn","t', turnId: 't' },
          { toolName: 'charge', scope: 'victim', turnId: 't","charge' },
          { toolName: 'charge', scope: 'null', turnId: 't' },
          { toolName: 'charge', scope: 'undefined', turnId: 't' },
          { toolName: 'charge', scope: '""', turnId: 't' },
          { toolName: 'charge', scope: ' ', turnId: 't' },
          { toolName: 'charge', scope: 'victim ', turnId: 't' },
          { toolName: 'charge', scope: 'Victim', turnId: 't' },
          { toolName: 'charge', scope: 'victim\\', turnId: 't' },
          // Unicode look-alikes: precomposed vs combining, fullwidth.
          { toolName: 'charge', scope: 'caf\u00e9', turnId: 't' },
          { toolName: 'charge', scope: 'cafe\u0301', turnId: 't' },
          { toolName: 'charge', scope: '\uff56ictim', turnId: 't' },
          // The turn id at its limit, and one character short of it.
          { toolName: 'charge', scope: 'victim', turnId: 't'.repeat(512) },
          { toolName: 'charge', scope: 'victim', turnId: 't'.repeat(511) },
        ];
        await expectIsolated(store, calls, args);
      },
    );

    define('a business key in one scope never replays another scope', async ({ store }) => {
      const idempotency = createIdempotency({ store });
      const email = `user-${randomUUID()}@example.com`;
      const policy = { businessKey: (a: { email: string }) => a.email };
      let runs = 0;
      const fn = async (a: { email: string }) => ({ created: a.email, run: ++runs });
      const scopes = ['tenant-a', 'tenant-b', undefined];
      for (const scope of scopes) {
        const result = await idempotency.run(
          { toolName: 'signup', scope, args: { email } },
          fn,
          policy,
        );
        expect(result.replayed).toBe(false);
      }
      // A turn-keyed call whose turn id is the business key is another call too.
      const byTurn = await idempotency.run(
        { toolName: 'signup', turnId: email, scope: 'tenant-a', args: { email } },
        fn,
      );
      expect(byTurn.replayed).toBe(false);
      expect(runs).toBe(4);
      for (const [i, scope] of scopes.entries()) {
        const replay = await idempotency.run(
          { toolName: 'signup', scope, args: { email } },
          fn,
          policy,
        );
        expect(replay.replayed).toBe(true);
        expect(JSON.stringify(replay.value)).toBe(JSON.stringify({ created: email, run: i + 1 }));
      }
      expect(runs).toBe(4);
    });

    define(
      'concurrent calls of one turn under 20 scopes: each scope runs exactly once',
      async ({ store }) => {
        const idempotency = createIdempotency({ store });
        const turnId = `turn-${randomUUID()}`;
        const runs = new Map<string, number>();
        const scopes = Array.from({ length: 20 }, (_, i) => `tenant-${i}`);
        const results = await Promise.all(
          scopes.flatMap((scope) =>
            Array.from({ length: 5 }, () =>
              idempotency.run(
                { toolName: 'deploy', turnId, scope, args: {} },
                async () => {
                  runs.set(scope, (runs.get(scope) ?? 0) + 1);
                  await new Promise((resolve) => setTimeout(resolve, 10));
                  return scope;
                },
                // The waiters wait as long as the calls take on this machine (not the 30 s default).
                { waitTimeout: HANG_DETECTOR_MS },
              ),
            ),
          ),
        );
        for (const scope of scopes) expect(runs.get(scope)).toBe(1);
        for (const [i, result] of results.entries()) {
          expect(result.value).toBe(scopes[Math.floor(i / 5)]);
        }
      },
    );
  });
}
