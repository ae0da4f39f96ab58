/**
 * `idempotentHandler` over real HTTP on 127.0.0.1 (node:http + a fetch adapter), driven by the
 * real global `fetch`, `idempotentFetch` and the real `openai` client retrying.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import { serveFetch, type TestServer } from '../test-utils/http-server.js';
import { idempotentFetch } from '../vendor-calls/vendor.js';
import { type IdempotentHandlerOptions, idempotentHandler } from './handler.js';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** The tool served over HTTP: creates a ticket per request it runs (`effects`). */
function ticketTool(options: { gate?: Promise<void>; status?: number } = {}) {
  const tool = {
    effects: 0,
    started: [] as (() => void)[],
    handler: async (request: Request): Promise<Response> => {
      tool.effects++;
      const n = tool.effects;
      const body = (await request.json()) as { title: string };
      for (const notify of tool.started.splice(0)) notify();
      await options.gate;
      return Response.json(
        { id: `t_${n}`, title: body.title, path: new URL(request.url).pathname },
        {
          status: options.status ?? 201,
          headers: {
            location: `/tickets/t_${n}`,
            'set-cookie': `sid=s${n}`,
            date: 'Tue, 01 Jan 2030 00:00:00 GMT',
            'x-trace': `trace-${n}`,
          },
        },
      );
    },
    /** Resolves when the handler is next entered. */
    entered: () => new Promise<void>((resolve) => tool.started.push(resolve)),
  };
  return tool;
}

const byAuthorization = (request: Request) => request.headers.get('authorization') ?? undefined;

async function serve(
  handler: (request: Request) => Response | Promise<Response>,
  options: Partial<IdempotentHandlerOptions> = {},
  drop?: (request: Request, n: number) => boolean,
) {
  const wrapped = idempotentHandler(handler, {
    store: createMemoryStore(),
    scope: byAuthorization,
    ...options,
  } as IdempotentHandlerOptions);
  const server = await serveFetch(wrapped, drop === undefined ? {} : { drop });
  servers.push(server);
  return { server, wrapped };
}

function post(
  url: string,
  options: { key?: string; body?: unknown; auth?: string; headers?: [string, string][] } = {},
) {
  const headers = new Headers(options.headers);
  if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  headers.set('authorization', options.auth ?? 'Bearer alice');
  if (options.key !== undefined) headers.set('Idempotency-Key', options.key);
  return fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify(options.body ?? { title: 'printer on fire' }),
  });
}

async function problemOf(response: Response) {
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  return (await response.json()) as { type: string; title: string; code: string; detail: string };
}

describe('idempotentHandler: wrap-time checks', () => {
  const handler = () => new Response('ok');
  const store = createMemoryStore();

  test('scope is required, and named; the opt-out is explicit', () => {
    const missing = (() => {
      try {
        idempotentHandler(handler, { store } as unknown as IdempotentHandlerOptions);
      } catch (error) {
        return error;
      }
    })();
    expect(ConfigurationError.isInstance(missing)).toBe(true);
    expect((missing as ConfigurationError).option).toBe('scope');
    expect((missing as Error).message).toContain("scope: 'shared'");
    expect(() => idempotentHandler(handler, { store, scope: 'shared' })).not.toThrow();
  });

  test('misspelt and bad options are ConfigurationErrors naming them', () => {
    const wrap = (options: object) => () =>
      idempotentHandler(handler, { store, scope: 'shared', ...options });
    expect(wrap({ tll: 5 })).toThrow(/unknown option "tll"; did you mean "ttl"\?/);
    expect(wrap({ ttl: -1 })).toThrow(ConfigurationError);
    expect(wrap({ idempotency: createIdempotency({ store }) })).toThrow(/not both/);
    expect(wrap({ maxKeyLength: 10_000 })).toThrow(/maxKeyLength/);
    expect(wrap({ documentation: 'not a url' })).toThrow(/documentation/);
    expect(wrap({ name: '' })).toThrow(ConfigurationError);
    try {
      wrap({ ttl: 0 })();
    } catch (error) {
      expect((error as ConfigurationError).option).toBe('ttl');
    }
  });

  test('the policy it enforces is published on the handler', () => {
    const wrapped = idempotentHandler(handler, { store, scope: 'shared', ttl: 3_600_000 });
    expect(wrapped.policy).toMatchObject({
      header: 'Idempotency-Key',
      methods: ['POST', 'PATCH'],
      required: true,
      ttl: 3_600_000,
      maxKeyLength: 255,
      replayHeader: 'Idempotent-Replayed',
    });
  });
});

