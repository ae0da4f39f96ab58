import { createMemoryStore, InvalidInputError } from '@idempotent-tools/core';
import {
  type RecordedRequest,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import OpenAI from 'openai';
import { afterEach, describe, expect, test } from 'vitest';
import {
  createIdempotency,
  createToolDispatcher,
  currentExecutionContext,
  type ExecutionContext,
  idempotencyHeaders,
  idempotentFetch,
  vendorKey,
  withExecutionContext,
} from './index.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A vendor that dedupes POST /vector_stores by Idempotency-Key, like Stripe does. */
function vectorStoreVendor() {
  const created: Array<{ id: string; name: string }> = [];
  const byKey = new Map<string, { id: string; name: string }>();
  const route = (request: RecordedRequest) => {
    if (request.method === 'GET') {
      return { body: created.find((s) => request.path.endsWith(s.id)) ?? {} };
    }
    const key = request.headers['idempotency-key'] as string | undefined;
    const existing = key === undefined ? undefined : byKey.get(key);
    if (existing !== undefined) return { body: { ...existing, object: 'vector_store' } };
    const store = { id: `vs_${created.length + 1}`, name: (request.body as { name: string }).name };
    created.push(store);
    if (key !== undefined) byKey.set(key, store);
    return { body: { ...store, object: 'vector_store' } };
  };
  return { created, route };
}

async function serve(route: (r: RecordedRequest) => { body: unknown }) {
  const server = await startScriptedServer({ respond: () => ({ content: 'ok' }), route });
  servers.push(server);
  return server;
}

const ctx = (key: string): ExecutionContext => ({
  key,
  toolName: 't',
  turnId: 'turn',
  scope: undefined,
  signal: new AbortController().signal,
  stillOwned: () => true,
});

describe('openai v7 and Idempotency-Key', () => {
  test('the idempotencyKey request option sends nothing; idempotencyHeaders does', async () => {
    const server = await serve(() => ({ body: {} }));
    const openai = new OpenAI({ apiKey: 'test', baseURL: server.baseURL, maxRetries: 0 });
    const body = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }] };
    await openai.chat.completions.create(body, { idempotencyKey: 'ignored-by-openai' });
    await openai.chat.completions.create(body, { headers: idempotencyHeaders(ctx('v1_abc')) });
    await openai.chat.completions.create(body, { headers: idempotencyHeaders(ctx('v1_abc'), 'b') });
    expect(server.requests.map((r) => r.headers['idempotency-key'])).toEqual([
      undefined,
      'v1_abc',
      vendorKey('v1_abc', 'b'),
    ]);
    expect(() => idempotencyHeaders()).toThrow(InvalidInputError); // no tool call running
  });
});

