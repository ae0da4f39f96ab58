import { randomUUID } from 'node:crypto';
import { generateText, isStepCount, streamText, type Tool, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createIdempotency,
  createMemoryStore,
  DriftError,
  type IdempotencyStore,
  InvalidInputError,
  idempotencyContext,
  idempotentTool,
  idempotentTools,
  OutcomeUnknownError,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  StoreUnavailableError,
} from './index.js';
import {
  modelCalls,
  type ScriptStep,
  scriptedModel,
  toolResultsSeen,
} from './test-utils/script-model.js';

const charge = { amount: 1999, currency: 'usd' };

/** A charge_card tool whose side effect is counted. */
function chargeTool() {
  const effects: unknown[] = [];
  const chargeCard = tool({
    description: 'Charge a card.',
    inputSchema: z.object({ amount: z.number(), currency: z.string() }),
    execute: async ({ amount, currency }) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      effects.push({ amount, currency });
      return { chargeId: `ch_${effects.length}`, amount };
    },
  });
  return { chargeCard, effects };
}

type Mode = 'generateText' | 'streamText';

/** Run the real tool loop of the AI SDK with a scripted model. */
async function runLoop(
  mode: Mode,
  tools: Record<string, Tool>,
  steps: ScriptStep[],
  extra: { prompt?: string; toolsContext?: Record<string, unknown> } = {},
) {
  const model = scriptedModel(steps);
  const common = {
    model,
    tools,
    prompt: extra.prompt ?? 'Charge my card $19.99.',
    stopWhen: isStepCount(10),
    ...(extra.toolsContext === undefined ? {} : { toolsContext: extra.toolsContext as never }),
  };
  if (mode === 'generateText') {
    const result = await generateText(common);
    return { steps: result.steps, seen: modelCalls(model).map(toolResultsSeen), preliminary: [] };
  }
  const result = streamText({ ...common, onError: () => {} });
  const preliminary: unknown[] = [];
  for await (const part of result.fullStream) {
    if (part.type === 'tool-result' && part.preliminary === true) preliminary.push(part.output);
  }
  return { steps: await result.steps, seen: modelCalls(model).map(toolResultsSeen), preliminary };
}

function outputs(steps: Awaited<ReturnType<typeof runLoop>>['steps']): unknown[] {
  return steps.flatMap((step) =>
    step.content
      .filter((part) => part.type === 'tool-result' || part.type === 'tool-error')
      .map((part) => (part.type === 'tool-result' ? part.output : part.error)),
  );
}

const once = { calls: [{ tool: 'charge_card', input: charge }] };

