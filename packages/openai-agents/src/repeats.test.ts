/**
 * Deliberate repeats through the Agents SDK's runner (`run`) with `OpenAIResponsesModel` /
 * `OpenAIChatCompletionsModel` over the real openai client and HTTP to the scripted server: two
 * identical calls in one turn are one (replayed); `repeat: 2` is a second effect; a retry of it
 * is replayed; the tool never sees `repeat`. Zod (strict) and JSON-schema (non-strict) tools.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import {
  Agent,
  type Model,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { wrapAgentTools, wrapFunctionTool } from './agents.js';
import { ConfigurationError, createIdempotency } from './index.js';
import { client } from './test-utils/app.js';

beforeAll(() => setTracingDisabled(true));
const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

type Kind = 'zod, strict' | 'JSON schema';
type Api = 'responses' | 'chat';

/** A send_reminder tool whose effects are counted (what it was given). */
function reminders(kind: Kind, parameters?: unknown, extra: object = {}) {
  const sent: unknown[] = [];
  const execute = (input: unknown) => {
    sent.push(input);
    return { reminder: sent.length, to: (input as { to: string }).to };
  };
  const common = { name: 'send_reminder', description: 'Send a reminder.', execute, ...extra };
  const sendReminder =
    kind === 'zod, strict'
      ? tool({ ...common, parameters: (parameters ?? z.object({ to: z.string() })) as never })
      : tool({
          ...common,
          strict: false,
          parameters: (parameters ?? {
            type: 'object',
            properties: { to: { type: 'string' } },
            required: ['to'],
            additionalProperties: false,
          }) as never,
        });
  return { sendReminder, sent };
}

