/**
 * The cases core must pass inside every runtime it supports (`runtime/runtimes.test.ts` bundles
 * this file and runs it in workerd, with and without `nodejs_compat`, and in the Vercel Edge
 * runtime): the RFC 8785 vectors, the key vectors, and the executor's core answers on the memory
 * store. The expected values come from the test on Node, so a runtime that computes a different
 * key (another hash, another canonical text) fails here.
 */

import { idempotentHandler } from '../http/index.js';
import {
  ConfigurationError,
  canonicalize,
  createIdempotency,
  createMemoryStore,
  currentExecutionContext,
  deriveKey,
  type KeyInput,
  OutcomeUnknownError,
} from '../index.js';
import { hasAsyncContext, isNode, nodeCrypto } from '../runtime/index.js';

/** What the Node side hands over: vector inputs and what Node computed for them. */
export interface RuntimeCaseInput {
  /** RFC 8785 vectors: the input JSON text and its canonical text. */
  canonical: Array<{ name: string; input: string; output: string }>;
  /** Key vectors (vectors/keys.json), `argsHmacKey` as base64 where one is used. */
  keys: Array<{
    name: string;
    input: KeyInput;
    key: string;
    fingerprint: string;
    argsHmacKey?: string;
  }>;
}

export interface RuntimeCaseResult {
  name: string;
  ok: boolean;
  detail?: string;
}

/** What the runtime is, as core sees it: the test checks it is the runtime it meant to start. */
export interface RuntimeFacts {
  isNode: boolean;
  hasAsyncContext: boolean;
  nodeCrypto: boolean;
  userAgent: string | undefined;
}

const decodeBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