describe('idempotentHandler over HTTP', () => {
  test('fresh, then a replay: same status and body, the marker, the headers that make sense', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler);
    const first = await post(`${server.url}/tickets`, { key: '"k-1"' });
    const firstBody = await first.text();
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('set-cookie')).toBe('sid=s1');

    const again = await post(`${server.url}/tickets`, { key: '"k-1"' });
    expect(again.status).toBe(201);
    expect(await again.text()).toBe(firstBody);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe('/tickets/t_1');
    expect(again.headers.get('x-trace')).toBe('trace-1');
    expect(again.headers.get('content-type')).toBe('application/json');
    expect(again.headers.get('set-cookie')).toBeNull();
    expect(again.headers.get('date')).not.toBe('Tue, 01 Jan 2030 00:00:00 GMT');
    expect(tool.effects).toBe(1);
  });

  test('the quoted (draft) and the unquoted (Stripe) key are one key', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler);
    const quoted = await post(`${server.url}/tickets`, { key: '"8e03978e-40d5"' });
    const raw = await post(`${server.url}/tickets`, { key: '8e03978e-40d5' });
    expect(raw.headers.get('idempotent-replayed')).toBe('true');
    expect(await raw.json()).toEqual(await quoted.json());
    expect(tool.effects).toBe(1);
  });

  test('the same key with another request is 422, for every part of the fingerprint', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler);
    await post(`${server.url}/tickets`, { key: 'k' });
    const variants = [
      post(`${server.url}/tickets`, { key: 'k', body: { title: 'other' } }),
      post(`${server.url}/tickets?priority=high`, { key: 'k' }),
      post(`${server.url}/other`, { key: 'k' }),
      post(`${server.url}/tickets`, {
        key: 'k',
        headers: [['content-type', 'application/json; charset=utf-8']],
      }),
      fetch(`${server.url}/tickets`, {
        method: 'PATCH',
        headers: { authorization: 'Bearer alice', 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'printer on fire' }),
      }),
    ];
    const [body, query, path, contentType, keyless] = await Promise.all(variants);
    for (const response of [body, query, path]) {
      expect(response?.status).toBe(422);
      expect((await problemOf(response as Response)).code).toBe('idempotency_key_reused');
    }
    // The content-type header is exact: a charset makes it another request.
    expect(contentType?.status).toBe(422);
    expect(keyless?.status).toBe(400); // a PATCH without a key: missing, not drift
    expect(tool.effects).toBe(1);
  });

  test('400 for a missing, malformed, doubled or over-long key; nothing runs', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler, { documentation: 'https://api.example/idem' });
    const missing = await post(`${server.url}/tickets`);
    expect(missing.status).toBe(400);
    expect(missing.headers.get('link')).toBe(
      '<https://api.example/idem>; rel="describedby"; type="text/html"',
    );
    const problem = await problemOf(missing);
    expect(problem).toMatchObject({
      type: 'https://api.example/idem#idempotency-key-missing',
      title: 'Idempotency-Key is missing',
      code: 'idempotency_key_missing',
    });
    expect(problem.detail).toContain('Keys are kept 24 h');
    for (const key of ['"unterminated', 'has space', 'k'.repeat(256), '""']) {
      const response = await post(`${server.url}/tickets`, { key });
      expect(response.status).toBe(400);
      expect((await problemOf(response)).code).toBe('idempotency_key_invalid');
    }
    const doubled = await fetch(`${server.url}/tickets`, {
      method: 'POST',
      headers: [
        ['authorization', 'Bearer alice'],
        ['Idempotency-Key', '"a"'],
        ['Idempotency-Key', '"b"'],
      ],
      body: '{"title":"x"}',
    });
    expect(doubled.status).toBe(400);
    expect((await problemOf(doubled)).detail).toContain('one Idempotency-Key field');
    expect(tool.effects).toBe(0);
  });

  test('409 with Retry-After while the first is running; its response after', async () => {
    let open!: () => void;
    const tool = ticketTool({ gate: new Promise<void>((resolve) => (open = resolve)) });
    const { server } = await serve(tool.handler, { retryAfter: 2 });
    const entered = tool.entered();
    const first = post(`${server.url}/tickets`, { key: '"busy"' });
    await entered;
    const during = await post(`${server.url}/tickets`, { key: 'busy' });
    expect(during.status).toBe(409);
    expect(during.headers.get('retry-after')).toBe('2');
    expect(await problemOf(during)).toMatchObject({
      code: 'request_in_progress',
      title: 'A request is outstanding for this Idempotency-Key',
    });
    open();
    expect((await first).status).toBe(201);
    const after = await post(`${server.url}/tickets`, { key: 'busy' });
    expect(after.headers.get('idempotent-replayed')).toBe('true');
    expect(tool.effects).toBe(1);
  });

  test('waitTimeout: a duplicate waits for the first and gets its response', async () => {
    let open!: () => void;
    const tool = ticketTool({ gate: new Promise<void>((resolve) => (open = resolve)) });
    const { server } = await serve(tool.handler, { waitTimeout: 30_000 });
    const entered = tool.entered();
    const first = post(`${server.url}/tickets`, { key: 'w' });
    await entered;
    const second = post(`${server.url}/tickets`, { key: 'w' });
    open();
    const [a, b] = await Promise.all([first, second]);
    expect(await b.json()).toEqual(await a.json());
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(tool.effects).toBe(1);
  });

  test('two clients, one key: two operations, neither sees the other', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler);
    const alice = await post(`${server.url}/tickets`, { key: 'same', auth: 'Bearer alice' });
    const bob = await post(`${server.url}/tickets`, { key: 'same', auth: 'Bearer bob' });
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(((await alice.json()) as { id: string }).id).toBe('t_1');
    expect(((await bob.json()) as { id: string }).id).toBe('t_2');
    const anonymous = await fetch(`${server.url}/tickets`, {
      method: 'POST',
      headers: { 'Idempotency-Key': 'same' },
      body: '{"title":"x"}',
    });
    expect(anonymous.status).toBe(403);
    expect((await problemOf(anonymous)).code).toBe('client_unidentified');
    expect(tool.effects).toBe(2);
  });

  test('after the ttl the key is free: the request runs again', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const tool = ticketTool();
    const { server } = await serve(tool.handler, {
      store: createMemoryStore({ now: () => now }),
      ttl: 60_000,
    });
    await post(`${server.url}/tickets`, { key: 't' });
    now += 59_000;
    const within = await post(`${server.url}/tickets`, { key: 't' });
    expect(within.headers.get('idempotent-replayed')).toBe('true');
    now += 2_000;
    const after = await post(`${server.url}/tickets`, { key: 't' });
    expect(after.headers.get('idempotent-replayed')).toBeNull();
    expect(tool.effects).toBe(2);
  });

  test('a handler that throws after it started (a row committed, then Response.json of a BigInt): kept, the retry is answered from it and never runs again', async () => {
    const rows: number[] = [];
    const { server } = await serve(async () => {
      rows.push(rows.length + 1);
      return Response.json({ id: BigInt(rows.length) });
    });
    const first = await post(`${server.url}/tickets`, { key: 'x' });
    expect(first.status).toBe(500);
    expect(await first.text()).toMatch(/^handler threw: .*BigInt/);
    for (let i = 0; i < 2; i++) {
      const retry = await post(`${server.url}/tickets`, { key: 'x' });
      expect(retry.status).toBe(500);
      expect(await retry.json()).toMatchObject({ code: 'request_failed' });
    }
    expect(rows).toEqual([1]);
  });

  test('a handler that returns something that is not a Response: kept the same way', async () => {
    let calls = 0;
    const { server } = await serve((async () => {
      calls++;
      return { created: true };
    }) as never);
    expect((await post(`${server.url}/tickets`, { key: 'n' })).status).toBe(500);
    const retry = await post(`${server.url}/tickets`, { key: 'n' });
    expect(await retry.json()).toMatchObject({ code: 'request_failed' });
    expect(calls).toBe(1);
  });

  test('a handler that knows nothing happened throws NotAnOutcome: its response is returned, the key is free, a retry runs', async () => {
    let calls = 0;
    const { server } = await serve(async () => {
      calls++;
      if (calls === 1) throw new NotAnOutcome(new Response('database down', { status: 503 }));
      return new Response('created', { status: 201 });
    });
    const first = await post(`${server.url}/tickets`, { key: 'y' });
    expect(first.status).toBe(503);
    expect(await first.text()).toBe('database down');
    const retry = await post(`${server.url}/tickets`, { key: 'y' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(calls).toBe(2);
  });

  test('a 5xx the handler returns is stored and replayed, unless declared retryable', async () => {
    const failing = ticketTool({ status: 500 });
    const { server } = await serve(failing.handler);
    await post(`${server.url}/tickets`, { key: 'e' });
    const replay = await post(`${server.url}/tickets`, { key: 'e' });
    expect(replay.status).toBe(500);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(failing.effects).toBe(1);

    const busy = ticketTool({ status: 503 });
    const declared = await serve(busy.handler, { retryable: (r) => r.status === 503 });
    await post(`${declared.server.url}/tickets`, { key: 'e' });
    const again = await post(`${declared.server.url}/tickets`, { key: 'e' });
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(busy.effects).toBe(2);
  });

  test('a body over maxResponseBytes: the first caller gets it all, a replay says it is omitted', async () => {
    const big = 'x'.repeat(100_000);
    let calls = 0;
    const { server } = await serve(
      () => {
        calls++;
        return new Response(big, { status: 201, headers: { location: '/reports/1' } });
      },
      { maxResponseBytes: 1024 },
    );
    const first = await post(`${server.url}/reports`, { key: 'big' });
    expect(await first.text()).toBe(big);
    const replay = await post(`${server.url}/reports`, { key: 'big' });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('location')).toBe('/reports/1');
    expect(replay.headers.get('idempotent-replay-body-omitted')).toBe('true');
    expect(await replay.text()).toBe('');
    expect(calls).toBe(1);
  });

  test('other methods pass through; required: false lets a keyless request run unguarded', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler, { required: false });
    // A GET reaches the handler as it is (which cannot parse its missing body: 500).
    expect((await fetch(`${server.url}/tickets`)).status).toBe(500);
    expect(tool.effects).toBe(1);
    await post(`${server.url}/tickets`);
    await post(`${server.url}/tickets`);
    expect(tool.effects).toBe(3);
  });

  test('the real fetch retrying after a lost response: the effect runs once', async () => {
    const tool = ticketTool();
    const { server } = await serve(tool.handler, {}, (_request, n) => n === 0);
    const key = `"${crypto.randomUUID()}"`;
    let response: Response | undefined;
    let failures = 0;
    for (let attempt = 0; attempt < 3 && response === undefined; attempt++) {
      try {
        response = await post(`${server.url}/tickets`, { key });
      } catch {
        failures++; // the connection dropped after the handler ran
      }
    }
    expect(failures).toBe(1);
    expect(response?.status).toBe(201);
    expect(response?.headers.get('idempotent-replayed')).toBe('true');
    expect(((await (response as Response).json()) as { id: string }).id).toBe('t_1');
    expect(tool.effects).toBe(1);
  });

  test('the real openai client: its retry after a lost response is a replay', async () => {
    const tool = ticketTool();
    const keys: (string | null)[] = [];
    const { server } = await serve(tool.handler, {}, (request, n) => {
      keys.push(request.headers.get('idempotency-key'));
      return n === 0;
    });
    // OpenAI's own API takes no key, so its client leaves the Stainless core's idempotency header
    // unset; a Stainless client for an API that takes one sets it like this.
    class TicketsClient extends OpenAI {
      protected override idempotencyHeader = 'Idempotency-Key';
    }
    const client = new TicketsClient({
      apiKey: 'alice',
      baseURL: `${server.url}/v1`,
      maxRetries: 0,
    });
    const ticket = await client.post<{ id: string; path: string }>('/tickets', {
      body: { title: 'printer on fire' },
      maxRetries: 2,
    });
    expect(ticket).toMatchObject({ id: 't_1', path: '/v1/tickets' });
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^stainless-node-retry-/);
    expect(keys[1]).toBe(keys[0]);
    expect(tool.effects).toBe(1);
  });

  test.each(['raw', 'sf-string'] as const)(
    'idempotentFetch (%s) from a tool, its retry after a lost response: one effect',
    async (headerFormat) => {
      const tool = ticketTool();
      const keys: (string | null)[] = [];
      const { server } = await serve(tool.handler, {}, (request, n) => {
        keys.push(request.headers.get('idempotency-key'));
        return n === 0;
      });
      const vendor = idempotentFetch({ headerFormat });
      const agent = createIdempotency({ store: createMemoryStore() });
      const { value } = await agent.run(
        { toolName: 'open_ticket', turnId: 'turn-1', args: { title: 'printer on fire' } },
        async (args) => {
          const send = () =>
            vendor(`${server.url}/tickets`, {
              method: 'POST',
              headers: { authorization: 'Bearer agent', 'content-type': 'application/json' },
              body: JSON.stringify(args),
            });
          const response = await send().catch(send); // the SDK's retry: same body, same key
          return { status: response.status, body: await response.json() };
        },
      );
      expect(value).toMatchObject({ status: 201, body: { id: 't_1' } });
      expect(keys[1]).toBe(keys[0]);
      expect(keys[0]?.startsWith('"')).toBe(headerFormat === 'sf-string');
      expect(tool.effects).toBe(1);
    },
  );
});