const call = (args: Record<string, unknown>) => ({ name: 'send_reminder', arguments: args });
type Reply = { toolCalls: ReturnType<typeof call>[] } | { content: string };
/** Two identical calls in one response, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn): Reply {
  const step = turn.toolOutputs.length;
  if (step === 0) return { toolCalls: [call({ to: 'ann' }), call({ to: 'ann' })] };
  if (step === 2 || step === 3) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
  return { content: 'done' };
}

const repeatable = { policies: { send_reminder: { repeatable: true } } };

async function runAgent(
  api: Api,
  tools: ReturnType<typeof tool>[],
  respond: (turn: ModelTurn) => Reply,
  options: object = {},
) {
  let outputs: string[] = [];
  const server = await startScriptedServer({
    respond: (turn) => {
      outputs = turn.toolOutputs; // every tool output of the turn so far
      return respond(turn);
    },
  });
  servers.push(server);
  const openai = client(server.baseURL);
  const model: Model =
    api === 'responses'
      ? new OpenAIResponsesModel(openai, 'scripted')
      : new OpenAIChatCompletionsModel(openai, 'scripted');
  const agent = wrapAgentTools(
    createIdempotency({ store: createMemoryStore() }),
    new Agent({ name: 'reminders', tools, model }),
    { conversationId: 'chat-1', ...options },
  );
  await run(agent, 'Remind Ann, twice.');
  const seen = () => {
    const body = server.requests[0]?.body as { tools: Array<Record<string, unknown>> };
    const [t] = body.tools;
    return (t?.function ?? t) as {
      description: string;
      parameters: { properties: Record<string, unknown>; required?: string[] };
    };
  };
  return { outputs: outputs.map((o) => JSON.parse(o) as unknown), seen };
}

describe.each<[Api, Kind]>([
  ['responses', 'zod, strict'],
  ['responses', 'JSON schema'],
  ['chat', 'zod, strict'],
  ['chat', 'JSON schema'],
])(
  'deliberate repeats: run(), %s model, a %s tool (real openai client, scripted model over HTTP)',
  (api, kind) => {
    const strict = kind === 'zod, strict';

    test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { outputs, seen } = await runAgent(api, [sendReminder], repeatingModel, repeatable);
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
      const { parameters, description } = seen();
      expect(Object.keys(parameters.properties)).toEqual(['to', 'repeat']);
      expect(parameters.properties.repeat).toMatchObject({
        type: strict ? ['integer', 'null'] : 'integer',
        minimum: 1,
      });
      // Strict mode: every property required (the model passes null to leave it out).
      if (strict) expect(parameters.required).toEqual(['to', 'repeat']);
      else expect(parameters.required).toEqual(['to']);
      expect(description).toContain(
        'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).',
      );
    });

    test('off by default: no repeat argument in the schema or the description', async () => {
      const { sendReminder } = reminders(kind);
      const { outputs, seen } = await runAgent(api, [sendReminder], repeatingModel);
      expect(Object.keys(seen().parameters.properties)).toEqual(['to']);
      expect(seen().description).not.toContain('repeat: 2');
      expect(outputs.slice(0, 2)).toEqual(
        expect.arrayContaining([
          { reminder: 1, to: 'ann' },
          { reminder: 1, to: 'ann', replayed: true },
        ]),
      );
    });

    test('an invalid repeat: the model is told what to fix, nothing ran', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { outputs } = await runAgent(
        api,
        [sendReminder],
        (turn) =>
          turn.toolOutputs.length === 0
            ? { toolCalls: [call({ to: 'ann', repeat: 'twice' }), call({ to: 'ann', repeat: 0 })] }
            : { content: 'ok' },
        repeatable,
      );
      expect(sent).toEqual([]);
      expect(outputs).toHaveLength(2);
      for (const output of outputs) {
        expect(output).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
        expect((output as { message: string }).message).toMatch(/repeat of send_reminder must be/);
      }
    });
  },
);

describe('deliberate repeats, @openai/agents: setup', () => {
  test('null (strict mode) is the first call; the tool never sees it', async () => {
    const { sendReminder, sent } = reminders('zod, strict');
    const { outputs } = await runAgent(
      'responses',
      [sendReminder],
      (turn) =>
        turn.toolOutputs.length === 0
          ? { toolCalls: [call({ to: 'ann', repeat: null }), call({ to: 'ann' })] }
          : { content: 'ok' },
      repeatable,
    );
    expect(sent).toEqual([{ to: 'ann' }]);
    expect(outputs).toEqual(
      expect.arrayContaining([
        { reminder: 1, to: 'ann' },
        { reminder: 1, to: 'ann', replayed: true },
      ]),
    );
  });

  test('a conditional needsApproval reads the tool input without `repeat`', async () => {
    const asked: unknown[] = [];
    const { sendReminder } = reminders('zod, strict', undefined, {
      needsApproval: async (_ctx: unknown, input: unknown) => {
        asked.push(input);
        return false;
      },
    });
    await runAgent(
      'responses',
      [sendReminder],
      (turn) =>
        turn.toolOutputs.length === 0
          ? { toolCalls: [call({ to: 'ann', repeat: 2 })] }
          : { content: 'ok' },
      repeatable,
    );
    expect(asked).toEqual([{ to: 'ann' }]);
  });

  test.each<Kind>(['zod, strict', 'JSON schema'])(
    'a %s tool whose own schema has `repeat` is refused when it is wrapped',
    (kind) => {
      const own =
        kind === 'zod, strict'
          ? z.object({ to: z.string(), repeat: z.boolean() })
          : { type: 'object', properties: { to: { type: 'string' }, repeat: { type: 'boolean' } } };
      const { sendReminder } = reminders(kind, own);
      const idempotency = createIdempotency({ store: createMemoryStore() });
      expect(() =>
        wrapAgentTools(idempotency, new Agent({ name: 'a', tools: [sendReminder] }), repeatable),
      ).toThrow(ConfigurationError);
      expect(() =>
        wrapFunctionTool(idempotency, sendReminder, { policy: { repeatable: true } }),
      ).toThrow(/has its own "repeat"/);
      const renamed = wrapFunctionTool(idempotency, sendReminder, {
        policy: { repeatable: { argument: 'times' } },
      });
      expect(renamed.description).toContain('pass times: 2 (3, ...)');
      expect(Object.keys(renamed.parameters.properties)).toEqual(['to', 'repeat', 'times']);
    },
  );
});
