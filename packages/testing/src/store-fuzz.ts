import { randomBytes, randomUUID } from 'node:crypto';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
  InvalidInputError,
  KEY_LIMITS,
  type RecordMeta,
} from '@idempotent-tools/core';
import fc from 'fast-check';
import type { ExpectLike } from './expect.js';
import { fixtureTests, HANG_DETECTOR_MS } from './fixture-tests.js';

export interface StoreFuzzOptions<S extends IdempotencyStore = IdempotencyStore> {
  /** Label of the outer `describe`, e.g. `'redis store'`. */
  name: string;
  /** The runner's `describe`. */
  describe: (name: string, fn: () => void) => void;
  /** The runner's `test`/`it`; the fuzz passes a timeout. */
  test: (name: string, fn: () => Promise<void>, timeoutMs?: number) => void;
  /** The runner's `expect` (uses `toBe`, `toEqual`). */
  expect: ExpectLike;
  /** A fresh store (fresh keyspace) for one property; real time (no injected clock needed). */
  createStore: () => S | Promise<S>;
  /** Clean up after one property. @default store.close?.() */
  destroyStore?: (store: S) => void | Promise<void>;
  /**
   * Runs of each property. Each executor run is about five store round trips.
   * @default 50
   */
  runs?: number;
  /** fast-check seed, to replay a failure (the failure message prints it). @default random */
  seed?: number;
  /** Timeout of each property: a hang detector, at least 600000. @default 600000 */
  timeoutMs?: number;
}

// C0 and C1 control characters.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Strings that mean something to SQL, Redis (RESP, glob patterns, hash tags), JSON, shells,
 * terminals, JavaScript objects and this library's own formats; and Unicode that is easy to get
 * wrong (NUL, lone surrogates, astral, combining, bidi, BOM, noncharacters).
 */
const HOSTILE: readonly string[] = [
  "'",
  '"',
  '`',
  '\\',
  ';',
  '--',
  '/*',
  '*/',
  "'; DROP TABLE idempotency_records; --",
  "' OR '1'='1",
  "E'\\x00'",
  '$1',
  '$$',
  '%',
  '_',
  '*',
  '?',
  '[a-z]',
  '{',
  '}',
  '{tag}',
  ':',
  '\u0000',
  '\r',
  '\n',
  '\r\n',
  '*3\r\n$3\r\nDEL\r\n$1\r\nx\r\n',
  '$-1\r\n',
  '+OK\r\n',
  '-ERR\r\n',
  '\t',
  '\u0001',
  '\u001b[2J',
  '\u007f',
  '\u0085',
  '\u00a0',
  '\u2028',
  '\u2029',
  '\u200b',
  '\u202e',
  '\ufeff',
  '\uffff',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\ud83d\ude00',
  '👩🏽‍💻',
  'e\u0301',
  '𝄞',
  'İ',
  'ß',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a template placeholder is the point
  '${x}',
  '%s',
  '%00',
  '../',
  'v1_',
  'enc:v1:',
  '["idempotent-tools/key","v1",null,"turn"',
  '","turn","',
];

const unit = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
  },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 }) },
);

/** A hostile string of up to `maxUnits` pieces; sometimes a huge one. */
const hostile = (maxUnits: number, huge: readonly string[] = []) =>
  huge.length === 0
    ? fc.array(unit, { maxLength: maxUnits }).map((parts) => parts.join(''))
    : fc.oneof(
        { weight: 9, arbitrary: fc.array(unit, { maxLength: maxUnits }).map((p) => p.join('')) },
        { weight: 1, arbitrary: fc.constantFrom(...huge) },
      );

/** At most `max` UTF-16 units, cut between code points. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const end =
    text.charCodeAt(max - 1) >= 0xd800 && text.charCodeAt(max - 1) < 0xdc00 ? max - 1 : max;
  return text.slice(0, end);
}

/** A hostile string made acceptable: no control characters (optionally), no lone surrogates. */
function tame(text: string, max: number, noControl: boolean, fallback: string): string {
  const clean = (
    noControl ? text.replace(CONTROL, '') : text.replaceAll('\u0000', '')
  ).toWellFormed();
  const out = cut(clean, max);
  return out.length === 0 ? fallback : out;
}

/** A key part: often acceptable (tamed), sometimes raw (and then usually refused). */
const part = (max: number, noControl: boolean, fallback: string, huge: readonly string[]) =>
  fc
    .tuple(hostile(12, huge), fc.nat(4))
    .map(([text, raw]) => (raw === 0 ? text : tame(text, max, noControl, fallback)));

