/**
 * Deliberate repeats through the real openai client and a scripted model over HTTP: two identical
 * calls in one turn are one (replayed); `repeat: 2` is a second effect; a retry of it is replayed.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import type OpenAI from 'openai';
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { FunctionTool, ResponseInput } from 'openai/resources/responses/responses';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  createToolDispatcher,
  type ToolDispatcherOptions,
} from './index.js';
import { client } from './test-utils/app.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function serve(respond: Parameters<typeof startScriptedServer>[0]['respond']) {
  const server = await startScriptedServer({ respond });
  servers.push(server);
  return server;
}

const reminderArgs = z.object({ to: z.string() }).strict();
const parameters = z.toJSONSchema(reminderArgs) as Record<string, unknown>;
const chatTools: ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: { name: 'send_reminder', description: 'Send a reminder.', parameters },
  },
];
const responsesTools: FunctionTool[] = [
  {
    type: 'function',
    name: 'send_reminder',
    description: 'Send a reminder.',
    parameters,
    strict: false,
  },
];

function setup(options: ToolDispatcherOptions = {}) {
  const sent: unknown[] = [];
  const tools = createToolDispatcher(
    createIdempotency({ store: createMemoryStore() }),
    {
      send_reminder: {
        schema: reminderArgs,
        execute: (args: z.infer<typeof reminderArgs>) => {
          sent.push(args);
          return { reminder: sent.length, to: args.to };
        },
      },
    },
    options,
  );
  return { sent, tools };
}
const repeatable: ToolDispatcherOptions = { policies: { send_reminder: { repeatable: true } } };

/** Two identical calls in one message, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn) {
  const call = (args: Record<string, unknown>) => ({ name: 'send_reminder', arguments: args });
  const step = turn.toolOutputs.length;
  if (step === 0) return { toolCalls: [call({ to: 'ann' }), call({ to: 'ann' })] };
  if (step === 2) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
  if (step === 3) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
  return { content: 'done' };
}

async function chatTurn(openai: OpenAI, tools: ReturnType<typeof setup>['tools']) {
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Remind Ann' }];
  for (let step = 0; step < 6; step++) {
    const completion = await openai.chat.completions.create({
      model: 'scripted',
      messages,
      tools: tools.describe(chatTools),
    });
    const message = completion.choices[0]?.message;
    if (message === undefined) throw new Error('no choice');
    messages.push(message);
    if (!message.tool_calls?.length) break;
    messages.push(...(await tools.runChat(message, { messages, conversationId: 'chat-1' })));
  }
  return messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(m.content as string));
}

async function responsesTurn(openai: OpenAI, tools: ReturnType<typeof setup>['tools']) {
  const input: ResponseInput = [{ role: 'user', content: 'Remind Ann' }];
  const outputs: unknown[] = [];
  for (let step = 0; step < 6; step++) {
    const response = await openai.responses.create({
      model: 'scripted',
      input,
      tools: tools.describe(responsesTools),
    });
    const calls = response.output.filter((item) => item.type === 'function_call');
    if (calls.length === 0) break;
    const answered = await tools.runResponses(response, { input, conversationId: 'chat-1' });
    input.push(...calls, ...answered);
    outputs.push(...answered.map((o) => JSON.parse(o.output as string)));
  }
  return outputs;
}

const parametersSeen = (server: ScriptedServer) =>
  server.requests.map((r) => {
    const [tool] = (r.body as { tools: Array<Record<string, unknown>> }).tools;
    const fn = (tool?.function ?? tool) as {
      parameters: { properties: object };
      description: string;
    };
    return { properties: Object.keys(fn.parameters.properties), description: fn.description };
  });

describe.each([
  ['Chat Completions', chatTurn],
  ['Responses', responsesTurn],
] as const)('deliberate repeats, %s (real openai client, scripted model over HTTP)', (_, turn) => {
  test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
    const { sent, tools } = setup(repeatable);
    const server = await serve(repeatingModel);
    const outputs = await turn(client(server.baseURL), tools);
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the tool never sees `repeat`
    expect(outputs.slice(0, 2)).toEqual(
      expect.arrayContaining([
        { reminder: 1, to: 'ann' },
        { reminder: 1, to: 'ann', replayed: true },
      ]),
    );
    expect(outputs.slice(2)).toEqual([
      { reminder: 2, to: 'ann' },
      { reminder: 2, to: 'ann', replayed: true },
    ]);
    const seen = parametersSeen(server)[0];
    expect(seen?.properties).toEqual(['to', 'repeat']);
    expect(seen?.description).toContain(
      'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).',
    );
  });

  test('off by default: no repeat argument in the schema; a call with one is refused by the schema', async () => {
    const { sent, tools } = setup();
    const server = await serve(repeatingModel);
    const outputs = await turn(client(server.baseURL), tools);
    expect(sent).toEqual([{ to: 'ann' }]);
    expect(parametersSeen(server)[0]?.properties).toEqual(['to']);
    expect(parametersSeen(server)[0]?.description).not.toContain('repeat: 2');
    expect(outputs[2]).toMatchObject({ error: 'invalid_input' }); // `repeat` is not a parameter
  });

  test('an invalid repeat: the model is told what to fix, nothing ran', async () => {
    const { sent, tools } = setup(repeatable);
    const server = await serve((t) =>
      t.toolOutputs.length === 0
        ? { toolCalls: [{ name: 'send_reminder', arguments: { to: 'ann', repeat: 'twice' } }] }
        : { content: 'ok' },
    );
    const [output] = await turn(client(server.baseURL), tools);
    expect(output).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect((output as { message: string }).message).toMatch(/repeat of send_reminder must be/);
    expect(sent).toEqual([]);
  });
});

describe('deliberate repeats: setup', () => {
  test('a tool whose own schema has `repeat` is refused when it is wrapped', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const own = z.object({ to: z.string(), repeat: z.boolean() });
    expect(() =>
      createToolDispatcher(
        idempotency,
        { send_reminder: { schema: own, execute: () => 1 } },
        repeatable,
      ),
    ).toThrow(ConfigurationError);
    // Without a schema of its own to read, describe() refuses the parameters that have one.
    const tools = createToolDispatcher(idempotency, { send_reminder: () => 1 }, repeatable);
    const clash = z.toJSONSchema(own) as Record<string, unknown>;
    expect(() =>
      tools.describe([{ type: 'function', name: 'send_reminder', parameters: clash }]),
    ).toThrow(/has its own "repeat"/);
  });

  test('a strict tool gets the argument required and nullable; another name when asked', () => {
    const { tools } = setup({
      policies: { send_reminder: { repeatable: { argument: 'times' } } },
    });
    const [strict] = tools.describe([{ ...responsesTools[0], strict: true } as FunctionTool]);
    expect(strict?.parameters).toMatchObject({
      properties: { times: { type: ['integer', 'null'], minimum: 1 } },
      required: ['to', 'times'],
    });
    expect(strict?.description).toContain('pass times: 2 (3, ...)');
  });
});
