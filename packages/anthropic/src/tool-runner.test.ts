/**
 * idempotentToolRunner: the SDK's own tool runner (`client.beta.messages.toolRunner`, threaded as
 * it runs by default) with `betaZodTool` tools, against the scripted Messages server.
 */
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/anthropic';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { ConfigurationError, createIdempotency, idempotentToolRunner } from './index.js';
import { client, runnerTurn, ticketSystem, ticketTool } from './test-utils/app.js';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function setup(respond: (turn: ModelTurn) => ScriptedReply, maxRetries = 0) {
  server = await startScriptedServer({ respond });
  const vendor = ticketSystem();
  const idempotency = createIdempotency({ store: createMemoryStore() });
  return { server, vendor, idempotency, anthropic: client(server.baseURL, maxRetries) };
}

const ticket = (title: string) => ({ name: 'create_ticket', input: { title } });
const parsed = (content: unknown) => JSON.parse(content as string) as Record<string, unknown>;
const user = (content: string) => [{ role: 'user' as const, content }];

const modes = [
  { name: 'JSON', stream: false },
  { name: 'streamed', stream: true },
  { name: 'streamed, runToolsEagerly', stream: true, runToolsEagerly: true },
];

for (const mode of modes) {
  const { name, ...settings } = mode;
  describe(`tool runner, ${name}`, () => {
    test('the model repeats a call in a later step: replayed, marked, one effect', async () => {
      const { vendor, idempotency, anthropic } = await setup((turn) =>
        turn.toolResults.length < 2 ? { toolUses: [ticket('Fire')] } : { text: 'ok' },
      );
      const tools = [ticketTool(vendor)];
      const { results } = await runnerTurn(
        anthropic,
        tools,
        user('Help'),
        { idempotency, conversationId: 'c1' },
        settings,
      );
      expect(vendor.tickets).toHaveLength(1);
      expect(results.map((r) => parsed(r.content))).toEqual([
        { ticket: 'T-1', title: 'Fire', priority: 'normal' },
        { ticket: 'T-1', title: 'Fire', priority: 'normal', replayed: true },
      ]);
    });

    test('two identical calls in one step: one effect, the other replayed', async () => {
      const { vendor, idempotency, anthropic } = await setup((turn) =>
        turn.toolResults.length === 0
          ? { toolUses: [ticket('Two'), ticket('Two')] }
          : { text: 'ok' },
      );
      const { results } = await runnerTurn(
        anthropic,
        [ticketTool(vendor)],
        user('Go'),
        { idempotency, conversationId: 'c1' },
        settings,
      );
      expect(vendor.tickets).toHaveLength(1);
      expect(results.map((r) => parsed(r.content).replayed).sort()).toEqual([true, undefined]);
    });

    test("a dropped connection after the tool ran, retried by the client's maxRetries: one effect", async () => {
      const { vendor, idempotency, anthropic, server } = await setup(
        (turn) => (turn.toolResults.length === 0 ? { toolUses: [ticket('Drop')] } : { text: 'ok' }),
        2,
      );
      server.inject(undefined, 'drop');
      await runnerTurn(
        anthropic,
        [ticketTool(vendor)],
        user('Go'),
        { idempotency, conversationId: 'c1' },
        settings,
      );
      expect(server.requests.map((r) => r.fault)).toEqual([undefined, 'drop', undefined]);
      expect(vendor.tickets).toHaveLength(1);
    });

    test('a broken reply, the app runs the turn again with a new runner: replayed, one effect', async () => {
      const { vendor, idempotency, anthropic, server } = await setup((turn) =>
        turn.toolResults.length === 0 ? { toolUses: [ticket('Cut')] } : { text: 'ok' },
      );
      server.inject(undefined, 'truncate');
      const options = { idempotency, conversationId: 'c1' };
      await expect(
        runnerTurn(anthropic, [ticketTool(vendor)], user('Go'), options, settings),
      ).rejects.toThrow();
      const { results } = await runnerTurn(anthropic, [ticketTool(vendor)], user('Go'), options, {
        ...settings,
        system: 'You open tickets. It is 09:00:07.',
      });
      expect(server.requests[1]?.fault).toBe('truncate');
      expect(vendor.tickets).toHaveLength(1);
      expect(parsed(results[0]?.content)).toMatchObject({ ticket: 'T-1', replayed: true });
    });
  });
}

