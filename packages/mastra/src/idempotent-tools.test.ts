/**
 * The adapter through Mastra's own Agent runtime (model router over HTTP against the scripted
 * server), with Mastra Memory on a LibSQL file: the memory thread is the conversation.
 */
import { ConfigurationError, createMemoryStore } from '@idempotent-tools/core';
import type { ModelTurn, ScriptedServer } from '@idempotent-tools/testing/openai';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { Memory } from '@mastra/memory';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { idempotencyContext, idempotentTool, idempotentTools } from './index.js';
import {
  carryOut,
  carryOutModel,
  libsql,
  makeAgent,
  modelOf,
  runAgent,
  startModelServer,
  type Transport,
} from './test-utils/app.js';
import { isDeveloperError } from './test-utils/drivers.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(
  respond: (turn: ModelTurn) => ReturnType<typeof carryOutModel> = carryOutModel,
) {
  const server = await startModelServer(respond);
  servers.push(server);
  const effects: string[] = [];
  const tools = idempotentTools({ carry_out: carryOut(effects) }, { store: createMemoryStore() });
  const agent = makeAgent({ server, tools, storage: libsql() });
  const memory = (thread: string) => ({ memory: { thread, resource: 'user-1' } });
  /** The tool messages the model read, in order. */
  const toolMessages = () =>
    server.requests.flatMap((r) =>
      ((r.body as { messages?: { role: string; content: string }[] }).messages ?? [])
        .filter((m) => m.role === 'tool')
        .map((m) => m.content),
    );
  return { server, effects, agent, memory, toolMessages };
}

