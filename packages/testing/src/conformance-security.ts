/**
 * The executor-level security part of the conformance suite: scope isolation, encryption at rest
 * and result limits, run through `createIdempotency` on the store under test. Registered by
 * `runStoreConformance`; every store gets them.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type Call,
  canonicalize,
  createIdempotency,
  type IdempotencyStore,
  PersistFailedError,
  RecordIntegrityError,
  ReplayedFailureError,
} from '@idempotent-tools/core';
import type { ExpectLike } from './expect.js';

/** @internal */
export interface SecurityTestContext<S extends IdempotencyStore> {
  describe: (name: string, fn: () => void) => void;
  define: (name: string, body: (ctx: { store: S }) => Promise<void>) => void;
  expect: ExpectLike;
}

type CallParts = Pick<Call, 'toolName' | 'turnId' | 'scope'>;

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

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

/** @internal */
export function defineSecurityTests<S extends IdempotencyStore>(ctx: SecurityTestContext<S>): void {
  const { describe, define, expect } = ctx;

  /** Write a finished record under `key` through the store API, as an attacker with write access could. */
  const plant = async (
    store: S,
    key: string,
    fingerprint: string,
    outcome: string,
    state: 'completed' | 'failed' = 'completed',
  ) => {
    const token = randomUUID();
    const claim = await store.claim({ key, fingerprint, token, leaseMs: 60_000, ttlMs: 120_000 });
    expect(claim.status).toBe('acquired');
    expect(await store.complete({ key, token, state, outcome, ttlMs: 120_000 })).toBe(true);
  };

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
              idempotency.run({ toolName: 'deploy', turnId, scope, args: {} }, async () => {
                runs.set(scope, (runs.get(scope) ?? 0) + 1);
                await new Promise((resolve) => setTimeout(resolve, 10));
                return scope;
              }),
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

  describe('executor: encryption at rest', () => {
    const k1 = randomBytes(32);
    const k2 = randomBytes(32);

    define(
      'outcomes are stored sealed and replay byte-exact, also after a key rotation',
      async ({ store }) => {
        const value = {
          card: '4242 4242 4242 4242',
          text: "'; DROP TABLE x; -- \r\n*1\r\n$4\r\nPING\r\n \u0000 \ud800 é 👩🏽‍💻",
        };
        const call = { toolName: 'charge', turnId: `turn-${randomUUID()}`, args: { amount: 1 } };
        const before = createIdempotency({ store, encryption: { keys: { k1 }, current: 'k1' } });
        const first = await before.run(call, async () => value);
        const record = await store.get(first.key);
        expect(record?.outcome?.startsWith('enc:v1:k1:')).toBe(true);
        expect(record?.outcome?.includes('4242')).toBe(false);

        const rotated = createIdempotency({
          store,
          encryption: { keys: { k2, k1 }, current: 'k2' },
        });
        let runs = 0;
        const replay = await rotated.run(call, async () => ++runs);
        expect(replay.replayed).toBe(true);
        expect(JSON.stringify(replay.value)).toBe(JSON.stringify(value));
        const fresh = await rotated.run({ ...call, turnId: `${call.turnId}-2` }, async () => value);
        expect((await store.get(fresh.key))?.outcome?.startsWith('enc:v1:k2:')).toBe(true);

        const retired = createIdempotency({ store, encryption: { keys: { k2 }, current: 'k2' } });
        const error = await errorOf(retired.run(call, async () => ++runs));
        expect(RecordIntegrityError.isInstance(error)).toBe(true);
        expect((error as RecordIntegrityError).reason).toBe('unknown_key');
        expect(runs).toBe(0);
      },
    );

    define(
      'an outcome copied under another key, tampered or planted in plain text is refused, and nothing runs',
      async ({ store }) => {
        const idempotency = createIdempotency({
          store,
          encryption: { keys: { k1 }, current: 'k1' },
        });
        const turn = `turn-${randomUUID()}`;
        const call = (suffix: string) => ({
          toolName: 'transfer',
          turnId: `${turn}-${suffix}`,
          args: { to: 'alice' },
        });
        const source = await idempotency.run(call('source'), async () => ({ ok: true }));
        const sealed = (await store.get(source.key))?.outcome ?? '';
        const parts = sealed.split(':');
        const ct = parts[5] ?? '';
        parts[5] = `${ct[0] === 'A' ? 'B' : 'A'}${ct.slice(1)}`;
        const cases: Array<[string, string, 'completed' | 'failed', string]> = [
          ['copied', sealed, 'completed', 'tampered'],
          ['relabelled failed', sealed, 'failed', 'tampered'],
          ['bit flip', parts.join(':'), 'completed', 'tampered'],
          ['garbage', 'enc:v1:k1:not-an-envelope', 'completed', 'corrupt'],
          ['plain text', '{"v":{"ok":"planted"}}', 'completed', 'unencrypted'],
        ];
        let runs = 0;
        for (const [label, outcome, state, reason] of cases) {
          const target = call(label);
          const { key, fingerprint } = idempotency.keyOf(target);
          await plant(store, key, fingerprint, outcome, state);
          const error = await errorOf(idempotency.run(target, async () => ++runs));
          expect(RecordIntegrityError.isInstance(error)).toBe(true);
          expect((error as RecordIntegrityError).reason).toBe(reason);
        }
        expect(runs).toBe(0);
        // The source record is untouched.
        const replay = await idempotency.run(call('source'), async () => ++runs);
        expect(JSON.stringify(replay.value)).toBe('{"ok":true}');
      },
    );
  });

  describe('executor: result limits', () => {
    define(
      'an oversized or non-JSON result fails the call, is stored as failed (not left in progress), and a retry replays the failure at once without running',
      async ({ store }) => {
        const idempotency = createIdempotency({ store, maxResultBytes: 1024 });
        const turn = `turn-${randomUUID()}`;
        const results: Array<[string, () => unknown]> = [
          ['oversized', () => ({ blob: 'x'.repeat(2048) })],
          ['not JSON', () => ({ amount: 10n })],
        ];
        for (const [label, make] of results) {
          const call = { toolName: 'export', turnId: `${turn}-${label}`, args: {} };
          let runs = 0;
          const fn = async () => {
            runs++;
            return make();
          };
          const error = await errorOf(idempotency.run(call, fn));
          expect(PersistFailedError.isInstance(error)).toBe(true);
          expect((error as PersistFailedError).reason).toBe('invalid_result');
          const record = await store.get(idempotency.keyOf(call).key);
          expect(record?.state).toBe('failed');
          const started = performance.now();
          const retry = await errorOf(idempotency.run(call, fn));
          expect(performance.now() - started).toBeLessThan(5_000);
          expect(ReplayedFailureError.isInstance(retry)).toBe(true);
          expect((retry as ReplayedFailureError).originalCode).toBe('invalid_result');
          expect(runs).toBe(1);
        }
      },
    );
  });
}