export async function runRuntimeCases(
  input: RuntimeCaseInput,
): Promise<{ facts: RuntimeFacts; results: RuntimeCaseResult[] }> {
  const results: RuntimeCaseResult[] = [];
  const check = async (name: string, body: () => unknown) => {
    try {
      const detail = await body();
      results.push(
        detail === undefined || detail === true
          ? { name, ok: true }
          : { name, ok: false, detail: String(detail) },
      );
    } catch (error) {
      results.push({
        name,
        ok: false,
        detail: `threw ${String((error as Error)?.stack ?? error)}`,
      });
    }
  };
  const same = (actual: unknown, expected: unknown) =>
    JSON.stringify(actual) === JSON.stringify(expected) ||
    `got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`;

  for (const vector of input.canonical) {
    await check(`rfc8785 ${vector.name}`, () =>
      same(canonicalize(JSON.parse(vector.input)), vector.output),
    );
  }
  for (const vector of input.keys) {
    await check(`key vector ${vector.name}`, () => {
      const options =
        vector.argsHmacKey === undefined ? {} : { argsHmacKey: decodeBase64(vector.argsHmacKey) };
      return same(deriveKey(vector.input, options), {
        key: vector.key,
        fingerprint: vector.fingerprint,
      });
    });
  }
  // Every Map, Set and boxed primitive is refused or unwrapped as on Node (the brand checks).
  await check('canonicalize: boxed primitives and collections', () => {
    const boxed = canonicalize({ n: Object(1), s: Object('a'), b: Object(true) });
    if (boxed !== '{"b":true,"n":1,"s":"a"}') return `boxed: ${boxed}`;
    for (const bad of [new Map(), new Set(), new WeakMap(), new WeakSet(), Object(1n)]) {
      try {
        canonicalize({ bad });
        return `accepted ${Object.prototype.toString.call(bad)}`;
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'invalid_input') return `threw ${error}`;
      }
    }
    // A plain object dressed up as a Map is still a plain object.
    const fake = { [Symbol.toStringTag]: 'Map', a: 1 };
    return same(canonicalize(fake), '{"a":1}');
  });

  const tool = { toolName: 'create_ticket', turnId: 'turn-1', args: { title: 'Printer on fire' } };

  await check('a repeat replays; the tool runs once', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const fn = async () => ({ ticket: `T-${++runs}` });
    const first = await idempotency.run(tool, fn);
    const second = await idempotency.run(tool, fn);
    return same(
      [runs, first.outcome, first.replayed, second.outcome, second.replayed, second.value],
      [1, 'executed', false, 'replayed', true, { ticket: 'T-1' }],
    );
  });

  await check('20 concurrent duplicates: one execution', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const fn = async () => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { ticket: 'T-1' };
    };
    const all = await Promise.all(Array.from({ length: 20 }, () => idempotency.run(tool, fn)));
    const executed = all.filter((r) => r.outcome === 'executed').length;
    const values = new Set(all.map((r) => JSON.stringify(r.value)));
    return same([runs, executed, values.size], [1, 1, 1]);
  });

  await check(
    'the context: the key in ctx, and found implicitly where the runtime can',
    async () => {
      const idempotency = createIdempotency({ store: createMemoryStore() });
      const seen = await idempotency.run(tool, async (_args, ctx) => {
        await Promise.resolve();
        return { ctxKey: ctx.key, current: currentExecutionContext()?.key ?? null };
      });
      const key = idempotency.keyOf(tool).key;
      return same(seen.value, { ctxKey: key, current: hasAsyncContext ? key : null });
    },
  );

  await check(
    "a tool error: 'auto' releases on Node, keeps elsewhere (no request is seen)",
    async () => {
      const idempotency = createIdempotency({ store: createMemoryStore() });
      let runs = 0;
      const fails = async () => {
        runs++;
        throw new Error('vendor timed out');
      };
      await idempotency.run(tool, fails).catch(() => undefined);
      const retry = await idempotency.run(tool, fails).then(
        () => 'resolved',
        (error) =>
          OutcomeUnknownError.isInstance(error) ? 'outcome_unknown' : (error as Error).message,
      );
      return same([runs, retry], isNode ? [2, 'vendor timed out'] : [1, 'outcome_unknown']);
    },
  );

  await check("a tool error with onToolError: 'release' runs again", async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const fn = async () => {
      if (++runs === 1) throw new Error('bad input');
      return { ok: true };
    };
    await idempotency.run(tool, fn, { onToolError: 'release' }).catch(() => undefined);
    const retry = await idempotency.run(tool, fn, { onToolError: 'release' });
    return same([runs, retry.outcome], [2, 'executed']);
  });

  await check(
    'encryption: sealed and opened where node:crypto is, refused where it is not',
    async () => {
      const options = {
        store: createMemoryStore(),
        encryption: { keys: { k1: new Uint8Array(32).fill(7) }, current: 'k1' },
      };
      if (typeof nodeCrypto?.createCipheriv !== 'function') {
        try {
          createIdempotency(options);
          return 'accepted encryption without node:crypto';
        } catch (error) {
          return ConfigurationError.isInstance(error) ? undefined : `threw ${error}`;
        }
      }
      const idempotency = createIdempotency(options);
      let runs = 0;
      const fn = async () => ({ secret: `s-${++runs}` });
      await idempotency.run(tool, fn);
      const replay = await idempotency.run(tool, fn);
      const stored = await options.store.get(replay.key);
      const sealed = typeof stored?.outcome === 'string' && stored.outcome.startsWith('enc:v1:k1:');
      return same([runs, replay.value, sealed], [1, { secret: 's-1' }, true]);
    },
  );

  await check('idempotentHandler: a retried POST replays the stored response', async () => {
    let runs = 0;
    const handler = idempotentHandler(
      async (request: Request) =>
        new Response(JSON.stringify({ order: ++runs, body: await request.text() }), {
          status: 201,
          headers: { 'content-type': 'application/json' },
        }),
      { store: createMemoryStore(), scope: () => 'tenant-1' },
    );
    const post = () =>
      handler(
        new Request('https://shop.test/orders', {
          method: 'POST',
          headers: { 'idempotency-key': '"order-1"', 'content-type': 'application/json' },
          body: '{"sku":"A1"}',
        }),
      );
    const first = await post();
    const second = await post();
    return same(
      [runs, first.status, second.status, await second.text()],
      [1, 201, 201, JSON.stringify({ order: 1, body: '{"sku":"A1"}' })],
    );
  });

  const facts: RuntimeFacts = {
    isNode,
    hasAsyncContext,
    nodeCrypto: nodeCrypto !== undefined,
    userAgent: (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent,
  };
  return { facts, results };
}
