import { createHash, createSecretKey, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, test as realTest, vi } from 'vitest';
import {
  InvalidInputError,
  PersistFailedError,
  RecordIntegrityError,
  ReplayedFailureError,
  StoreUnavailableError,
} from '../errors/index.js';
import { createIdempotency, type IdempotencyOptions } from '../executor.js';
import { canonicalize } from '../keys/canonicalize.js';
import { deriveKey } from '../keys/derive-key.js';
import { errorForModel } from '../model-output.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';
import { virtual } from '../test-utils/virtual-time.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const K1 = randomBytes(32);
const K2 = randomBytes(32);
const call = (turnId = 'turn-1', args: unknown = { amount: 5, card: '4242 4242 4242 4242' }) => ({
  toolName: 'charge',
  turnId,
  args,
});

function setup(
  options: Partial<IdempotencyOptions> = {},
  store: MemoryStore = createMemoryStore(),
) {
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({ store, onEvent: (e) => events.push(e), ...options });
  return { idempotency, store, events };
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

/** Overwrite the stored outcome of `key` (what someone with write access to the store can do). */
async function plant(
  store: MemoryStore,
  key: string,
  fingerprint: string,
  outcome: string,
  state: 'completed' | 'failed' = 'completed',
) {
  const existing = await store.get(key);
  if (existing !== undefined) await store.release(key, existing.token);
  if ((await store.get(key)) !== undefined) {
    // A finished record cannot be released: wait for a fresh key instead.
    throw new Error('plant needs a key without a finished record');
  }
  await store.claim({ key, fingerprint, token: 'planted', leaseMs: 60_000, ttlMs: 60_000 });
  await store.complete({ key, token: 'planted', state, outcome, ttlMs: 60_000 });
}

/** A store whose claim fails like an unreachable engine. */
function downStore(inner: IdempotencyStore, down: { claim?: () => boolean; complete?: boolean }) {
  const store: IdempotencyStore = {
    specificationVersion: 'v1',
    name: 'down',
    // No push: waiters poll with claims (which is where the outage shows).
    capabilities: { notifiesChanges: false, durable: false },
    claim: async (input) => {
      if (down.claim?.() === true) throw new Error('ECONNREFUSED');
      return inner.claim(input);
    },
    complete: async (input) => {
      if (down.complete === true) throw new Error('ECONNRESET');
      return inner.complete(input);
    },
    release: (k, t) => inner.release(k, t),
    renew: (k, t, l) => inner.renew(k, t, l),
    takeover: (input) => inner.takeover(input),
    get: (k) => inner.get(k),
  };
  return store;
}

describe('encryption at rest', () => {
  const encryption = { keys: { k1: K1 }, current: 'k1' };

  test('outcomes are stored sealed, never in plain text, and replay byte-exact', async () => {
    const { idempotency, store, events } = setup({ encryption });
    const value = { id: 'ch_1', secret: 'sk_live_xyz', text: 'NUL \u0000 lone \ud800 ✓ 👩🏽‍💻' };
    const first = await idempotency.run(call(), async () => value);
    const record = await store.get(first.key);
    expect(record?.outcome).toMatch(
      /^enc:v1:k1:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{22}:[A-Za-z0-9_-]+$/,
    );
    expect(record?.outcome).not.toContain('sk_live');
    const fn = vi.fn(async () => ({}));
    const second = await idempotency.run(call(), fn);
    expect(second).toMatchObject({ replayed: true, outcome: 'replayed' });
    expect(JSON.stringify(second.value)).toBe(JSON.stringify(value));
    expect(fn).not.toHaveBeenCalled();
    // resultBytes is the size of the outcome's JSON, encrypted or not.
    expect(events.map((e) => e.resultBytes)).toEqual([
      Buffer.byteLength(JSON.stringify({ v: value })),
      Buffer.byteLength(JSON.stringify({ v: value })),
    ]);
  });

  test('two seals of one outcome differ (a fresh IV each time)', async () => {
    const { idempotency, store } = setup({ encryption });
    const a = await idempotency.run(call('a'), async () => 'same');
    const b = await idempotency.run(call('b'), async () => 'same');
    const [ra, rb] = [await store.get(a.key), await store.get(b.key)];
    expect(ra?.outcome).not.toBe(rb?.outcome);
  });

  test('terminal errors are sealed too and replayed as ReplayedFailureError', async () => {
    const { idempotency, store } = setup({ encryption, isTerminalError: () => true });
    const declined = new Error('card 4242 declined');
    await expect(
      idempotency.run(call(), async () => {
        throw declined;
      }),
    ).rejects.toBe(declined);
    const { key } = idempotency.keyOf(call());
    const record = await store.get(key);
    expect(record?.state).toBe('failed');
    expect(record?.outcome).not.toContain('4242');
    const error = await errorOf(idempotency.run(call(), async () => 1));
    expect(ReplayedFailureError.isInstance(error)).toBe(true);
    expect((error as ReplayedFailureError).originalMessage).toBe('card 4242 declined');
  });

  test('rotation: records sealed with an old key stay readable while it is in keys', async () => {
    const store = createMemoryStore();
    const old = setup({ encryption: { keys: { k1: K1 }, current: 'k1' } }, store);
    await old.idempotency.run(call(), async () => 'sealed with k1');
    const rotated = setup({ encryption: { keys: { k2: K2, k1: K1 }, current: 'k2' } }, store);
    const fn = vi.fn(async () => 'ran again');
    expect((await rotated.idempotency.run(call(), fn)).value).toBe('sealed with k1');
    const fresh = await rotated.idempotency.run(call('turn-2'), async () => 'sealed with k2');
    expect((await store.get(fresh.key))?.outcome).toMatch(/^enc:v1:k2:/);
    // k1 retired: its records are refused, never run again.
    const retired = setup({ encryption: { keys: { k2: K2 }, current: 'k2' } }, store);
    const error = await errorOf(retired.idempotency.run(call(), fn));
    expect(RecordIntegrityError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'unknown_key', keyId: 'k1', code: 'record_integrity' });
    expect(retired.events.map((e) => e.outcome)).toEqual(['integrity-failed']);
    expect(fn).not.toHaveBeenCalled();
    expect(errorForModel(error)?.next).toBe('do-not-retry');
  });

  test('a tampered record (ciphertext, tag, IV, key id, garbage) is refused, never replayed', async () => {
    const { idempotency, store, events } = setup({
      encryption: { keys: { k1: K1, k9: K2 }, current: 'k1' },
    });
    await idempotency.run(call('source'), async () => ({ amount: 100 }));
    const sealed = (await store.get(idempotency.keyOf(call('source')).key))?.outcome ?? '';
    const [, , keyId, iv, tag, ct] = sealed.split(':') as string[];
    const flip = (s: string) => `${s[0] === 'A' ? 'B' : 'A'}${s.slice(1)}`;
    const cases: Array<[string, string, RecordIntegrityError['reason']]> = [
      ['ciphertext', `enc:v1:${keyId}:${iv}:${tag}:${flip(ct ?? '')}`, 'tampered'],
      ['tag', `enc:v1:${keyId}:${iv}:${flip(tag ?? '')}:${ct}`, 'tampered'],
      ['iv', `enc:v1:${keyId}:${flip(iv ?? '')}:${tag}:${ct}`, 'tampered'],
      ['other key id', `enc:v1:k9:${iv}:${tag}:${ct}`, 'tampered'],
      ['unknown key id', `enc:v1:k3:${iv}:${tag}:${ct}`, 'unknown_key'],
      ['truncated', sealed.slice(0, 40), 'corrupt'],
      ['garbage', 'enc:v1:k1:!!!', 'corrupt'],
      ['future version', `enc:v2:${keyId}:${iv}:${tag}:${ct}`, 'corrupt'],
      ['plain text', '{"v":{"amount":1}}', 'unencrypted'],
      ['not json at all', 'DROP TABLE x; --', 'unencrypted'],
    ];
    const fn = vi.fn(async () => 'ran');
    for (const [i, [label, outcome, reason]] of cases.entries()) {
      const c = call(`tampered-${i}`);
      const { key, fingerprint } = idempotency.keyOf(c);
      await plant(store, key, fingerprint, outcome);
      const error = await errorOf(idempotency.run(c, fn));
      expect(RecordIntegrityError.isInstance(error), label).toBe(true);
      expect((error as RecordIntegrityError).reason, label).toBe(reason);
      expect((error as RecordIntegrityError).retryable).toBe(false);
      expect((error as Error).message).toMatch(/not replayed and the tool did not run/);
      // Still refused on a retry; the record is left for an operator.
      expect(RecordIntegrityError.isInstance(await errorOf(idempotency.run(c, fn)))).toBe(true);
    }
    expect(fn).not.toHaveBeenCalled();
    expect(events.filter((e) => e.outcome === 'integrity-failed')).toHaveLength(cases.length * 2);
    expect(
      events.every((e) => e.outcome !== 'integrity-failed' || e.resultBytes === undefined),
    ).toBe(true);
  });

  test('an outcome copied under another key, or relabelled failed <-> completed, is refused', async () => {
    const { idempotency, store } = setup({ encryption, isTerminalError: () => true });
    await idempotency.run(call('a'), async () => ({ to: 'alice' }));
    await idempotency
      .run(call('b'), async () => {
        throw new Error('declined');
      })
      .catch(() => undefined);
    const a = (await store.get(idempotency.keyOf(call('a')).key))?.outcome ?? '';
    const b = (await store.get(idempotency.keyOf(call('b')).key))?.outcome ?? '';
    const fn = vi.fn(async () => 'ran');
    const copy = call('copy');
    const k = idempotency.keyOf(copy);
    await plant(store, k.key, k.fingerprint, a);
    expect(await errorOf(idempotency.run(copy, fn))).toMatchObject({ reason: 'tampered' });
    const relabel = call('relabel');
    const r = idempotency.keyOf(relabel);
    await plant(store, r.key, r.fingerprint, a, 'failed');
    expect(await errorOf(idempotency.run(relabel, fn))).toMatchObject({ reason: 'tampered' });
    const failed = call('failed');
    const f = idempotency.keyOf(failed);
    await plant(store, f.key, f.fingerprint, b, 'completed');
    expect(await errorOf(idempotency.run(failed, fn))).toMatchObject({ reason: 'tampered' });
    expect(fn).not.toHaveBeenCalled();
  });

  test('acceptPlaintext replays records written before encryption was turned on', async () => {
    const store = createMemoryStore();
    await setup({}, store).idempotency.run(call(), async () => 'plain');
    const strict = setup({ encryption }, store);
    expect(await errorOf(strict.idempotency.run(call(), async () => 'x'))).toMatchObject({
      reason: 'unencrypted',
    });
    const migrating = setup({ encryption: { ...encryption, acceptPlaintext: true } }, store);
    expect((await migrating.idempotency.run(call(), async () => 'x')).value).toBe('plain');
    // A corrupt plaintext record is still refused.
    const c = call('corrupt');
    const { key, fingerprint } = migrating.idempotency.keyOf(c);
    await plant(store, key, fingerprint, '{not json');
    expect(await errorOf(migrating.idempotency.run(c, async () => 'x'))).toMatchObject({
      reason: 'corrupt',
    });
  });

  test('an executor without keys refuses an encrypted record (and does not run the tool)', async () => {
    const store = createMemoryStore();
    await setup({ encryption }, store).idempotency.run(call(), async () => 'sealed');
    const fn = vi.fn(async () => 'ran');
    const error = await errorOf(setup({}, store).idempotency.run(call(), fn));
    expect(error).toMatchObject({ reason: 'unknown_key', keyId: 'k1' });
    expect(fn).not.toHaveBeenCalled();
  });

  test('keys are copied: changing the caller buffer later changes nothing', async () => {
    const key = Buffer.from(K1);
    const store = createMemoryStore();
    const { idempotency } = setup({ encryption: { keys: { k1: key }, current: 'k1' } }, store);
    key.fill(0);
    await idempotency.run(call(), async () => 'v');
    const reader = setup({ encryption }, store);
    expect((await reader.idempotency.run(call(), async () => 'x')).value).toBe('v');
  });

  realTest.each<[string, unknown]>([
    ['encryption', 'k1'],
    ['encryption.keys', { keys: null, current: 'k1' }],
    ['encryption.keys.k1', { keys: { k1: randomBytes(16) }, current: 'k1' }],
    ['encryption.keys.k1', { keys: { k1: 'a'.repeat(32) }, current: 'k1' }],
    ['encryption.keys', { keys: { 'k:1': K1 }, current: 'k:1' }],
    ['encryption.keys', { keys: { ['x'.repeat(33)]: K1 }, current: 'x'.repeat(33) }],
    ['encryption.current', { keys: { k1: K1 }, current: 'k2' }],
    ['encryption.current', { keys: {}, current: 'k1' }],
    ['encryption.acceptPlaintext', { keys: { k1: K1 }, current: 'k1', acceptPlaintext: 'yes' }],
  ])('rejects a bad %s at creation', (field, encryptionOption) => {
    const error = (() => {
      try {
        createIdempotency({
          store: createMemoryStore(),
          encryption: encryptionOption as IdempotencyOptions['encryption'] & object,
        });
      } catch (e) {
        return e;
      }
    })();
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe(field);
  });
});

