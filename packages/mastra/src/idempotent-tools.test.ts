/**
 * The adapter through Mastra's own Agent runtime (model router over HTTP against the scripted
 * server), with Mastra Memory on a LibSQL file: the memory thread is the conversation.
 */
import { ConfigurationError, createMemoryStore } from '@idempotent-tools/core';
import { createTool } from '@mastra/core/tools';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { idempotencyContext, idempotentTool, idempotentTools } from './index.js';
import {
  carryOut,
  carryOutModel,
  libsql,
  makeAgent,
  runAgent,
  startModelServer,
  type Transport,
} from './test-utils/app.js';
import { isDeveloperError } from './test-utils/drivers.js';
import type { ModelTurn, ScriptedServer } from './testing/index.js';

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
