/**
 * toolRetryMiddleware retries `handler(request)`: the whole chain below it, down to the tool and
 * the ToolMessage built from its result. Whatever fails on the way back (a reply lost, a
 * timeout), the retry meets the outcome the first attempt stored, because the guard sits at the
 * innermost point (the tool's own `_call`), whatever the order of the middleware.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryStore } from '@idempotent-tools/core';
import { AIMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import {
  type AgentMiddleware,
  createAgent,
  createMiddleware,
  toolRetryMiddleware,
} from 'langchain';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { idempotentToolsMiddleware } from './middleware.js';
import { human, ticketTool, toolResults } from './test-utils/fixtures.js';
import { idempotentTools } from './tools.js';
import { getIdempotencyKey } from './wrap-tool.js';

// (cast: langchain's own middleware types trip over exactOptionalPropertyTypes)
const retry = () =>
  toolRetryMiddleware({
    maxRetries: 2,
    initialDelayMs: 0,
    jitter: false,
  }) as unknown as AgentMiddleware;
const script = () =>
  fakeModel()
    .respondWithTools([{ name: 'create_ticket', args: { title: 'Login fails' } }])
    .respond(new AIMessage('Done.'));
const config = () => ({ configurable: { thread_id: `thread-${randomUUID()}` } });

/** The first reply is lost on its way back, after the tool ran (a dropped connection). */
function lossyReply(): AgentMiddleware {
  let lost = false;
  return createMiddleware({
    name: 'LossyReply',
    wrapToolCall: async (request, handler) => {
      const reply = await handler(request);
      if (!lost) {
        lost = true;
        throw new Error('ECONNRESET: the reply was lost');
      }
      return reply;
    },
  });
}

/** The first attempt times out after 20 ms; the tool goes on running meanwhile. */
function firstAttemptTimesOut(): AgentMiddleware {
  let attempts = 0;
  return createMiddleware({
    name: 'FirstAttemptTimesOut',
    wrapToolCall: async (request, handler) => {
      if (attempts++ > 0) return handler(request);
      return Promise.race([
        handler(request),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('ETIMEDOUT: no reply within 20 ms')), 20),
        ),
      ]);
    },
  });
}

type Setup = (
  fault: AgentMiddleware,
  effects: string[],
) => { tools: StructuredToolInterface[]; middleware: AgentMiddleware[] };
const setups: [string, Setup][] = [
  [
    'middleware [toolRetry, lossy, idempotent]',
    (lossy, effects) => ({
      tools: [ticketTool(effects, 60)],
      middleware: [retry(), lossy, idempotentToolsMiddleware({ store: createMemoryStore() })],
    }),
  ],
  [
    'middleware [idempotent, toolRetry, lossy]',
    (lossy, effects) => ({
      tools: [ticketTool(effects, 60)],
      middleware: [idempotentToolsMiddleware({ store: createMemoryStore() }), retry(), lossy],
    }),
  ],
  [
    'wrapped tools [toolRetry, lossy]',
    (lossy, effects) => ({
      tools: idempotentTools([ticketTool(effects, 60)], { store: createMemoryStore() }),
      middleware: [retry(), lossy],
    }),
  ],
];

describe.each(setups)('toolRetryMiddleware, %s', (_name, setup) => {
  test('a reply lost after the tool ran: the retry replays, the tool ran once', async () => {
    const effects: string[] = [];
    const out = await createAgent({ model: script(), ...setup(lossyReply(), effects) }).invoke(
      { messages: [human('Open a ticket', 'm1')] },
      config(),
    );
    expect(effects).toHaveLength(1);
    expect(toolResults(out.messages).map((r) => r.content)).toEqual([
      { ticketId: 'T-1', title: 'Login fails', replayed: true },
    ]);
  });

  test('a timeout while the tool still runs: the retry waits for it and replays', async () => {
    const effects: string[] = [];
    const out = await createAgent({
      model: script(),
      ...setup(firstAttemptTimesOut(), effects),
    }).invoke({ messages: [human('Open a ticket', 'm1')] }, config());
    await new Promise((r) => setTimeout(r, 150)); // let a stray first attempt finish
    expect(effects).toHaveLength(1);
    expect(toolResults(out.messages)[0]?.content).toEqual({
      ticketId: 'T-1',
      title: 'Login fails',
      replayed: true,
    });
  });
});

describe('toolRetryMiddleware without idempotency (control)', () => {
  test.each([
    ['a lost reply', lossyReply],
    ['a timeout', firstAttemptTimesOut],
  ])('%s makes the tool run twice', async (_name, fault) => {
    const effects: string[] = [];
    await createAgent({
      model: script(),
      tools: [ticketTool(effects, 60)],
      middleware: [retry(), fault()],
    }).invoke({ messages: [human('Open a ticket', 'm1')] }, config());
    await new Promise((r) => setTimeout(r, 150));
    expect(effects).toHaveLength(2);
  });
});

describe('toolRetryMiddleware, a tool that throws after its side effect', () => {
  test('the retry runs the tool again (the claim was released) with the same key: the vendor dedupes', async () => {
    const charges = new Map<string, number>(); // a vendor that dedupes by Idempotency-Key
    const keys: (string | undefined)[] = [];
    const charge = tool(
      async ({ cents }, config) => {
        const key = getIdempotencyKey(config);
        keys.push(key);
        if (key !== undefined && !charges.has(key)) charges.set(key, cents);
        if (keys.length === 1) throw new Error('socket hang up'); // the vendor's reply is lost
        return { charged: cents };
      },
      { name: 'charge_card', description: 'Charge.', schema: z.object({ cents: z.number() }) },
    );
    const model = fakeModel()
      .respondWithTools([{ name: 'charge_card', args: { cents: 500 } }])
      .respond(new AIMessage('Done.'));
    const out = await createAgent({
      model,
      tools: [charge],
      middleware: [retry(), idempotentToolsMiddleware({ store: createMemoryStore() })],
    }).invoke({ messages: [human('Charge 5 USD', 'm1')] }, config());

    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^v1_/);
    expect(keys[1]).toBe(keys[0]);
    expect([...charges.values()]).toEqual([500]);
    expect(toolResults(out.messages)[0]?.content).toEqual({ charged: 500 });
  });
});