describe('argsHmacKey', () => {
  const secret = randomBytes(32);

  test('keys and fingerprints are HMAC-SHA-256 under the secret: same format, other values', async () => {
    const plain = setup();
    const keyed = setup({ argsHmacKey: secret });
    const a = plain.idempotency.keyOf(call());
    const b = keyed.idempotency.keyOf(call());
    expect(b.key).toMatch(/^v1_[A-Za-z0-9_-]{43}$/);
    expect(b.key).not.toBe(a.key);
    const canonicalArgs = canonicalize(call().args);
    expect(a.fingerprint).toBe(createHash('sha256').update(canonicalArgs).digest('base64url'));
    expect(b.fingerprint).not.toBe(a.fingerprint);
    expect(b).toEqual(deriveKey(call(), { argsHmacKey: secret }));
    expect(b).toEqual(deriveKey(call(), { argsHmacKey: createSecretKey(secret) }));
    expect(deriveKey(call(), { argsHmacKey: randomBytes(32) }).key).not.toBe(b.key);
    // A business key (an email) is not guessable from the stored key either.
    const policy = { businessKey: () => 'alice@example.com' };
    expect(keyed.idempotency.keyOf(call(), policy).key).not.toBe(
      plain.idempotency.keyOf(call(), policy).key,
    );
    await keyed.idempotency.run(call(), async () => 1);
    const event = keyed.events[0];
    expect(event?.key).toBe(b.key);
    expect(event?.argsFingerprint).toBe(b.fingerprint);
  });

  test('the golden vectors still hold without it', () => {
    const vectors = JSON.parse(
      readFileSync(new URL('../../vectors/keys.json', import.meta.url), 'utf8'),
    ) as { vectors: Array<{ input: Parameters<typeof deriveKey>[0]; key: string }> };
    expect(vectors.vectors.length).toBeGreaterThan(0);
    for (const v of vectors.vectors) {
      expect(deriveKey(v.input).key).toBe(v.key);
      expect(deriveKey(v.input, { argsHmacKey: secret }).key).not.toBe(v.key);
    }
  });

  test('replay and drift work the same under HMAC', async () => {
    const { idempotency } = setup({ argsHmacKey: secret });
    const policy = { businessKey: (args: { email: string }) => args.email };
    const fn = vi.fn(async (args: { email: string }) => ({ user: args.email }));
    const c = (args: { email: string; name: string }) => ({ toolName: 'signup', args });
    await idempotency.run(c({ email: 'a@x', name: 'A' }), fn, policy);
    expect((await idempotency.run(c({ email: 'a@x', name: 'A' }), fn, policy)).replayed).toBe(true);
    const drift = await errorOf(idempotency.run(c({ email: 'a@x', name: 'B' }), fn, policy));
    expect((drift as { code?: string }).code).toBe('drift');
    expect(fn).toHaveBeenCalledTimes(1);
  });

  realTest.each<[string, unknown]>([
    ['too short', randomBytes(31)],
    ['a string', 'x'.repeat(64)],
    ['a number', 42],
  ])('rejects a key that is %s', (_label, argsHmacKey) => {
    const error = (() => {
      try {
        createIdempotency({
          store: createMemoryStore(),
          argsHmacKey: argsHmacKey as Uint8Array,
        });
      } catch (e) {
        return e;
      }
    })();
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('argsHmacKey');
  });
});