/** JSON with hostile strings in values and keys (lone surrogates included: args refuse them). */
const json = (strings: fc.Arbitrary<string>): fc.Arbitrary<unknown> =>
  fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      strings,
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(strings, tie('value'), { maxKeys: 4 }),
    ),
  })).value;

const HUGE_PARTS = ['😀'.repeat(256), 'Ω'.repeat(512), 'x'.repeat(513), '\ud83d'.repeat(300)];

const callArbitrary = fc.record({
  toolName: part(KEY_LIMITS.toolName, true, 'tool', ['t'.repeat(128), 't'.repeat(129)]),
  turnId: fc.option(part(KEY_LIMITS.turnId, false, 'turn', HUGE_PARTS), { nil: undefined }),
  scope: fc.option(part(KEY_LIMITS.scope, false, 'scope', HUGE_PARTS), { nil: undefined }),
  args: fc.oneof(
    { weight: 4, arbitrary: json(hostile(6).map((text) => text.toWellFormed())) },
    { weight: 1, arbitrary: json(hostile(6)) },
  ),
  businessKey: fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.oneof(hostile(8), fc.integer()) },
  ),
  result: fc.oneof(
    { weight: 5, arbitrary: json(hostile(6)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(hostile(6), fc.integer({ min: 1, max: 20_000 }))
        .map(([text, n]) => ({ big: (text === '' ? '\u0000' : text).repeat(n).slice(0, 60_000) })),
    },
  ),
  secure: fc.boolean(),
});

function acceptedPart(value: unknown, max: number, noControl: boolean): boolean {
  return (
    typeof value === 'string' &&
    value.length >= 1 &&
    value.length <= max &&
    !value.includes('\u0000') &&
    !(noControl && new RegExp(CONTROL.source).test(value)) &&
    value.isWellFormed()
  );
}

function wellFormedJson(value: unknown): boolean {
  if (typeof value === 'string') return value.isWellFormed();
  if (Array.isArray(value)) return value.every(wellFormedJson);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).every(([k, v]) => k.isWellFormed() && wellFormedJson(v));
  }
  return true;
}

/** What the executor must accept (the rules of design section 3 (docs/design.md), restated independently). */
function accepted(c: {
  toolName: string;
  turnId: string | undefined;
  scope: string | undefined;
  args: unknown;
  businessKey: unknown;
}): boolean {
  return (
    acceptedPart(c.toolName, KEY_LIMITS.toolName, true) &&
    (c.turnId === undefined
      ? c.businessKey !== undefined
      : acceptedPart(c.turnId, KEY_LIMITS.turnId, false)) &&
    (c.scope === undefined || acceptedPart(c.scope, KEY_LIMITS.scope, false)) &&
    wellFormedJson(c.args) &&
    (c.businessKey === undefined ||
      (wellFormedJson(c.businessKey) &&
        Buffer.byteLength(JSON.stringify(c.businessKey)) <= KEY_LIMITS.businessKey))
  );
}

/** Well-formed hostile text (what the executor may hand a store), of 1 to `max` UTF-16 units. */
const storeText = (maxUnits: number, max: number) =>
  hostile(maxUnits).map((text) => {
    const out = cut(text.toWellFormed(), max);
    return out === '' ? '\u0000' : out;
  });

/**
 * Fuzz a store with hostile strings (SQL and Redis metacharacters, CRLF, NUL, lone surrogates,
 * huge Unicode) in every field a user controls, with fast-check, against the real engine:
 *
 * - **executor**: tool name, turn id, scope, args, business key and result. A call is either
 *   refused with `InvalidInputError` before anything runs (no record, no event), exactly when the
 *   key rules say so, or it runs once, its record holds the call's own meta, a repeat replays the
 *   result byte-exact (the JSON round trip) without running, and the same call under another
 *   scope runs anew. Half of the runs encrypt outcomes and HMAC the keys. Canary records written
 *   first still replay unchanged after every run, and the store still works at the end.
 * - **store**: raw `claim` / `complete` with hostile keys, `meta` and opaque outcomes (well-formed
 *   strings, NUL included: what the executor may write). Each is kept byte-exact, or refused with
 *   `InvalidInputError` (PostgreSQL refuses NUL) leaving nothing half-written; no other record
 *   changes.
 *
 * ```ts
 * runStoreFuzz({ name: 'my store', describe, test, expect, runs: 50,
 *   createStore: () => createMyStore(client, { prefix: uniqueKey('fuzz') }) });
 * ```
 */
