/**
 * Deliberate repeats through the real `@anthropic-ai/sdk` client and the scripted Messages
 * server: the dispatcher of a hand-written loop, and the SDK's tool runner.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/anthropic';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  createToolDispatcher,
  type ToolDispatcherOptions,
} from './index.js';
import { client, runnerTurn } from './test-utils/app.js';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
async function start(respond: (turn: ModelTurn) => ReturnType<typeof repeatingModel>) {
  server = await startScriptedServer({ respond });
  return { anthropic: client(server.baseURL), server };
}

const reminderArgs = z.object({ to: z.string() });
const reminderDefinition: Tool = {
  name: 'send_reminder',
  description: 'Send a reminder.',
  input_schema: z.toJSONSchema(reminderArgs) as Tool.InputSchema,
};
const repeatable = { policies: { send_reminder: { repeatable: true } } } as const;

/** Two identical calls in one reply, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn): {
  text?: string;
  toolUses?: Array<{ name: string; input: Record<string, unknown> }>;
} {
  const use = (input: Record<string, unknown>) => ({ name: 'send_reminder', input });
  const step = turn.toolResults.length;
  if (step === 0) return { toolUses: [use({ to: 'ann' }), use({ to: 'ann' })] };
  if (step === 2 || step === 3) return { toolUses: [use({ to: 'ann', repeat: 2 })] };
  return { text: 'done' };
}

function dispatcher(options: ToolDispatcherOptions = {}) {
  const sent: unknown[] = [];
  const tools = createToolDispatcher(
    createIdempotency({ store: createMemoryStore() }),
    {
      send_reminder: {
        schema: reminderArgs,
        execute: (args: z.infer<typeof reminderArgs>) => {
          sent.push(args);
          return { reminder: sent.length };
        },
      },
    },
    options,
  );
  return { sent, tools };
}

async function loop(anthropic: Anthropic, tools: ReturnType<typeof dispatcher>['tools']) {
  const messages: MessageParam[] = [{ role: 'user', content: 'Remind Ann' }];
  const results: unknown[] = [];
  for (let step = 0; step < 6; step++) {
    const reply = await anthropic.messages.create({
      model: 'scripted',
      max_tokens: 1024,
      messages: [...messages],
      tools: tools.describe([reminderDefinition]),
    });
    messages.push({ role: 'assistant', content: reply.content });
    if (reply.stop_reason !== 'tool_use') break;
    const answer = await tools.run(reply, { messages, conversationId: 'chat-1' });
    messages.push(answer);
    results.push(...answer.content.map((b) => JSON.parse(b.content as string)));
  }
  return results;
}

const schemaSeen = (s: ScriptedServer) => {
  const [tool] = (s.requests[0]?.body as { tools: Tool[] } | undefined)?.tools ?? [];
  return tool as Tool;
};

describe('deliberate repeats, dispatcher (messages.create)', () => {
  test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
    const { sent, tools } = dispatcher(repeatable);
    const { anthropic, server } = await start(repeatingModel);
    const results = await loop(anthropic, tools);
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the tool never sees `repeat`
    expect(results.slice(0, 2)).toEqual(
      expect.arrayContaining([{ reminder: 1 }, { reminder: 1, replayed: true }]),
    );
    expect(results.slice(2)).toEqual([{ reminder: 2 }, { reminder: 2, replayed: true }]);
    const tool = schemaSeen(server);
    expect(Object.keys(tool.input_schema.properties ?? {})).toEqual(['to', 'repeat']);
    expect(tool.description).toContain('To do it again on purpose, pass repeat: 2 (3, ...).');
  });

  test('off by default: the schema is left as it is; the same call is always a retry', async () => {
    const { sent, tools } = dispatcher();
    const { anthropic, server } = await start(repeatingModel);
    await loop(anthropic, tools);
    expect(sent).toEqual([{ to: 'ann' }]);
    expect(Object.keys(schemaSeen(server).input_schema.properties ?? {})).toEqual(['to']);
  });

  test('an invalid repeat: the model is told what to fix, nothing ran', async () => {
    const { sent, tools } = dispatcher(repeatable);
    const { anthropic } = await start((t) =>
      t.toolResults.length === 0
        ? { toolUses: [{ name: 'send_reminder', input: { to: 'ann', repeat: -1 } }] }
        : { text: 'ok' },
    );
    const [result] = await loop(anthropic, tools);
    expect(result).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect(sent).toEqual([]);
  });

  test('a tool whose own schema has `repeat` is refused', () => {
    const own = z.object({ to: z.string(), repeat: z.boolean() });
    const idempotency = createIdempotency({ store: createMemoryStore() });
    expect(() =>
      createToolDispatcher(
        idempotency,
        { send_reminder: { schema: own, execute: () => 1 } },
        repeatable,
      ),
    ).toThrow(ConfigurationError);
  });
});

describe('deliberate repeats, the tool runner', () => {
  const reminderTool = (sent: unknown[], inputSchema = reminderArgs) =>
    betaZodTool({
      name: 'send_reminder',
      description: 'Send a reminder.',
      inputSchema,
      run: (args) => {
        sent.push(args);
        return `reminder ${sent.length}`;
      },
    });

  test('one effect for the retry, a second for repeat 2, its retry replayed; the schema sent has repeat', async () => {
    const sent: unknown[] = [];
    const { anthropic, server } = await start(repeatingModel);
    const { results } = await runnerTurn(
      anthropic,
      [reminderTool(sent)],
      [{ role: 'user', content: 'Remind Ann' }],
      {
        idempotency: createIdempotency({ store: createMemoryStore() }),
        conversationId: 'c',
        ...repeatable,
      },
    );
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
    const text = results.map((r) => JSON.stringify(r.content));
    expect(text.filter((t) => t.includes('replayed'))).toHaveLength(2);
    expect(text.at(-2)).toContain('reminder 2');
    expect(Object.keys(schemaSeen(server).input_schema.properties ?? {})).toEqual(['to', 'repeat']);
  });

  test('a tool whose own schema has `repeat` is refused when the runner is made', async () => {
    const { anthropic } = await start(repeatingModel);
    const own = z.object({ to: z.string(), repeat: z.boolean() });
    await expect(
      runnerTurn(anthropic, [reminderTool([], own as never)], [{ role: 'user', content: 'x' }], {
        idempotency: createIdempotency({ store: createMemoryStore() }),
        conversationId: 'c',
        ...repeatable,
      }),
    ).rejects.toThrow(/has its own "repeat"/);
  });
});