describe('maxResultBytes', () => {
  test('an oversized result fails before it is returned, is kept as a failure, and a retry neither re-runs nor hangs', async () => {
    const { idempotency, store, events } = setup({ maxResultBytes: 1000, lease: 5_000 });
    const fn = vi.fn(async () => ({ blob: 'x'.repeat(2000) }));
    const error = await errorOf(idempotency.run(call(), fn));
    expect(PersistFailedError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ reason: 'invalid_result', retryable: false });
    expect((error as Error).message).toMatch(/2017 bytes of JSON; the limit is 1000/);
    const record = await store.get(idempotency.keyOf(call()).key);
    expect(record?.state).toBe('failed');
    await sleep(6_000); // past the lease: a record left in progress would be stale now
    const claim = vi.spyOn(store, 'claim');
    const retry = await errorOf(idempotency.run(call(), fn));
    // No hang: one claim answered with the stored failure, no wait behind a running attempt.
    expect(claim).toHaveBeenCalledTimes(1);
    expect(events.at(-1)?.waitedMs).toBeUndefined();
    expect(ReplayedFailureError.isInstance(retry)).toBe(true);
    expect(retry).toMatchObject({
      originalName: 'PersistFailedError',
      originalCode: 'invalid_result',
    });
    expect(fn).toHaveBeenCalledTimes(1);
    expect(events.map((e) => e.outcome)).toEqual(['persist-failed', 'failed']);
  });

  test('a non-JSON result: the same (invalid_result), retry replays the failure', async () => {
    const { idempotency } = setup({ lease: 5_000 });
    const fn = vi.fn(async () => ({ n: 1n }));
    expect(await errorOf(idempotency.run(call(), fn))).toMatchObject({ reason: 'invalid_result' });
    await sleep(6_000);
    expect(ReplayedFailureError.isInstance(await errorOf(idempotency.run(call(), fn)))).toBe(true);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('the limit counts the stored JSON {"v":...}: at the limit it is stored', async () => {
    const value = 'y'.repeat(100);
    const bytes = Buffer.byteLength(JSON.stringify({ v: value }));
    const ok = setup({ maxResultBytes: bytes });
    expect((await ok.idempotency.run(call(), async () => value)).outcome).toBe('executed');
    const over = setup({ maxResultBytes: bytes - 1 });
    expect(await errorOf(over.idempotency.run(call(), async () => value))).toMatchObject({
      reason: 'invalid_result',
    });
  });

  test('a terminal error over the limit is stored truncated, still replayed as a failure', async () => {
    const { idempotency, store } = setup({ maxResultBytes: 500, isTerminalError: () => true });
    const huge = new Error('m'.repeat(5000));
    await expect(
      idempotency.run(call(), async () => {
        throw huge;
      }),
    ).rejects.toBe(huge);
    const record = await store.get(idempotency.keyOf(call()).key);
    expect(record?.state).toBe('failed');
    expect(Buffer.byteLength(record?.outcome ?? '')).toBeLessThan(1200);
    const replay = await errorOf(idempotency.run(call(), async () => 1));
    expect((replay as ReplayedFailureError).originalMessage).toMatch(/^m{1000}… \(truncated/);
  });

  test('the default is 1 MiB', async () => {
    const { idempotency } = setup();
    const big = 'z'.repeat(1024 * 1024);
    expect(await errorOf(idempotency.run(call(), async () => big))).toMatchObject({
      reason: 'invalid_result',
    });
    const fits = 'z'.repeat(1024 * 1024 - 10);
    expect((await idempotency.run(call('t2'), async () => fits)).outcome).toBe('executed');
  });

  test('an oversized reconciled value is refused and the stale record kept', async () => {
    const { idempotency, store } = setup({ maxResultBytes: 100 });
    const { key, fingerprint } = idempotency.keyOf(call());
    await store.claim({ key, fingerprint, token: 'dead', leaseMs: 1, ttlMs: 60_000 });
    await sleep(5);
    const error = await errorOf(
      idempotency.run(call(), async () => 'ran', {
        reconcile: async () => ({ found: true, value: 'r'.repeat(200) }),
      }),
    );
    expect(error).toMatchObject({ code: 'invalid_input', field: 'reconcile' });
    expect(await store.get(key)).toMatchObject({ state: 'in_progress', token: 'dead' });
  });

  realTest.each([0, -1, 1.5, 'big'])('rejects maxResultBytes %s', (maxResultBytes) => {
    expect(() =>
      createIdempotency({ store: createMemoryStore(), maxResultBytes: maxResultBytes as number }),
    ).toThrow(/maxResultBytes/);
  });
});

describe('onStoreUnavailable', () => {
  test('default fail-closed: the store is down, the tool does not run', async () => {
    const store = downStore(createMemoryStore(), { claim: () => true });
    const { idempotency, events } = setup({}, store as MemoryStore);
    const fn = vi.fn(async () => 1);
    expect(StoreUnavailableError.isInstance(await errorOf(idempotency.run(call(), fn)))).toBe(true);
    expect(fn).not.toHaveBeenCalled();
    expect(events.map((e) => e.outcome)).toEqual(['store-unavailable']);
  });

  test('fail-open: the tool runs unguarded, the result says so, and so does the event', async () => {
    const inner = createMemoryStore();
    const store = downStore(inner, { claim: () => true });
    const { idempotency, events } = setup(
      { onStoreUnavailable: 'fail-open' },
      store as MemoryStore,
    );
    const fn = vi.fn(async (_args: unknown, ctx: { key: string; signal: AbortSignal }) => ({
      key: ctx.key,
      aborted: ctx.signal.aborted,
    }));
    const result = await idempotency.run(call(), fn);
    expect(result).toMatchObject({ replayed: false, outcome: 'unguarded' });
    expect(result.value).toEqual({ key: result.key, aborted: false });
    expect(result.key).toBe(idempotency.keyOf(call()).key);
    // Nothing stored: a repeat runs it again (that is what fail-open means).
    await idempotency.run(call(), fn);
    expect(fn).toHaveBeenCalledTimes(2);
    expect(inner.size).toBe(0);
    expect(events.map((e) => [e.outcome, e.errorCode])).toEqual([
      ['unguarded', undefined],
      ['unguarded', undefined],
    ]);
  });

  test('fail-open per tool, over a fail-closed default', async () => {
    const store = downStore(createMemoryStore(), { claim: () => true });
    const { idempotency } = setup({}, store as MemoryStore);
    const result = await idempotency.run(call(), async () => 'read', {
      onStoreUnavailable: 'fail-open',
    });
    expect(result.outcome).toBe('unguarded');
    expect(() => createIdempotency({ store, onStoreUnavailable: 'open' as 'fail-open' })).toThrow(
      InvalidInputError,
    );
  });

  test('never fail-open after the tool ran: a failed persist is persist-failed', async () => {
    const inner = createMemoryStore();
    const store = downStore(inner, { complete: true });
    const { idempotency, events } = setup(
      { onStoreUnavailable: 'fail-open', lease: 2_000 },
      store as MemoryStore,
    );
    const fn = vi.fn(async () => 'charged');
    expect(await errorOf(idempotency.run(call(), fn))).toMatchObject({ reason: 'store_error' });
    expect(fn).toHaveBeenCalledTimes(1);
    expect(events.map((e) => e.outcome)).toEqual(['persist-failed']);
  });

  test('never fail-open while a duplicate runs: the store failing during the wait fails closed', async () => {
    const inner = createMemoryStore();
    let claims = 0;
    const store = downStore(inner, { claim: () => ++claims > 1 });
    const holder = createIdempotency({ store: inner });
    const running = holder.run(call(), () => sleep(50).then(() => 'first'));
    await sleep(5);
    const { idempotency, events } = setup(
      { onStoreUnavailable: 'fail-open' },
      store as MemoryStore,
    );
    const fn = vi.fn(async () => 'second');
    expect(StoreUnavailableError.isInstance(await errorOf(idempotency.run(call(), fn)))).toBe(true);
    expect(fn).not.toHaveBeenCalled();
    expect(events.map((e) => e.outcome)).toEqual(['store-unavailable']);
    await running;
  });

  test('a typed refusal of the store (InvalidInputError) never fails open', async () => {
    const inner = createMemoryStore();
    const store: IdempotencyStore = {
      ...downStore(inner, {}),
      claim: async () => {
        throw new InvalidInputError({ field: 'meta.turnId', message: 'refused by the store' });
      },
    };
    const fn = vi.fn(async () => 1);
    const { idempotency } = setup({ onStoreUnavailable: 'fail-open' }, store as MemoryStore);
    expect(InvalidInputError.isInstance(await errorOf(idempotency.run(call(), fn)))).toBe(true);
    expect(fn).not.toHaveBeenCalled();
  });

  test('a vendorCall inside an unguarded tool stays fail-closed unless its own policy opts in', async () => {
    const store = downStore(createMemoryStore(), { claim: () => true });
    const { idempotency } = setup({ onStoreUnavailable: 'fail-open' }, store as MemoryStore);
    const vendor = vi.fn(async () => 'transferred');
    const error = await errorOf(
      idempotency.run(call(), async (_args, ctx) => idempotency.vendorCall(ctx, 'bank', vendor)),
    );
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect(vendor).not.toHaveBeenCalled();
    const opted = await idempotency.run(call(), async (_args, ctx) =>
      idempotency.vendorCall(ctx, 'bank', vendor, { onStoreUnavailable: 'fail-open' }),
    );
    expect(opted.value).toMatchObject({ value: 'transferred', outcome: 'unguarded' });
  });
});

describe('scope isolation and hostile strings (memory store)', () => {
  test('one tool call under two scopes: two executions, each replays its own', async () => {
    const { idempotency } = setup();
    let n = 0;
    const fn = async () => ++n;
    const a = { ...call(), scope: 'tenant-a' };
    const b = { ...call(), scope: 'tenant-b' };
    expect((await idempotency.run(a, fn)).value).toBe(1);
    expect((await idempotency.run(b, fn)).value).toBe(2);
    expect((await idempotency.run(call(), fn)).value).toBe(3);
    expect((await idempotency.run(a, fn)).value).toBe(1);
    expect((await idempotency.run(b, fn)).value).toBe(2);
  });

  test('NUL in the turn id, scope or tool name is InvalidInputError before anything runs', async () => {
    const { idempotency, store, events } = setup();
    const fn = vi.fn(async () => 1);
    for (const c of [
      { ...call('t\u0000'), scope: 's' },
      { ...call(), scope: 'a\u0000b' },
      { ...call(), toolName: 'x\u0000' },
    ]) {
      const error = await errorOf(idempotency.run(c, fn));
      expect(InvalidInputError.isInstance(error)).toBe(true);
    }
    expect(fn).not.toHaveBeenCalled();
    expect(store.size).toBe(0);
    expect(events).toEqual([]);
  });

  test('NUL, CRLF and lone surrogates in args and results round-trip exactly', async () => {
    const { idempotency } = setup();
    const args = { q: "'; DROP TABLE x; --\u0000\r\n*3\r\n$3\r\nDEL", s: 'e\u0301 😀' };
    const result = { echo: args, nul: '\u0000', lone: '\ud800x\udc00', crlf: '\r\n' };
    await idempotency.run(call('t', args), async () => result);
    const replay = await idempotency.run(call('t', args), async () => 'no');
    expect(replay.replayed).toBe(true);
    expect(JSON.stringify(replay.value)).toBe(JSON.stringify(result));
    expect(replay.value).toEqual(result);
  });
});
