import { describe, expect, test as realTest } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import { currentExecutionContext, withExecutionContext } from '../executor/context.js';
import { createIdempotency, type ExecutionContext } from '../executor.js';
import { parseIdempotencyKey } from '../http/header.js';
import { createMemoryStore } from '../store/memory-store.js';
import { virtual } from '../test-utils/virtual-time.js';
import { idempotencyHeaders, idempotentFetch, vendorKey } from './vendor.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

const ctx = (key: string): ExecutionContext => ({
  key,
  toolName: 't',
  turnId: 'turn',
  scope: undefined,
  signal: new AbortController().signal,
  stillOwned: () => true,
});

/** A fetch that records what it was sent and answers 200. */
function recorder() {
  const sent: Array<{ method: string; url: string; key: string | null }> = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input, init);
    sent.push({
      method: request.method,
      url: request.url,
      key: request.headers.get('Idempotency-Key'),
    });
    return new Response('{}');
  };
  return { sent, fetch };
}

const call = { toolName: 'charge', turnId: 'turn-1', args: { amount: 5 } };

describe('vendorKey', () => {
  test('the key itself, or key + 22 characters of the label hash; pinned across processes', () => {
    expect(vendorKey('v1_k')).toBe('v1_k');
    expect(vendorKey('v1_k', 'a')).toMatch(/^v1_k\.[A-Za-z0-9_-]{22}$/);
    // A golden value: the derivation is a pure function of key and label, in every process.
    expect(vendorKey('v1_k', 'payco.charge')).toBe('v1_k.ha1pvHF-IKbNENw30fLBPl');
    expect(vendorKey('v1_k', 'a')).not.toBe(vendorKey('v1_k', 'b'));
    expect(vendorKey('v1_k', 'a')).not.toBe(vendorKey('v1_j', 'a'));
    expect(vendorKey('v1_k', 'x'.repeat(10_000))).toHaveLength(27);
    expect(() => vendorKey('')).toThrow(InvalidInputError);
  });

  test('a retry and a re-execution after a crash see the same ctx.key, so the same vendor keys', async () => {
    const store = createMemoryStore();
    const seen: string[] = [];
    const tool = async (_args: unknown, context: ExecutionContext) => {
      seen.push(idempotencyHeaders(context, 'payco.charge')['Idempotency-Key']);
      if (seen.length === 1) throw new Error('network'); // PayCo dedupes: the claim is released
      return 'ok';
    };
    const first = createIdempotency({ store, vendorDedupes: true });
    await expect(first.run(call, tool)).rejects.toThrow('network');
    await first.run(call, tool);
    // A crash: the record is left in_progress; a new executor ("process") re-executes it.
    const other = { ...call, args: { amount: 6 } };
    const { key, fingerprint } = first.keyOf(other);
    await store.claim({ key, fingerprint, token: 'dead', leaseMs: 1, ttlMs: 60_000 });
    await new Promise((r) => setTimeout(r, 5));
    const restarted = createIdempotency({ store, onStale: 'reexecute', vendorDedupes: true });
    await restarted.run(other, tool);
    expect(seen[0]).toBe(seen[1]);
    expect(seen[0]).toBe(vendorKey(first.keyOf(call).key, 'payco.charge'));
    expect(seen[2]).toBe(vendorKey(key, 'payco.charge'));
  });
});

describe('the execution context inside a tool', () => {
  test('the executor runs every tool inside its context; parallel calls do not mix', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const tool = async (args: { n: number }, context: ExecutionContext) => {
      await new Promise((r) => setTimeout(r, 5 * (3 - args.n)));
      expect(currentExecutionContext()).toBe(context);
      return idempotencyHeaders()['Idempotency-Key'];
    };
    const results = await Promise.all(
      [0, 1, 2].map((n) => idempotency.run({ ...call, args: { n } }, tool)),
    );
    expect(results.map((r) => r.value)).toEqual(results.map((r) => r.key));
    expect(new Set(results.map((r) => r.key)).size).toBe(3);
    expect(currentExecutionContext()).toBeUndefined();
  });

  test('outside a tool call: idempotencyHeaders is a typed error that says what to do', () => {
    expect(() => idempotencyHeaders()).toThrow(InvalidInputError);
    expect(() => idempotencyHeaders()).toThrow(/inside a tool/);
    expect(idempotencyHeaders(ctx('v1_x'))).toEqual({ 'Idempotency-Key': 'v1_x' });
    expect(withExecutionContext(ctx('v1_y'), () => idempotencyHeaders(undefined, 'l'))).toEqual({
      'Idempotency-Key': vendorKey('v1_y', 'l'),
    });
  });
});