export function runStoreFuzz<S extends IdempotencyStore>(options: StoreFuzzOptions<S>): void {
  const { expect } = options;
  const runs = options.runs ?? 50;
  const timeoutMs = options.timeoutMs ?? HANG_DETECTOR_MS;
  if (!Number.isInteger(runs) || runs < 1) {
    throw new RangeError(`runs must be a positive integer, got ${runs}`);
  }
  const params = {
    numRuns: runs,
    ...(options.seed === undefined ? {} : { seed: options.seed }),
  };

  const define = fixtureTests(
    options.test,
    timeoutMs,
    () => options.createStore(),
    (store) => (options.destroyStore !== undefined ? options.destroyStore(store) : store.close?.()),
  );

  options.describe(`${options.name}: fuzz`, () => {
    define(
      'executor: hostile strings in every field: refused before anything runs, or run once and replayed byte-exact, never touching another record',
      async (store) => {
        const events: IdempotencyEvent[] = [];
        const onEvent = (event: IdempotencyEvent) => events.push(event);
        const plain = createIdempotency({ store, onEvent });
        const secure = createIdempotency({
          store,
          onEvent,
          encryption: { keys: { k1: randomBytes(32) }, current: 'k1' },
          argsHmacKey: randomBytes(32),
        });
        const canaries: Array<{
          idempotency: Idempotency;
          call: { toolName: string; turnId: string; scope: string; args: unknown };
          value: unknown;
        }> = [];
        for (const [i, idempotency] of [plain, secure].entries()) {
          const canary = {
            idempotency,
            call: { toolName: 'canary', turnId: `canary-${i}`, scope: 'canary', args: { i } },
            value: { canary: i, text: "'; DROP TABLE x; --\r\n*1\r\n$4\r\nPING\r\n\u0000" },
          };
          await idempotency.run(canary.call, async () => canary.value);
          canaries.push(canary);
        }
        let executed = 0;
        let refused = 0;

        await fc.assert(
          fc.asyncProperty(callArbitrary, async (input) => {
            const nonce = randomUUID();
            const idempotency = input.secure ? secure : plain;
            const businessKey =
              input.businessKey === undefined ? undefined : [input.businessKey, nonce];
            const args = { fuzz: input.args, nonce };
            const call = {
              toolName: input.toolName,
              turnId: input.turnId,
              scope: input.scope,
              args,
            };
            const policy = businessKey === undefined ? {} : { businessKey: () => businessKey };
            let ran = 0;
            const fn = async () => {
              ran++;
              return input.result;
            };
            const eventsBefore = events.length;
            const shouldAccept = accepted({ ...call, businessKey });

            let first: Awaited<ReturnType<Idempotency['run']>> | undefined;
            let error: unknown;
            try {
              first = await idempotency.run(call, fn, policy);
            } catch (e) {
              error = e;
            }
            if (!shouldAccept) {
              refused++;
              expect(InvalidInputError.isInstance(error)).toBe(true);
              expect(ran).toBe(0);
              expect(events.length).toBe(eventsBefore);
              return;
            }
            if (error !== undefined) throw error;
            if (first === undefined) throw new Error('unreachable');
            executed++;
            expect(first.outcome).toBe('executed');
            expect(ran).toBe(1);
            const expected = JSON.stringify(input.result);
            expect(JSON.stringify(first.value)).toBe(expected);

            const record = await store.get(first.key);
            expect(record?.state).toBe('completed');
            const meta: RecordMeta = { toolName: call.toolName };
            if (call.scope !== undefined) meta.scope = call.scope;
            if (call.turnId !== undefined) meta.turnId = call.turnId;
            expect(record?.meta).toEqual(meta);
            if (!input.secure) expect(record?.outcome).toBe(JSON.stringify({ v: input.result }));

            const second = await idempotency.run(call, fn, policy);
            expect(second.replayed).toBe(true);
            expect(second.key).toBe(first.key);
            expect(JSON.stringify(second.value)).toBe(expected);
            expect(ran).toBe(1);

            const otherScope =
              call.scope === undefined || call.scope.length >= KEY_LIMITS.scope
                ? `other-${nonce}`
                : `${call.scope}\u0001`;
            const other = await idempotency.run({ ...call, scope: otherScope }, fn, policy);
            expect(other.replayed).toBe(false);
            expect(other.key === first.key).toBe(false);
            expect(ran).toBe(2);

            for (const canary of canaries) {
              const replay = await canary.idempotency.run(canary.call, async () => 'ran again');
              expect(replay.replayed).toBe(true);
              expect(JSON.stringify(replay.value)).toBe(JSON.stringify(canary.value));
            }
          }),
          params,
        );

        // Not vacuous: both branches were taken.
        expect(executed > 0 && refused > 0).toBe(true);
        // The store still works.
        const after = { toolName: 'after', turnId: randomUUID(), args: {} };
        expect((await plain.run(after, async () => 'ok')).outcome).toBe('executed');
        expect((await plain.run(after, async () => 'again')).value).toBe('ok');
      },
    );

    define(
      'store: hostile keys, meta and opaque outcomes are kept byte-exact or refused with InvalidInputError, never touching another record',
      async (store) => {
        const canaryKey = `fuzz-canary-${randomUUID()}`;
        // No NUL: every store must keep the canary (PostgreSQL refuses NUL in text).
        const canaryOutcome = "canary '; DROP TABLE x; -- \r\n$-1\r\n \\u0000 é";
        const canaryToken = randomUUID();
        await store.claim({
          key: canaryKey,
          fingerprint: 'fp',
          token: canaryToken,
          leaseMs: 60_000,
          ttlMs: 600_000,
        });
        await store.complete({
          key: canaryKey,
          token: canaryToken,
          state: 'completed',
          outcome: canaryOutcome,
          ttlMs: 600_000,
        });
        let kept = 0;

        await fc.assert(
          fc.asyncProperty(
            fc.record({
              suffix: storeText(8, 64),
              outcome: fc.oneof(
                { weight: 5, arbitrary: storeText(16, 100_000) },
                {
                  weight: 1,
                  arbitrary: fc
                    .tuple(storeText(4, 100), fc.integer({ min: 1, max: 5_000 }))
                    .map(([text, n]) => text.repeat(n).slice(0, 120_000).toWellFormed()),
                },
              ),
              meta: fc.record(
                {
                  toolName: storeText(6, KEY_LIMITS.toolName),
                  turnId: storeText(12, KEY_LIMITS.turnId),
                  scope: storeText(12, KEY_LIMITS.scope),
                },
                { requiredKeys: [] },
              ),
              state: fc.constantFrom('completed' as const, 'failed' as const),
            }),
            async ({ suffix, outcome, meta, state }) => {
              const key = `fuzz-${randomUUID()}-${suffix}`;
              const token = randomUUID();
              const hasMeta = Object.keys(meta).length > 0;
              const claim = {
                key,
                fingerprint: 'fp',
                token,
                leaseMs: 60_000,
                ttlMs: 120_000,
                ...(hasMeta ? { meta } : {}),
              };
              let status: string;
              try {
                status = (await store.claim(claim)).status;
              } catch (error) {
                expect(InvalidInputError.isInstance(error)).toBe(true);
                expect(await store.get(key)).toBe(undefined);
                return;
              }
              expect(status).toBe('acquired');
              const running = await store.get(key);
              expect(running?.key).toBe(key);
              expect(running?.meta).toEqual(hasMeta ? meta : undefined);

              let done: boolean;
              try {
                done = await store.complete({ key, token, state, outcome, ttlMs: 120_000 });
              } catch (error) {
                expect(InvalidInputError.isInstance(error)).toBe(true);
                const left = await store.get(key);
                expect(left?.state).toBe('in_progress');
                expect(left?.outcome).toBe(undefined);
                expect(await store.release(key, token)).toBe(true);
                return;
              }
              expect(done).toBe(true);
              kept++;
              const replay = await store.claim({ ...claim, token: randomUUID() });
              expect(replay.status).toBe('completed');
              expect(replay.record.state).toBe(state);
              expect(replay.record.outcome?.length).toBe(outcome.length);
              expect(replay.record.outcome).toBe(outcome);
              expect(replay.record.meta).toEqual(hasMeta ? meta : undefined);

              const canary = await store.get(canaryKey);
              expect(canary?.outcome).toBe(canaryOutcome);
              expect(canary?.token).toBe(canaryToken);
            },
          ),
          params,
        );
        expect(kept > 0).toBe(true);
      },
    );
  });
}
