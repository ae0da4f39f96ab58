import { randomUUID } from 'node:crypto';
import {
  createMemoryStore,
  OutcomeUnknownError,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { generateText, isStepCount, type ModelMessage, streamText, type Tool, tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  DriftError,
  type IdempotencyStore,
  idempotencyContext,
  idempotentTool,
  idempotentTools,
} from './index.js';
import { type Api, type ScriptStep, startScriptedModel } from './test-utils/scripted-model.js';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

/** Every test is one conversation of its own unless it says otherwise. */
const conversationId = 'chat-1';

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

/** A tool output as the model read it (Chat Completions / Responses send text): JSON parsed. */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A tool error as the model read it: `@ai-sdk/openai` sends error text as `{ "error": text }`. */
function errorSeen(output: unknown): unknown {
  expect(output).toEqual({ error: expect.any(String) });
  return parsed((output as { error: string }).error);
}

/**
 * Run the real tool loop of the AI SDK (generateText / streamText) with the real `@ai-sdk/openai`
 * client against the scripted server; `seen[i]`: the tool outputs the i-th model request carried.
 */
async function runLoop(
  mode: Mode,
  tools: Record<string, Tool>,
  steps: ScriptStep[],
  extra: {
    prompt?: string;
    messages?: ModelMessage[];
    toolsContext?: Record<string, unknown>;
    api?: Api;
  } = {},
) {
  const scripted = await startScriptedModel(steps);
  closing.push(scripted.close);
  const common = {
    model: scripted.model(extra.api ?? 'chat'),
    tools,
    ...(extra.messages === undefined
      ? { prompt: extra.prompt ?? 'Charge my card $19.99.' }
      : { messages: extra.messages }),
    stopWhen: isStepCount(10),
    ...(extra.toolsContext === undefined ? {} : { toolsContext: extra.toolsContext as never }),
  };
  const seen = () => scripted.seen.map((outputs) => outputs.map(parsed));
  if (mode === 'generateText') {
    const result = await generateText(common);
    return {
      steps: result.steps,
      seen: seen(),
      preliminary: [],
      messages: result.response.messages,
    };
  }
  const result = streamText({ ...common, onError: () => {} });
  const preliminary: unknown[] = [];
  for await (const part of result.fullStream) {
    if (part.type === 'tool-result' && part.preliminary === true) preliminary.push(part.output);
  }
  const { messages } = await result.response;
  return { steps: await result.steps, seen: seen(), preliminary, messages };
}

function outputs(steps: Awaited<ReturnType<typeof runLoop>>['steps']): unknown[] {
  return steps.flatMap((step) =>
    step.content
      .filter((part) => part.type === 'tool-result' || part.type === 'tool-error')
      .map((part) => (part.type === 'tool-result' ? part.output : part.error)),
  );
}

const once = { calls: [{ tool: 'charge_card', input: charge }] };

describe.each<[Mode, Api]>([
  ['generateText', 'chat'],
  ['generateText', 'responses'],
  ['streamText', 'chat'],
  ['streamText', 'responses'],
])('through %s over @ai-sdk/openai %s', (mode, api) => {
  const loop = (tools: Record<string, Tool>, steps: ScriptStep[], extra = {}) =>
    runLoop(mode, tools, steps, { api, ...extra });

  it('(1) the same call again in a later step runs once; the model sees replayed: true', async () => {
    const { chargeCard, effects } = chargeTool();
    const tools = idempotentTools(
      { charge_card: chargeCard },
      { store: createMemoryStore(), conversationId },
    );
    const { steps, seen } = await loop(tools, [once, once]);
    expect(effects).toHaveLength(1);
    expect(outputs(steps)).toEqual([
      { chargeId: 'ch_1', amount: 1999 },
      { chargeId: 'ch_1', amount: 1999, replayed: true },
    ]);
    // The third model request carries both results; the second one is marked.
    expect(seen[2]).toEqual([
      { chargeId: 'ch_1', amount: 1999 },
      { chargeId: 'ch_1', amount: 1999, replayed: true },
    ]);
  });

  it('(2) two identical calls in one step run once', async () => {
    const { chargeCard, effects } = chargeTool();
    const tools = idempotentTools(
      { charge_card: chargeCard },
      { store: createMemoryStore(), conversationId },
    );
    const twice = { calls: [once.calls[0]!, once.calls[0]!] };
    const { steps } = await loop(tools, [twice]);
    expect(effects).toHaveLength(1);
    const results = outputs(steps) as Array<{ chargeId: string; replayed?: boolean }>;
    expect(results.map((r) => r.chargeId)).toEqual(['ch_1', 'ch_1']);
    expect(results.filter((r) => r.replayed === true)).toHaveLength(1);
  });

  it('(3) a new user turn with the same args runs again; the first turn sent again replays', async () => {
    const { chargeCard, effects } = chargeTool();
    const tools = idempotentTools(
      { charge_card: chargeCard },
      { store: createMemoryStore(), conversationId },
    );
    const first: ModelMessage[] = [{ role: 'user', content: 'Charge my card $19.99.' }];
    const turn1 = await loop(tools, [once], { messages: first });
    const second: ModelMessage[] = [
      ...first,
      ...turn1.messages,
      { role: 'user', content: 'Charge my card $19.99.' }, // the same words, a new turn
    ];
    await loop(tools, [once], { messages: second });
    expect(effects).toHaveLength(2);
    // The first turn sent again (a lost reply, a restarted server): replayed, not run.
    const { steps } = await loop(tools, [once], { messages: first });
    expect(effects).toHaveLength(2);
    expect(outputs(steps)).toEqual([{ chargeId: 'ch_1', amount: 1999, replayed: true }]);
  });

  it('(4) drift, outcome-unknown and store-down reach the model as tool errors with guidance', async () => {
    const { chargeCard, effects } = chargeTool();
    let now = Date.now();
    const store = createMemoryStore({ now: () => now });
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
    const { steps, seen } = await loop(tools, [
      once,
      { calls: [{ tool: 'charge_card', input: { amount: 2999, currency: 'usd' } }] },
    ]);
    expect(effects).toHaveLength(1);
    const drift = outputs(steps)[1];
    expect(DriftError.isInstance(drift)).toBe(true);
    expect(errorSeen(seen[2]?.[1])).toMatchObject({
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
    await store.claim({ key, fingerprint, token: randomUUID(), leaseMs: 1_000, ttlMs: 3_600_000 });
    now += 60_000; // the store's clock: the lease is long over
    const dead = idempotentTools({ charge_card: chargeCard }, { idempotency, turnId: 'turn-dead' });
    const unknown = await loop(dead, [once]);
    expect(effects).toHaveLength(1);
    expect(OutcomeUnknownError.isInstance(outputs(unknown.steps)[0])).toBe(true);
    expect(errorSeen(unknown.seen[1]?.[0])).toMatchObject({
      error: 'outcome_unknown',
      next: 'check-first',
    });

    // Store down: fail closed, the tool does not run.
    const down = Object.assign(Object.create(store) as IdempotencyStore, {
      claim: () => Promise.reject(new Error('ECONNREFUSED')),
    });
    const closed = idempotentTools({ charge_card: chargeCard }, { store: down, conversationId });
    const failed = await loop(closed, [once]);
    expect(effects).toHaveLength(1);
    expect(StoreUnavailableError.isInstance(outputs(failed.steps)[0])).toBe(true);
    expect(errorSeen(failed.seen[1]?.[0])).toMatchObject({
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
    const tools = idempotentTools({ pay: flaky }, { store: createMemoryStore(), conversationId });
    const call = { calls: [{ tool: 'pay', input: { amount: 1 } }] };
    const { steps, seen } = await loop(tools, [call, call, call]);
    expect(attempts).toBe(2);
    expect(seen[1]?.map(errorSeen)).toEqual(['Error: card network timeout']);
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
    const tools = idempotentTools({ deploy }, { store: createMemoryStore(), conversationId });
    const call = { calls: [{ tool: 'deploy', input: { service: 'api' } }] };
    const { steps, seen, preliminary } = await loop(tools, [call, call]);
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
      status: 'live',
      service: 'api',
      deployId: 'd_1',
      replayed: true,
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
    const tools = idempotentTools(
      { note, receipt },
      { store: createMemoryStore(), conversationId },
    );
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
      'saved: hi',
      'receipt r1',
      { result: 'saved: hi', replayed: true },
      { result: 'receipt r1', replayed: true },
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
    const tools = idempotentTools({ progress }, { store: createMemoryStore(), conversationId });
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
      { store: createMemoryStore(), conversationId, markFresh: true },
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

  it('a turnId function reads the tool context (toolsContext) when the app puts it there', async () => {
    const effects: unknown[] = [];
    const refund = tool({
      inputSchema: z.object({ chargeId: z.string() }),
      contextSchema: z.object({ turnId: z.string() }),
      execute: async ({ chargeId }, { context }) => {
        effects.push(chargeId);
        return { refunded: chargeId, turn: context.turnId };
      },
    });
    const tools = idempotentTools(
      { refund },
      {
        store: createMemoryStore(),
        turnId: ({ options }) => options.context?.turnId as string | undefined,
      },
    );
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
      { store: createMemoryStore(), conversationId, exclude: ['lookup'] },
    );
    expect(tools.charge_card.inputSchema).toBe(chargeCard.inputSchema);
    expect(tools.charge_card.description).toBe(`Charge a card.\n\n${RETRY_SAFE_NOTE}`);
    expect(tools.charge_card.execute).not.toBe(chargeCard.execute);
    expect(tools.lookup).toBe(lookup);
    expect(tools.web_search).toBe(webSearch);
    expect(tools.ship.contextSchema).toBe(dynamic.contextSchema);
    const describe = tools.ship.description as (options: { context: { region: string } }) => string;
    expect(describe({ context: { region: 'EU' } })).toBe(`Ship to EU.\n\n${RETRY_SAFE_NOTE}`);
  });

  it("the tool's own onInputAvailable still runs", async () => {
    const { chargeCard, effects } = chargeTool();
    const seenInputs: unknown[] = [];
    const withHook = {
      ...chargeCard,
      onInputAvailable: ({ input }: { input: unknown }) => void seenInputs.push(input),
    } as Tool;
    const tools = idempotentTools(
      { charge_card: withHook },
      { store: createMemoryStore(), conversationId },
    );
    await runLoop('streamText', tools, [once]);
    expect(seenInputs).toEqual([charge]);
    expect(effects).toHaveLength(1);
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

  it('rejects bad input with a ConfigurationError that names the option', () => {
    const { chargeCard } = chargeTool();
    const store = createMemoryStore();
    const bad = (fn: () => unknown, option: string) => {
      let caught: unknown;
      try {
        fn();
      } catch (error) {
        caught = error;
      }
      expect(ConfigurationError.isInstance(caught)).toBe(true);
      expect((caught as ConfigurationError).option).toBe(option);
    };
    const charge_card = chargeCard;
    bad(() => idempotentTools(null as never, { store, conversationId }), 'tools');
    bad(() => idempotentTools({ x: 1 } as never, { store, conversationId }), 'tools');
    bad(
      () =>
        idempotentTools({ x: { inputSchema: z.object({}), execute: 1 } } as never, {
          store,
          conversationId,
        }),
      'execute',
    );
    bad(() => idempotentTools({ charge_card }, { conversationId } as never), 'store');
    bad(
      () =>
        idempotentTools(
          { charge_card },
          { store, conversationId, exclude: ['nope' as 'charge_card'] },
        ),
      'exclude',
    );
    bad(() => idempotentTools({ charge_card }, { store, turnId: 7 as never }), 'turnId');
    bad(() => idempotentTools({ charge_card }, { store, conversationId: '' }), 'conversationId');
    bad(() => idempotentTool('', chargeCard, { store, conversationId }), 'toolName');
    bad(() => idempotentTool('charge card', chargeCard, { store, conversationId }), 'toolName');
    // An invalid executor option: the executor's own error, naming the field.
    expect(() => idempotentTools({ charge_card }, { store, conversationId, ttl: -1 })).toThrow(
      expect.objectContaining({ field: 'ttl' }),
    );
  });
});

describe('made idempotent twice', () => {
  /** The ConfigurationError `fn` throws (fails the test when it throws nothing or another). */
  const refusal = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      if (ConfigurationError.isInstance(error)) return error;
      throw error;
    }
    throw new Error('expected a ConfigurationError, nothing was thrown');
  };

  it('refused when the tools are wrapped again (a set, one tool, a copy of a wrapped tool); nothing ran', async () => {
    const { chargeCard, effects } = chargeTool();
    const options = { store: createMemoryStore(), conversationId };
    const wrapped = idempotentTools({ charge_card: chargeCard }, options);
    const twice = refusal(() => idempotentTools(wrapped, options));
    expect(twice.option).toBe('tools');
    expect(twice.message).toMatch(/idempotentTools: tool "charge_card" is already idempotent/);
    const one = refusal(() => idempotentTool('charge_card', wrapped.charge_card, options));
    expect(one.message).toMatch(/idempotentTool: tool "charge_card" is already idempotent/);
    const single = idempotentTool('charge_card', chargeCard, options);
    refusal(() => idempotentTools({ charge_card: single }, options));
    // A copy of the wrapped tool (another description, say) keeps its wrapped execute.
    const copy = { ...wrapped.charge_card, description: 'Charge.' } as Tool;
    refusal(() => idempotentTools({ charge_card: copy }, options));
    expect(effects).toHaveLength(0);
    // The original tools wrap again as often as the app likes (per request).
    const again = idempotentTools({ charge_card: chargeCard }, options);
    await runLoop('generateText', again, [once]);
    expect(effects).toHaveLength(1);
  });
});