describe('tool runner: what reaches the model and the developer', () => {
  test('the wrapped tools keep name, schema and description (plus the retry note)', async () => {
    const { vendor, idempotency, anthropic, server } = await setup(() => ({ text: 'hi' }));
    await runnerTurn(anthropic, [ticketTool(vendor)], user('Hi'), {
      idempotency,
      conversationId: 'c1',
    });
    const sent = (server.requests[0]?.body as { tools?: unknown } | undefined)?.tools;
    expect(sent).toEqual([
      {
        type: 'custom',
        name: 'create_ticket',
        description: expect.stringMatching(/^Open a support ticket\.\n\nSafe to retry/),
        input_schema: (ticketTool(vendor) as { input_schema?: unknown }).input_schema,
      },
    ]);
  });

  test('bad input from the model: an is_error result saying what to fix, nothing run', async () => {
    const { vendor, idempotency, anthropic } = await setup((turn) =>
      turn.toolResults.length === 0
        ? { toolUses: [{ name: 'create_ticket', input: { title: 7, priority: 'urgent' } }] }
        : { text: 'ok' },
    );
    const { results } = await runnerTurn(anthropic, [ticketTool(vendor)], user('Go'), {
      idempotency,
      conversationId: 'c1',
    });
    expect(vendor.tickets).toHaveLength(0);
    expect(results[0]?.is_error).toBe(true);
    const shown = parsed(results[0]?.content);
    expect(shown).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect(shown.message).toMatch(/create_ticket do not match.*title: .*priority: .*Nothing ran/s);
  });

  test('an idempotency error reaches the model as an is_error result (drift)', async () => {
    const { idempotency, anthropic } = await setup((turn) =>
      turn.toolResults.length === 0
        ? { toolUses: [{ name: 'subscribe', input: { email: 'a@b.c', plan: turn.userText } }] }
        : { text: 'ok' },
    );
    const runs: string[] = [];
    const subscribe = betaZodTool({
      name: 'subscribe',
      description: 'Subscribe.',
      inputSchema: z.object({ email: z.string(), plan: z.string() }),
      run: ({ plan }) => {
        runs.push(plan);
        return 'subscribed';
      },
    });
    const options = {
      idempotency,
      conversationId: 'c1',
      policies: { subscribe: { businessKey: (a: { email: string }) => a.email } },
    };
    await runnerTurn(anthropic, [subscribe], user('gold'), options as never);
    const { results } = await runnerTurn(anthropic, [subscribe], user('silver'), options as never);
    expect(runs).toEqual(['gold']);
    expect(results[0]?.is_error).toBe(true);
    expect(parsed(results[0]?.content)).toMatchObject({ error: 'drift' });
  });

  test('no conversation identity, bad options: a ConfigurationError when the runner is made', async () => {
    const { vendor, idempotency, anthropic } = await setup(() => ({ text: 'hi' }));
    const make = (options: object) => () =>
      idempotentToolRunner(
        anthropic,
        { model: 'm', max_tokens: 10, messages: user('Hi'), tools: [ticketTool(vendor)] },
        { idempotency, ...options },
      );
    expect(make({})).toThrow(ConfigurationError);
    expect(make({})).toThrow(/conversationId .* or turnId/);
    expect(make({ conversationId: 'c', unsafe: ['create_tickets'] })).toThrow(/no such tool/);
    expect(make({ conversationid: 'c' })).toThrow(/did you mean "conversationId"/);
    expect(make({ conversationId: 'c', policies: { create_ticket: { lease: 'long' } } })).toThrow(
      ConfigurationError,
    );
    expect(vendor.tickets).toHaveLength(0);
  });

  test('a turn that cannot be identified while running: thrown out of the runner, nothing ran, nothing more sent', async () => {
    const { vendor, idempotency, anthropic, server } = await setup(() => ({
      toolUses: [ticket('x')],
    }));
    const runner = idempotentToolRunner(
      anthropic,
      { model: 'm', max_tokens: 10, messages: user('Hi'), tools: [ticketTool(vendor)] },
      { idempotency, conversationId: () => undefined },
    );
    const error = await runner.runUntilDone().catch((e) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/Nothing ran/);
    expect(vendor.tickets).toHaveLength(0);
    expect(server.requests).toHaveLength(1);
  });

  test("a runner made from a runner's tools (runner.params.tools): refused when it is made, nothing ran", async () => {
    const { vendor, idempotency, anthropic, server } = await setup(() => ({
      toolUses: [ticket('x')],
    }));
    const options = { idempotency, conversationId: 'c1' };
    const first = idempotentToolRunner(
      anthropic,
      { model: 'm', max_tokens: 10, messages: user('Hi'), tools: [ticketTool(vendor)] },
      options,
    );
    const again = () => idempotentToolRunner(anthropic, { ...first.params }, options);
    expect(again).toThrow(ConfigurationError);
    expect(again).toThrow(/create_ticket" is already idempotent.*Wrap the original tools once/);
    expect(vendor.tickets).toHaveLength(0);
    expect(server.requests).toHaveLength(0);
  });

  test('turnId as a function of the call: the same turn id replays across conversations', async () => {
    const { vendor, idempotency, anthropic } = await setup((turn) =>
      turn.toolResults.length === 0 ? { toolUses: [ticket('Same')] } : { text: 'ok' },
    );
    const options = { idempotency, turnId: () => 'msg-user-42' };
    await runnerTurn(anthropic, [ticketTool(vendor)], user('One'), options);
    await runnerTurn(
      anthropic,
      [ticketTool(vendor)],
      [...user('Other history'), { role: 'assistant', content: 'x' }, ...user('One')],
      options,
    );
    expect(vendor.tickets).toHaveLength(1);
  });
});

/**
 * A turn that cannot be identified while the runner runs (here a conversationId function that
 * returns undefined) stops it before its next request: the ConfigurationError comes out of every
 * way an app reads the runner, streamed or not, never the abort error of the runner's next
 * request (`APIUserAbortError`), and the runner settles (`done()` rejects with it too). Nothing
 * runs and nothing more is sent.
 */
describe('tool runner: a developer error found while it runs, however the runner is read', () => {
  type Runner = ReturnType<typeof idempotentToolRunner<boolean>>;
  type Stream = Extract<Awaited<ReturnType<AsyncIterator<unknown>['next']>>['value'], object> & {
    finalMessage(): Promise<unknown>;
    finalText(): Promise<string>;
    done(): Promise<void>;
    emitted(event: 'finalMessage'): Promise<unknown>;
    [Symbol.asyncIterator](): AsyncIterator<unknown>;
  };
  const each = async (runner: Runner, body: (item: Stream) => Promise<unknown>) => {
    for await (const item of runner) await body(item as unknown as Stream);
  };
  const anyway: Record<string, (runner: Runner) => Promise<unknown>> = {
    'await runner': async (runner) => await runner,
    'runner.runUntilDone()': (runner) => runner.runUntilDone(),
    'for await (const item of runner) {}': (runner) => each(runner, async () => undefined),
    'runner.done() while another part of the app iterates': async (runner) => {
      const done = runner.done();
      done.catch(() => undefined); // read below, after the loop
      await each(runner, async () => undefined).catch(() => undefined);
      return done;
    },
    'runner.generateToolResponse() in the loop body': (runner) =>
      each(runner, async (item) => {
        if ('finalMessage' in item) await item.finalMessage();
        await runner.generateToolResponse();
      }),
  };
  const streamed: Record<string, (runner: Runner) => Promise<unknown>> = {
    'await stream.finalMessage() for each stream': (runner) =>
      each(runner, (stream) => stream.finalMessage()),
    'for await (const event of stream) for each stream': (runner) =>
      each(runner, async (stream) => {
        for await (const _event of stream);
      }),
    'await stream.finalText() for each stream': (runner) =>
      each(runner, (stream) => stream.finalText()),
    'await stream.done() for each stream': (runner) => each(runner, (stream) => stream.done()),
    "await stream.emitted('finalMessage') for each stream": (runner) =>
      each(runner, (stream) => stream.emitted('finalMessage')),
  };
  const settings = [
    { name: 'JSON', stream: false, patterns: anyway },
    { name: 'streamed', stream: true, patterns: { ...anyway, ...streamed } },
    {
      name: 'streamed, runToolsEagerly',
      stream: true,
      runToolsEagerly: true,
      patterns: { ...anyway, ...streamed },
    },
    // The run ends on the tool results: no request after them would fail.
    { name: 'JSON, max_iterations: 1', stream: false, max_iterations: 1, patterns: anyway },
    {
      name: 'streamed, max_iterations: 1',
      stream: true,
      max_iterations: 1,
      patterns: { ...anyway, ...streamed },
    },
  ];
  test('runToolsEagerly: the stream the call started in reads to its end, the next is never handed out', async () => {
    const { vendor, idempotency, anthropic, server } = await setup((turn) =>
      turn.toolResults.length === 0
        ? { text: 'Opening it.', toolUses: [ticket('x')] }
        : { text: 'ok' },
    );
    const runner = idempotentToolRunner(
      anthropic,
      {
        model: 'm',
        max_tokens: 10,
        messages: user('Hi'),
        tools: [ticketTool(vendor)],
        stream: true,
        runToolsEagerly: true,
      },
      { idempotency, conversationId: () => undefined },
    );
    const texts: string[] = [];
    const error = await (async () => {
      for await (const stream of runner) texts.push(await stream.finalText());
    })().catch((e: unknown) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(texts).toEqual(['Opening it.']);
    expect(vendor.tickets).toHaveLength(0);
    expect(server.requests).toHaveLength(1);
  });

  for (const { name, patterns, ...setting } of settings) {
    for (const [pattern, read] of Object.entries(patterns)) {
      test(`${name}: ${pattern}`, async () => {
        const { vendor, idempotency, anthropic, server } = await setup((turn) =>
          turn.toolResults.length === 0
            ? { text: 'Opening it.', toolUses: [ticket('x')] }
            : { text: 'ok' },
        );
        const runner = idempotentToolRunner(
          anthropic,
          {
            model: 'm',
            max_tokens: 10,
            messages: user('Hi'),
            tools: [ticketTool(vendor)],
            ...setting,
          },
          { idempotency, conversationId: () => undefined },
        ) as Runner;
        const error = await read(runner).then(
          () => 'no error',
          (e: unknown) => e,
        );
        expect(ConfigurationError.isInstance(error) ? 'ConfigurationError' : error).toBe(
          'ConfigurationError',
        );
        expect((error as Error).message).toMatch(/Nothing ran\. Pass conversationId .* or turnId/);
        await expect(runner.done()).rejects.toBe(error);
        expect(vendor.tickets).toHaveLength(0);
        expect(server.requests).toHaveLength(1);
      });
    }
  }
});