describe('idempotentFetch: the tool call key on the vendor calls a tool makes', () => {
  test('an SDK retry carries the same key; the re-executed tool too; the vendor dedupes', async () => {
    const vendor = vectorStoreVendor();
    const server = await serve(vendor.route);
    const api = new OpenAI({
      apiKey: 'test',
      baseURL: server.baseURL,
      fetch: idempotentFetch(),
      maxRetries: 2,
    });
    let attempts = 0;
    // The vendor honours Idempotency-Key (declared): a tool error after a keyed request
    // releases the claim, and the retry sends the same keys.
    const idempotency = createIdempotency({ store: createMemoryStore(), vendorDedupes: true });
    const tools = createToolDispatcher(idempotency, {
      create_index: async (args: { name: string }) => {
        attempts++;
        const store = await api.vectorStores.create({ name: args.name }); // POST: keyed
        const again = await api.vectorStores.retrieve(store.id); // GET: not keyed
        const docs = await api.vectorStores.create({ name: `${args.name}-docs` }); // 2nd POST: its own key
        return { index: again.id, docs: docs.id };
      },
    });
    const message = {
      tool_calls: [
        {
          id: 'c1',
          type: 'function' as const,
          function: { name: 'create_index', arguments: '{"name":"kb"}' },
        },
      ],
    };
    // 1st POST: dropped after it arrived (the SDK retries). The GET, then the 2nd POST: it is
    // processed but its response is cut: the tool fails, the claim is released.
    server.inject('drop', undefined, undefined, 'truncate');
    await expect(tools.runChat(message, { turnId: 'msg_1' })).rejects.toThrow('terminated');
    expect(vendor.created.map((s) => s.name)).toEqual(['kb', 'kb-docs']);
    // The agent retries the call: the tool runs again and sends the same keys: the vendor replays.
    const [out] = await tools.runChat(
      { tool_calls: [{ ...message.tool_calls[0]!, id: 'c2' }] },
      { turnId: 'msg_1' },
    );
    expect(JSON.parse(out?.content as string)).toEqual({ index: 'vs_1', docs: 'vs_2' });
    expect(attempts).toBe(2);
    expect(vendor.created).toHaveLength(2);

    const posts = server.requests.filter((r) => r.method === 'POST');
    const keys = posts.map((r) => r.headers['idempotency-key']);
    // drop, SDK retry, 2nd POST (cut), then the re-execution's two POSTs
    expect(posts.map((r) => (r.body as { name: string }).name)).toEqual([
      'kb',
      'kb',
      'kb-docs',
      'kb',
      'kb-docs',
    ]);
    expect(keys[0]).toBe(keys[1]);
    expect(keys[3]).toBe(keys[0]);
    expect(keys[4]).toBe(keys[2]);
    expect(keys[0]).not.toBe(keys[2]);
    expect(keys[0]).toMatch(/^v1_[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{22}$/);
    expect(
      server.requests.filter((r) => r.method === 'GET').map((r) => r.headers['idempotency-key']),
    ).toEqual([undefined, undefined]);
  });

  test('outside a tool call, on GET and with a key already set: passes through', async () => {
    const sent: Headers[] = [];
    const fake: typeof fetch = async (_input, init) => {
      sent.push(new Headers(init?.headers));
      return new Response('{}');
    };
    const f = idempotentFetch({ fetch: fake });
    await f('http://vendor.test/x', { method: 'POST', body: '{}' });
    await withExecutionContext(ctx('v1_k'), async () => {
      expect(currentExecutionContext()?.key).toBe('v1_k');
      await f('http://vendor.test/x', { method: 'GET' });
      await f('http://vendor.test/x', {
        method: 'POST',
        body: '{}',
        headers: { 'Idempotency-Key': 'mine' },
      });
      await f(new Request('http://vendor.test/x', { method: 'POST', body: 'a' }));
      await f('http://vendor.test/x', { method: 'POST', body: 'a' }); // same request: same key
      await f('http://vendor.test/x', { method: 'DELETE' });
    });
    const a = vendorKey('v1_k', 'POST http://vendor.test/x #0');
    expect(sent.map((h) => h.get('Idempotency-Key'))).toEqual([
      null,
      null,
      'mine',
      a,
      a,
      vendorKey('v1_k', 'DELETE http://vendor.test/x #0'),
    ]);
    const custom = idempotentFetch({ fetch: fake, header: 'X-Request-Id', context: ctx('v1_z') });
    await custom('http://vendor.test/y', { method: 'PUT' });
    expect(sent.at(-1)?.get('X-Request-Id')).toBe(vendorKey('v1_z', 'PUT http://vendor.test/y #0'));
  });

  test('vendorKey: the key itself, or key + 22 characters of the label hash', () => {
    expect(vendorKey('v1_k')).toBe('v1_k');
    expect(vendorKey('v1_k', 'a')).toMatch(/^v1_k\.[A-Za-z0-9_-]{22}$/);
    expect(vendorKey('v1_k', 'a')).toBe(vendorKey('v1_k', 'a'));
    expect(vendorKey('v1_k', 'a')).not.toBe(vendorKey('v1_k', 'b'));
    expect(vendorKey('v1_k', 'x'.repeat(10_000)).length).toBe(27);
  });
});