describe.each(['generate', 'stream'] as Transport[])('Mastra Agent.%s with memory', (transport) => {
  test('the model repeats the call in a later step: replayed, marked for the model', async () => {
    const { effects, agent, memory, toolMessages } = await setup((turn) =>
      turn.toolOutputs.length < 2
        ? { toolCalls: [{ name: 'carry_out', arguments: { request: turn.userText } }] }
        : { content: 'Done.' },
    );
    const out = await runAgent(agent, transport, 'Cancel my subscription.', memory('t1'));
    expect(effects).toEqual(['Cancel my subscription.']);
    const [first, second] = toolMessages()
      .slice(-2)
      .map((m) => JSON.parse(m));
    expect(first).toEqual({ done: 'Cancel my subscription.', receipt: 'R-1' });
    expect(second).toEqual({ done: 'Cancel my subscription.', receipt: 'R-1', replayed: true });
    expect(out.text).toBe('Done.');
  });

  test('two identical calls in one step: one effect', async () => {
    const { effects, agent, memory, toolMessages } = await setup((turn) =>
      turn.toolOutputs.length === 0
        ? {
            toolCalls: [
              { name: 'carry_out', arguments: { request: 'Refund order 7.' } },
              { name: 'carry_out', arguments: { request: 'Refund order 7.' } },
            ],
          }
        : { content: 'Done.' },
    );
    await runAgent(agent, transport, 'Refund order 7, please.', memory('t1'));
    expect(effects).toEqual(['Refund order 7.']);
    const outputs = toolMessages().map((m) => JSON.parse(m));
    expect(outputs.map((o) => o.receipt)).toEqual(['R-1', 'R-1']);
    expect(outputs.filter((o) => o.replayed === true)).toHaveLength(1);
  });

  test('a broken reply retried by the app: one effect', async () => {
    const { server, effects, agent, memory } = await setup();
    server.inject(undefined, 'truncate'); // the reply after the tool ran is cut
    await expect(
      runAgent(agent, transport, 'Cancel my subscription.', memory('t1')),
    ).rejects.toThrow();
    expect(effects).toHaveLength(1);
    const out = await runAgent(agent, transport, 'Cancel my subscription.', memory('t1'));
    expect(effects).toHaveLength(1);
    expect(out.text).toContain('"replayed":true');
  });

  test('a new turn with the same text, a second thread with the same prompt: run again', async () => {
    const { effects, agent, memory } = await setup();
    await runAgent(agent, transport, 'Yes, send it.', memory('t1'));
    await runAgent(agent, transport, 'Yes, send it.', memory('t1'));
    await runAgent(agent, transport, 'Yes, send it.', memory('t2'));
    expect(effects).toHaveLength(3);
  });

  test('bad input from the model: an error result for the model, nothing ran', async () => {
    const { effects, agent, memory, toolMessages } = await setup((turn) =>
      turn.toolOutputs.length === 0
        ? { toolCalls: [{ name: 'carry_out', arguments: { request: 42 } }] }
        : { content: 'I could not.' },
    );
    await runAgent(agent, transport, 'Cancel it.', memory('t1'));
    expect(effects).toHaveLength(0);
    expect(toolMessages().join('\n')).toMatch(/request/);
  });

  test('a run aborted after the tool ran, then the same words: refused (turnId), nothing ran again', async () => {
    const { server, effects, memory } = await setup();
    const stop = new AbortController();
    const tools = idempotentTools(
      {
        carry_out: createTool({
          id: 'carry_out',
          description: 'Carry it out.',
          inputSchema: z.object({ request: z.string() }),
          execute: async ({ request }) => {
            effects.push(request);
            stop.abort(); // the user presses stop while the model would answer
            return { done: request };
          },
        }),
      },
      { store: createMemoryStore() },
    );
    const stopping = makeAgent({ server, tools, storage: libsql() });
    const out = await runAgent(stopping, transport, 'Cancel it.', {
      ...memory('t1'),
      abortSignal: stop.signal,
    });
    expect(out.finishReason).toBe('aborted');
    expect(effects).toHaveLength(1);
    // The thread keeps the tool's result and a step that never answered: a broken run's record
    // or a finished one's cannot be told, so the same words are refused, loudly.
    const again = await runAgent(stopping, transport, 'Cancel it.', memory('t1')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isDeveloperError(again)).toBe(true);
    expect(String((again as Error).message)).toMatch(/broken attempt.*Pass turnId/s);
    expect(effects).toHaveLength(1);
    // Other words are a new turn.
    await runAgent(stopping, transport, 'Cancel the other one.', memory('t1'));
    expect(effects).toEqual(['Cancel it.', 'Cancel the other one.']);
  });

  test('a run without a memory thread: a developer error out of the call, nothing ran', async () => {
    const { effects, agent } = await setup();
    const error = await runAgent(agent, transport, 'Cancel it.', {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isDeveloperError(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/conversationId|memory thread/);
    expect(effects).toHaveLength(0);
  });
});

describe('Mastra observational memory (it saves messages before a run ends)', () => {
  test('a turn ended on the tool result, then the same words: refused (turnId); a broken reply retried: one effect', async () => {
    const server = await startModelServer();
    servers.push(server);
    const effects: string[] = [];
    const storage = libsql();
    const agent = new Agent({
      id: 'desk',
      name: 'desk',
      instructions: 'You are a helpful agent.',
      model: modelOf(server),
      maxRetries: 0,
      tools: idempotentTools({ carry_out: carryOut(effects) }, { store: createMemoryStore() }),
      memory: new Memory({
        storage,
        options: { observationalMemory: { model: modelOf(server) as never } },
      }),
    });
    const desk = new Mastra({ agents: { desk: agent }, storage, logger: false }).getAgent('desk');
    const thread = (id: string) => ({ memory: { thread: id, resource: 'user-1' } });
    // A run that stopped after the tool step looks like one killed after it: refused.
    await runAgent(desk, 'generate', 'Yes, send it.', { ...thread('t1'), maxSteps: 1 });
    const again = await runAgent(desk, 'generate', 'Yes, send it.', thread('t1')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isDeveloperError(again)).toBe(true);
    expect(effects).toHaveLength(1);
    // A failed run is marked failed (its `error` part): its retry is the same turn.
    server.inject(undefined, 'truncate');
    await expect(runAgent(desk, 'generate', 'Cancel it.', thread('t2'))).rejects.toThrow();
    const out = await runAgent(desk, 'generate', 'Cancel it.', thread('t2'));
    expect(out.text).toContain('"replayed":true');
    expect(effects).toHaveLength(2);
  });
});

describe('wrapping', () => {
  const effects: string[] = [];
  test('misspelt options and unknown tool names are refused at wrap time', () => {
    const tools = { carry_out: carryOut(effects) };
    expect(() =>
      idempotentTools(tools, { store: createMemoryStore(), conversationid: 'x' } as never),
    ).toThrow(/conversationId/);
    expect(() =>
      idempotentTools(tools, { store: createMemoryStore(), exclude: ['nope' as never] }),
    ).toThrow(ConfigurationError);
    expect(() => idempotentTools(tools, {} as never)).toThrow(/store/);
    expect(() => idempotentTools([] as never, { store: createMemoryStore() })).toThrow(
      ConfigurationError,
    );
  });

  test('tools made idempotent twice are refused when wrapped again, whatever wrapped them', () => {
    const store = createMemoryStore();
    const once = idempotentTools({ carry_out: carryOut(effects) }, { store });
    expect(() => idempotentTools(once, { store })).toThrow(ConfigurationError);
    expect(() => idempotentTools(once, { store })).toThrow(/already idempotent/);
    const one = idempotentTool(carryOut(effects), { store, turnId: 'm-1' });
    expect(() => idempotentTool(one, { store, turnId: 'm-1' })).toThrow(/already idempotent/);
    // An unsafe or excluded tool is not wrapped: wrapping the record again is fine.
    const unsafe = idempotentTools(
      { carry_out: carryOut(effects) },
      { store, unsafe: ['carry_out'] },
    );
    expect(() => idempotentTools(unsafe, { store })).not.toThrow();
  });

  test('fields are kept, the description says it is safe to retry, unsafe says the opposite', () => {
    const tool = carryOut(effects, true);
    const wrapped = idempotentTool(tool, { store: createMemoryStore(), turnId: 'm-1' });
    expect(wrapped.id).toBe('carry_out');
    expect(wrapped.requireApproval).toBe(true);
    expect(wrapped.inputSchema).toBe(tool.inputSchema);
    expect(wrapped.description).toMatch(/Safe to retry/);
    const unsafe = idempotentTool(tool, {
      store: createMemoryStore(),
      turnId: 'm-1',
      unsafe: true,
    });
    expect(unsafe.description).toMatch(/not safe to retry/i);
  });

  test('the tool reads its key from idempotencyContext(context); a direct call replays', async () => {
    const keys: (string | undefined)[] = [];
    const charge = createTool({
      id: 'charge',
      description: 'Charge a card.',
      inputSchema: z.object({ cents: z.number() }),
      execute: async ({ cents }, context) => {
        keys.push(idempotencyContext(context)?.key);
        return { charged: cents };
      },
    });
    const wrapped = idempotentTool(charge, { store: createMemoryStore(), turnId: 'msg-1' });
    const run = () => wrapped.execute?.({ cents: 5 }, {} as never);
    expect(await run()).toEqual({ charged: 5 });
    expect(await run()).toEqual({ charged: 5, replayed: true });
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^v1_/);
    expect(await wrapped.execute?.({ cents: 'x' } as never, {} as never)).toMatchObject({
      error: true,
    });
    expect(keys).toHaveLength(1);
  });
});