describe.each<Mode>(['generateText', 'streamText'])('through %s', (mode) => {
  it('(1) the same call again in a later step runs once; the model sees replayed: true', async () => {
    const { chargeCard, effects } = chargeTool();
    const tools = idempotentTools({ charge_card: chargeCard }, { store: createMemoryStore() });
    const { steps, seen } = await runLoop(mode, tools, [once, once]);
    expect(effects).toHaveLength(1);
    expect(outputs(steps)).toEqual([
      { chargeId: 'ch_1', amount: 1999 },
      { chargeId: 'ch_1', amount: 1999, replayed: true },
    ]);
    // The third model call is shown both results; the second one is marked.
    expect(seen[2]).toEqual([
      { type: 'json', value: { chargeId: 'ch_1', amount: 1999 } },
      { type: 'json', value: { chargeId: 'ch_1', amount: 1999, replayed: true } },
    ]);
  });

  it('(2) two identical calls in one step run once', async () => {
    const { chargeCard, effects } = chargeTool();
    const tools = idempotentTools({ charge_card: chargeCard }, { store: createMemoryStore() });
    const twice = { calls: [once.calls[0]!, once.calls[0]!] };
    const { steps } = await runLoop(mode, tools, [twice]);
    expect(effects).toHaveLength(1);
    const results = outputs(steps) as Array<{ chargeId: string; replayed?: boolean }>;
    expect(results.map((r) => r.chargeId)).toEqual(['ch_1', 'ch_1']);
    expect(results.filter((r) => r.replayed === true)).toHaveLength(1);
  });

  it('(3) a new turn with the same args runs again; a resumed turn replays', async () => {
    const { chargeCard, effects } = chargeTool();
    const store = createMemoryStore();
    const tools = idempotentTools({ charge_card: chargeCard }, { store });
    await runLoop(mode, tools, [once], { prompt: 'Charge my card $19.99.' });
    await runLoop(mode, tools, [once], { prompt: 'Charge it once more, please.' });
    expect(effects).toHaveLength(2);
    // The first conversation resumed (same messages): replayed, not run.
    const { steps } = await runLoop(mode, tools, [once], { prompt: 'Charge my card $19.99.' });
    expect(effects).toHaveLength(2);
    expect(outputs(steps)).toEqual([{ chargeId: 'ch_1', amount: 1999, replayed: true }]);
  });

  it('(4) drift, outcome-unknown and store-down reach the model as tool errors with guidance', async () => {
    const { chargeCard, effects } = chargeTool();
    const store = createMemoryStore();
    const idempotency = createIdempotency({ store });
    const tools = idempotentTools(
      { charge_card: chargeCard },
      {
        idempotency,
        turnId: 'turn-4',
        policies: { charge_card: { businessKey: () => 'order-7' } },
      },
    );
    // Drift: the same business key with other args.
    const { steps, seen } = await runLoop(mode, tools, [
      once,
      { calls: [{ tool: 'charge_card', input: { amount: 2999, currency: 'usd' } }] },
    ]);
    expect(effects).toHaveLength(1);
    const drift = outputs(steps)[1];
    expect(DriftError.isInstance(drift)).toBe(true);
    const shown = seen[2]?.[1];
    expect(shown?.type).toBe('error-text');
    expect(JSON.parse(String(shown?.value))).toMatchObject({
      error: 'drift',
      next: 'change-arguments',
      message: expect.stringContaining('Repeat the original arguments'),
    });

    // Outcome unknown: an earlier attempt claimed the call and died (its lease ran out).
    const { key, fingerprint } = idempotency.keyOf({
      toolName: 'charge_card',
      turnId: 'turn-dead',
      args: charge,
    });
    await store.claim({ key, fingerprint, token: randomUUID(), leaseMs: 1, ttlMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const dead = idempotentTools({ charge_card: chargeCard }, { idempotency, turnId: 'turn-dead' });
    const unknown = await runLoop(mode, dead, [once]);
    expect(effects).toHaveLength(1);
    expect(OutcomeUnknownError.isInstance(outputs(unknown.steps)[0])).toBe(true);
    expect(JSON.parse(String(unknown.seen[1]?.[0]?.value))).toMatchObject({
      error: 'outcome_unknown',
      next: 'check-first',
    });

    // Store down: fail closed, the tool does not run.
    const down = Object.assign(Object.create(store) as IdempotencyStore, {
      claim: () => Promise.reject(new Error('ECONNREFUSED')),
    });
    const closed = idempotentTools({ charge_card: chargeCard }, { store: down });
    const failed = await runLoop(mode, closed, [once]);
    expect(effects).toHaveLength(1);
    expect(StoreUnavailableError.isInstance(outputs(failed.steps)[0])).toBe(true);
    expect(JSON.parse(String(failed.seen[1]?.[0]?.value))).toMatchObject({
      error: 'store_unavailable',
      next: 'retry-later',
    });
  });

  it("the tool's own error stays as it is and frees the call for a retry", async () => {
    let attempts = 0;
    const flaky = tool({
      inputSchema: z.object({ amount: z.number() }),
      execute: async () => {
        attempts++;
        if (attempts === 1) throw new Error('card network timeout');
        return { ok: true };
      },
    });
    const tools = idempotentTools({ pay: flaky }, { store: createMemoryStore() });
    const call = { calls: [{ tool: 'pay', input: { amount: 1 } }] };
    const { steps, seen } = await runLoop(mode, tools, [call, call, call]);
    expect(attempts).toBe(2);
    expect(seen[1]).toEqual([{ type: 'error-text', value: 'Error: card network timeout' }]);
    expect(outputs(steps).slice(1)).toEqual([{ ok: true }, { ok: true, replayed: true }]);
  });

  it('a streaming tool: the final output is stored, a replay yields it', async () => {
    let runs = 0;
    const deploy = tool({
      inputSchema: z.object({ service: z.string() }),
      async *execute({ service }) {
        runs++;
        yield { status: 'deploying', service };
        await new Promise((resolve) => setTimeout(resolve, 5));
        yield { status: 'live', service, deployId: `d_${runs}` };
      },
    });
    const tools = idempotentTools({ deploy }, { store: createMemoryStore() });
    const call = { calls: [{ tool: 'deploy', input: { service: 'api' } }] };
    const { steps, seen, preliminary } = await runLoop(mode, tools, [call, call]);
    expect(runs).toBe(1);
    if (mode === 'streamText') {
      // The fresh run streams its progress; the replay yields the stored final output once.
      expect(preliminary).toEqual([
        { status: 'deploying', service: 'api' },
        { status: 'live', service: 'api', deployId: 'd_1' },
        { status: 'live', service: 'api', deployId: 'd_1', replayed: true },
      ]);
    }
    expect(outputs(steps)).toEqual([
      { status: 'live', service: 'api', deployId: 'd_1' },
      { status: 'live', service: 'api', deployId: 'd_1', replayed: true },
    ]);
    expect(seen[2]?.[1]).toEqual({
      type: 'json',
      value: { status: 'live', service: 'api', deployId: 'd_1', replayed: true },
    });
  });
});

describe('replay shapes', () => {
  it('string outputs become { result, replayed }; toModelOutput gets the original and is marked', async () => {
    let runs = 0;
    const note = tool({
      inputSchema: z.object({ text: z.string() }),
      execute: async ({ text }) => {
        runs++;
        return `saved: ${text}`;
      },
    });
    const receipt = tool({
      inputSchema: z.object({ id: z.string() }),
      execute: async ({ id }) => {
        runs++;
        return { id, cents: 500 };
      },
      toModelOutput: ({ output }) => ({ type: 'text', value: `receipt ${output.id}` }),
    });
    const tools = idempotentTools({ note, receipt }, { store: createMemoryStore() });
    const step = {
      calls: [
        { tool: 'note', input: { text: 'hi' } },
        { tool: 'receipt', input: { id: 'r1' } },
      ],
    };
    const { steps, seen } = await runLoop('generateText', tools, [step, step]);
    expect(runs).toBe(2);
    expect(outputs(steps)).toEqual([
      'saved: hi',
      { id: 'r1', cents: 500 },
      { result: 'saved: hi', replayed: true },
      { id: 'r1', cents: 500, replayed: true },
    ]);
    expect(seen[2]).toEqual([
      { type: 'text', value: 'saved: hi' },
      { type: 'text', value: 'receipt r1' },
      { type: 'json', value: { result: 'saved: hi', replayed: true } },
      { type: 'json', value: { result: 'receipt r1', replayed: true } },
    ]);
  });

  it('an execute that returns an AsyncIterable (not a generator) gives its last output', async () => {
    let runs = 0;
    const progress = tool({
      inputSchema: z.object({ job: z.string() }),
      execute: ({ job }) => {
        runs++;
        return (async function* () {
          yield { job, pct: 50 };
          yield { job, pct: 100 };
        })();
      },
    });
    const tools = idempotentTools({ progress }, { store: createMemoryStore() });
    const call = { calls: [{ tool: 'progress', input: { job: 'j1' } }] };
    const { steps } = await runLoop('streamText', tools, [call, call]);
    expect(runs).toBe(1);
    expect(outputs(steps)).toEqual([
      { job: 'j1', pct: 100 },
      { job: 'j1', pct: 100, replayed: true },
    ]);
  });

  it('markFresh marks fresh outputs replayed: false', async () => {
    const { chargeCard } = chargeTool();
    const tools = idempotentTools(
      { charge_card: chargeCard },
      { store: createMemoryStore(), markFresh: true },
    );
    const { steps } = await runLoop('generateText', tools, [once]);
    expect(outputs(steps)).toEqual([{ chargeId: 'ch_1', amount: 1999, replayed: false }]);
  });
});

describe('turn id and scope', () => {
  it('an explicit turnId (wrap per request) ties calls across different messages', async () => {
    const { chargeCard, effects } = chargeTool();
    const store = createMemoryStore();
    for (const prompt of ['Charge me.', 'Charge me, again?']) {
      const tools = idempotentTools({ charge_card: chargeCard }, { store, turnId: 'req-42' });
      await runLoop('generateText', tools, [once], { prompt });
    }
    expect(effects).toHaveLength(1);
  });

  it('reads the turnId of the tool context (toolsContext) when the tool declares one', async () => {
    const effects: unknown[] = [];
    const refund = tool({
      inputSchema: z.object({ chargeId: z.string() }),
      contextSchema: z.object({ turnId: z.string() }),
      execute: async ({ chargeId }, { context }) => {
        effects.push(chargeId);
        return { refunded: chargeId, turn: context.turnId };
      },
    });
    const tools = idempotentTools({ refund }, { store: createMemoryStore() });
    const call = { calls: [{ tool: 'refund', input: { chargeId: 'ch_1' } }] };
    const toolsContext = { refund: { turnId: 'turn-ctx' } };
    await runLoop('generateText', tools, [call], { prompt: 'Refund it.', toolsContext });
    await runLoop('generateText', tools, [call], { prompt: 'Refund, again', toolsContext });
    expect(effects).toHaveLength(1);
    await runLoop('generateText', tools, [call], {
      prompt: 'Refund it.',
      toolsContext: { refund: { turnId: 'turn-other' } },
    });
    expect(effects).toHaveLength(2);
  });

  it('scope (a function of the call) separates tenants', async () => {
    const { chargeCard, effects } = chargeTool();
    const store = createMemoryStore();
    for (const tenant of ['acme', 'globex', 'acme']) {
      const tools = idempotentTools(
        { charge_card: chargeCard },
        { store, turnId: 'same-turn', scope: () => tenant },
      );
      await runLoop('generateText', tools, [once]);
    }
    expect(effects).toHaveLength(2);
  });

  it('gives execute the idempotency key to send on to the vendor', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const keys: unknown[] = [];
    const send = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async (_input, options) => {
        keys.push(idempotencyContext(options)?.key);
        return { sent: true };
      },
    });
    const tools = idempotentTools({ send }, { idempotency, turnId: 'turn-k' });
    await runLoop('generateText', tools, [{ calls: [{ tool: 'send', input: { to: 'a@b.c' } }] }]);
    const expected = idempotency.keyOf({
      toolName: 'send',
      turnId: 'turn-k',
      args: { to: 'a@b.c' },
    });
    expect(keys).toEqual([expected.key]);
  });
});

