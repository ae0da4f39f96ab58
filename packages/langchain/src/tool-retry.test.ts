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

/**
 * A fault that ends the first attempt while the tool still runs: the ticket tool tells it when
 * it started (no wall-clock timeout to race), and the attempt fails right then.
 */
function firstAttemptTimesOut() {
  let started: () => void = () => {};
  const toolStarted = new Promise<void>((resolve) => {
    started = resolve;
  });
  let attempts = 0;
  const middleware = createMiddleware({
    name: 'FirstAttemptTimesOut',
    wrapToolCall: async (request, handler) => {
      if (attempts++ > 0) return handler(request);
      const timeout = toolStarted.then(() => {
        throw new Error('ETIMEDOUT: no reply in time');
      });
      return Promise.race([handler(request), timeout]);
    },
  });
  return { middleware, onStart: () => started() };
}
const lossyFault = () => ({ middleware: lossyReply(), onStart: undefined });

type Fault = { middleware: AgentMiddleware; onStart: (() => void) | undefined };
type Setup = (
  fault: AgentMiddleware,
  tool: StructuredToolInterface,
) => { tools: StructuredToolInterface[]; middleware: AgentMiddleware[] };
const setups: [string, Setup][] = [
  [
    'middleware [toolRetry, lossy, idempotent]',
    (fault, ticket) => ({
      tools: [ticket],
      middleware: [retry(), fault, idempotentToolsMiddleware({ store: createMemoryStore() })],
    }),
  ],
  [
    'middleware [idempotent, toolRetry, lossy]',
    (fault, ticket) => ({
      tools: [ticket],
      middleware: [idempotentToolsMiddleware({ store: createMemoryStore() }), retry(), fault],
    }),
  ],
  [
    'wrapped tools [toolRetry, lossy]',
    (fault, ticket) => ({
      tools: idempotentTools([ticket], { store: createMemoryStore() }),
      middleware: [retry(), fault],
    }),
  ],
];
/** The agent of a setup with a fault, and its ticket tool's effects. */
function faulty(setup: Setup, fault: Fault) {
  const effects: string[] = [];
  const { middleware, onStart } = fault;
  const agent = createAgent({
    model: script(),
    ...setup(middleware, ticketTool(effects, 60, onStart)),
  });
  return { agent, effects };
}

describe.each(setups)('toolRetryMiddleware, %s', (_name, setup) => {
  test('a reply lost after the tool ran: the retry replays, the tool ran once', async () => {
    const { agent, effects } = faulty(setup, lossyFault());
    const out = await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, config());
    expect(effects).toHaveLength(1);
    expect(toolResults(out.messages).map((r) => r.content)).toEqual([
      { ticketId: 'T-1', title: 'Login fails', replayed: true },
    ]);
  });

  test('a timeout while the tool still runs: the retry waits for it and replays', async () => {
    const { agent, effects } = faulty(setup, firstAttemptTimesOut());
    const out = await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, config());
    // The replay waited for the first attempt's outcome: it has finished by now.
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
    ['a lost reply', lossyFault],
    ['a timeout', firstAttemptTimesOut],
  ])('%s makes the tool run twice', async (_name, fault) => {
    const { agent, effects } = faulty(
      (middleware, ticket) => ({ tools: [ticket], middleware: [retry(), middleware] }),
      fault(),
    );
    await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, config());
    // The stray first attempt started its sleep before the retry did: it has finished too.
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