describe('idempotentFetch', () => {
  test('sets the key on POST, PUT, PATCH and DELETE only', async () => {
    const { sent, fetch } = recorder();
    const f = idempotentFetch({ fetch });
    const url = 'http://vendor.test/x';
    await withExecutionContext(ctx('v1_k'), async () => {
      for (const method of ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE', 'post']) {
        await f(url, { method });
      }
    });
    const keys = sent.map((s) => [s.method, s.key]);
    const k = (method: string) => vendorKey('v1_k', `${method} ${url} #0`);
    expect(keys).toEqual([
      ['GET', null],
      ['HEAD', null],
      ['OPTIONS', null],
      ['POST', k('POST')],
      ['PUT', k('PUT')],
      ['PATCH', k('PATCH')],
      ['DELETE', k('DELETE')],
      ['POST', k('POST')], // lower-case method, same empty body: the same call again
    ]);
  });

  test('n-th distinct body per endpoint; an SDK retry of the same body reuses its key', async () => {
    const { sent, fetch } = recorder();
    const f = idempotentFetch({ fetch });
    const url = 'http://vendor.test/charges';
    const post = (body: string) => f(url, { method: 'POST', body });
    await withExecutionContext(ctx('v1_k'), async () => {
      await post('{"amount":1}');
      await post('{"amount":1}'); // retry
      await post('{"amount":2}');
      await f(new Request(url, { method: 'POST', body: '{"amount":2}' })); // Request input
    });
    const k = (n: number) => vendorKey('v1_k', `POST ${url} #${n}`);
    expect(sent.map((s) => s.key)).toEqual([k(0), k(0), k(1), k(1)]);
    // A re-execution is a new context with the same key: the same calls get the same keys.
    await withExecutionContext(ctx('v1_k'), async () => {
      await post('{"amount":1}');
      await post('{"amount":2}');
    });
    expect(sent.slice(4).map((s) => s.key)).toEqual([k(0), k(1)]);
  });

  test('outside a tool, with the header already set: passes through; custom header and context', async () => {
    const { sent, fetch } = recorder();
    const f = idempotentFetch({ fetch });
    await f('http://vendor.test/x', { method: 'POST' });
    await withExecutionContext(ctx('v1_k'), () =>
      f('http://vendor.test/x', { method: 'POST', headers: { 'Idempotency-Key': 'mine' } }),
    );
    expect(sent.map((s) => s.key)).toEqual([null, 'mine']);
    const seen: Headers[] = [];
    const custom = idempotentFetch({
      fetch: async (_input, init) => {
        seen.push(new Headers(init?.headers));
        return new Response('');
      },
      header: 'X-Request-Id',
      context: ctx('v1_z'),
    });
    await custom('http://vendor.test/y', { method: 'PUT' });
    expect(seen[0]?.get('X-Request-Id')).toBe(vendorKey('v1_z', 'PUT http://vendor.test/y #0'));
    expect(() => idempotentFetch({ fetch: 'nope' as never })).toThrow(InvalidInputError);
  });

  test('headerFormat: raw (the default, Stripe) or an RFC 8941 String (the IETF draft)', async () => {
    const { sent, fetch } = recorder();
    const url = 'http://vendor.test/charges';
    const k = vendorKey('v1_k', `POST ${url} #0`);
    await withExecutionContext(ctx('v1_k'), async () => {
      await idempotentFetch({ fetch })(url, { method: 'POST', body: '{}' });
      await idempotentFetch({ fetch, headerFormat: 'raw' })(url, { method: 'POST', body: '{}' });
      await idempotentFetch({ fetch, headerFormat: 'sf-string' })(url, {
        method: 'POST',
        body: '{}',
      });
    });
    // The same key either way; only its spelling in the header differs.
    expect(sent.map((s) => s.key)).toEqual([k, k, `"${k}"`]);
    expect(parseIdempotencyKey(sent[2]?.key as string, 255)).toEqual({
      ok: true,
      key: k,
      form: 'sf-string',
    });
    expect(() => idempotentFetch({ fetch, headerFormat: 'quoted' as never })).toThrow(
      /headerFormat must be 'raw' or 'sf-string'/,
    );
  });

  test('inside idempotency.run, with no ctx handed around', async () => {
    const { sent, fetch } = recorder();
    const f = idempotentFetch({ fetch });
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const { key } = await idempotency.run(call, async () => {
      await f('http://vendor.test/charges', { method: 'POST', body: '{}' });
    });
    expect(sent[0]?.key).toBe(vendorKey(key, 'POST http://vendor.test/charges #0'));
  });
});