describe('wrapping', () => {
  it('keeps every other field, notes retry safety, leaves excluded and provider tools alone', async () => {
    const { chargeCard } = chargeTool();
    const lookup = tool({
      description: 'Look up a charge.',
      inputSchema: z.object({ id: z.string() }),
      execute: async () => ({}),
    });
    const webSearch = {
      type: 'provider',
      id: 'mock.web_search',
      isProviderExecuted: true,
      args: {},
      inputSchema: z.object({ q: z.string() }),
    } as unknown as Tool;
    const dynamic = tool({
      description: ({ context }) => `Ship to ${context.region}.`,
      inputSchema: z.object({ sku: z.string() }),
      contextSchema: z.object({ region: z.string() }),
      execute: async () => ({}),
    });
    const tools = idempotentTools(
      { charge_card: chargeCard, lookup, web_search: webSearch, ship: dynamic },
      { store: createMemoryStore(), exclude: ['lookup'] },
    );
    expect(tools.charge_card.inputSchema).toBe(chargeCard.inputSchema);
    expect(tools.charge_card.description).toBe(`Charge a card.\n\n${RETRY_SAFE_NOTE}`);
    expect(tools.charge_card.execute).not.toBe(chargeCard.execute);
    expect(tools.lookup).toBe(lookup);
    expect(tools.web_search).toBe(webSearch);
    const describe = tools.ship.description as (options: { context: { region: string } }) => string;
    expect(describe({ context: { region: 'EU' } })).toBe(`Ship to EU.\n\n${RETRY_SAFE_NOTE}`);
  });

  it('unsafe tools run every time and say so', async () => {
    const { chargeCard, effects } = chargeTool();
    const single = idempotentTool('charge_card', chargeCard, {
      store: createMemoryStore(),
      unsafe: true,
    });
    expect(single.description).toBe(`Charge a card.\n\n${RETRY_UNSAFE_NOTE}`);
    await runLoop('generateText', { charge_card: single }, [once, once]);
    expect(effects).toHaveLength(2);
  });

  it('idempotentTool wraps one tool with its policy', async () => {
    const { chargeCard, effects } = chargeTool();
    const single = idempotentTool('charge_card', chargeCard, {
      store: createMemoryStore(),
      policy: { businessKey: (args) => `${args.currency}-${args.amount}` },
    });
    await runLoop('generateText', { charge_card: single }, [once], { prompt: 'one' });
    await runLoop('generateText', { charge_card: single }, [once], { prompt: 'two' });
    expect(effects).toHaveLength(1);
  });

  it('rejects bad input with InvalidInputError that says what to do', () => {
    const { chargeCard } = chargeTool();
    const store = createMemoryStore();
    const bad = (fn: () => unknown, field: string) => {
      let caught: unknown;
      try {
        fn();
      } catch (error) {
        caught = error;
      }
      expect(InvalidInputError.isInstance(caught)).toBe(true);
      expect((caught as InvalidInputError).field).toBe(field);
    };
    bad(() => idempotentTools(null as never, { store }), 'tools');
    bad(() => idempotentTools({ x: 1 } as never, { store }), 'tools');
    bad(
      () => idempotentTools({ x: { inputSchema: z.object({}), execute: 1 } } as never, { store }),
      'execute',
    );
    bad(() => idempotentTools({ charge_card: chargeCard }, {} as never), 'store');
    bad(
      () =>
        idempotentTools({ charge_card: chargeCard }, { store, exclude: ['nope' as 'charge_card'] }),
      'exclude',
    );
    bad(
      () => idempotentTools({ charge_card: chargeCard }, { store, turnId: 7 as never }),
      'turnId',
    );
    bad(() => idempotentTools({ charge_card: chargeCard }, { store, ttl: -1 }), 'ttl');
    bad(() => idempotentTool('', chargeCard, { store }), 'toolName');
  });
});
