/**
 * Deliberate repeats through `createAgent` (the middleware, and tools wrapped one by one) with the
 * real `ChatOpenAI` client over HTTP to the scripted server: two identical calls in one turn are
 * one (replayed); `repeat: 2` is a second effect; a retry of it is replayed; the tool never sees
 * `repeat`. Zod 4, zod 3 and JSON-schema tools.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import { HumanMessage } from '@langchain/core/messages';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { createAgent } from 'langchain';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { z as z3 } from 'zod/v3';
import { ConfigurationError, idempotentTool, idempotentTools } from './index.js';
import { idempotentToolsMiddleware } from './middleware.js';
import { MODES, type Mode, toolResults } from './test-utils/fixtures.js';
import { chatModel } from './test-utils/openai.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

type Kind = 'zod 4' | 'zod 3' | 'JSON schema';
const KINDS: Kind[] = ['zod 4', 'zod 3', 'JSON schema'];

const schemas = {
  'zod 4': () => z.object({ to: z.string() }).strict(),
  'zod 3': () => z3.object({ to: z3.string() }).strict(),
  'JSON schema': () => ({
    type: 'object',
    properties: { to: { type: 'string' } },
    required: ['to'],
    additionalProperties: false,
  }),
};

/** A send_reminder tool whose effects are counted; `schema`: its own schema. */
function reminders(kind: Kind, schema: unknown = schemas[kind]()) {
  const sent: unknown[] = [];
  const sendReminder = tool(
    async (input: { to: string }) => {
      sent.push(input);
      return { reminder: sent.length, to: input.to };
    },
    { name: 'send_reminder', description: 'Send a reminder.', schema: schema as never },
  ) as unknown as StructuredToolInterface;
  return { sendReminder, sent };
}

const call = (args: Record<string, unknown>) => ({ name: 'send_reminder', arguments: args });
/** Two identical calls in one message, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn) {
  const step = turn.toolOutputs.length;
  if (step === 0) return { toolCalls: [call({ to: 'ann' }), call({ to: 'ann' })] };
  if (step === 2 || step === 3) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
  return { content: 'done' };
}

const repeatable = { policies: { send_reminder: { repeatable: true } } };

async function runAgent(
  mode: Mode,
  tools: StructuredToolInterface[],
  respond: (turn: ModelTurn) => ReturnType<typeof repeatingModel>,
  extra: object = {},
) {
  const server = await startScriptedServer({ respond });
  servers.push(server);
  const options = { store: createMemoryStore(), ...extra };
  const agent = createAgent({
    model: chatModel(server),
    tools: mode === 'middleware' ? tools : idempotentTools(tools, options as never),
    middleware: mode === 'middleware' ? [idempotentToolsMiddleware(options)] : [],
  });
  const out = await agent.invoke(
    { messages: [new HumanMessage('Remind Ann, twice.')] },
    { configurable: { thread_id: `thread-${randomUUID()}` } },
  );
  const seen = (i: number) => {
    const body = server.requests[i]?.body as { tools: Array<{ function: Record<string, never> }> };
    return body.tools[0]?.function as unknown as {
      description: string;
      parameters: { properties: Record<string, unknown>; required?: string[] };
    };
  };
  return { results: toolResults(out.messages), seen };
}

describe.each(MODES.flatMap((mode) => KINDS.map((kind) => [mode, kind] as const)))(
  'deliberate repeats: createAgent, %s, a %s tool (real ChatOpenAI, scripted model over HTTP)',
  (mode, kind) => {
    test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { results, seen } = await runAgent(mode, [sendReminder], repeatingModel, repeatable);
      expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the tool never sees `repeat`
      const contents = results.map((r) => r.content);
      expect(contents.slice(0, 2)).toEqual(
        expect.arrayContaining([
          { reminder: 1, to: 'ann' },
          { reminder: 1, to: 'ann', replayed: true },
        ]),
      );
      expect(contents.slice(2)).toEqual([
        { reminder: 2, to: 'ann' },
        { reminder: 2, to: 'ann', replayed: true },
      ]);
      expect(Object.keys(seen(0).parameters.properties)).toEqual(['to', 'repeat']);
      expect(seen(0).parameters.properties.repeat).toMatchObject({ type: 'integer', minimum: 1 });
      expect(seen(0).parameters.required ?? []).not.toContain('repeat');
      expect(seen(0).description).toContain(
        'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).',
      );
    });

    test('off by default: no repeat argument; a call with one is refused by the schema', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { results, seen } = await runAgent(mode, [sendReminder], repeatingModel);
      expect(Object.keys(seen(0).parameters.properties)).toEqual(['to']);
      expect(seen(0).description).not.toContain('repeat: 2');
      expect(sent).toEqual([{ to: 'ann' }]);
      expect(results[2]?.status).toBe('error'); // `repeat` is not a parameter of the strict schema
    });

    test('an invalid repeat: an error message for the model, nothing ran', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { results } = await runAgent(
        mode,
        [sendReminder],
        (turn) =>
          turn.toolOutputs.length === 0
            ? { toolCalls: [call({ to: 'ann', repeat: 'twice' }), call({ to: 'ann', repeat: 0 })] }
            : { content: 'ok' },
        repeatable,
      );
      expect(sent).toEqual([]);
      expect(results.map((r) => r.status)).toEqual(['error', 'error']);
      for (const r of results) expect(String(r.content)).toMatch(/did not match expected schema/);
    });
  },
);

describe('deliberate repeats: setup', () => {
  test.each(KINDS)(
    'a %s tool whose own schema has `repeat` is refused when it is wrapped',
    (kind) => {
      const own = {
        'zod 4': z.object({ to: z.string(), repeat: z.boolean() }),
        'zod 3': z3.object({ to: z3.string(), repeat: z3.boolean() }),
        'JSON schema': { type: 'object', properties: { to: {}, repeat: {} } },
      }[kind];
      const { sendReminder } = reminders(kind, own);
      const store = createMemoryStore();
      expect(() => idempotentTools([sendReminder], { store, ...repeatable })).toThrow(
        ConfigurationError,
      );
      expect(() => idempotentTool(sendReminder, { store, policy: { repeatable: true } })).toThrow(
        /has its own "repeat"/,
      );
      // Another name: accepted.
      const renamed = idempotentTool(sendReminder, {
        store,
        policy: { repeatable: { argument: 'times' } },
      });
      expect(renamed.description).toContain('pass times: 2 (3, ...)');
    },
  );

  test('through the middleware, the clash is refused on the first model call', async () => {
    const { sendReminder } = reminders('zod 4', z.object({ to: z.string(), repeat: z.number() }));
    await expect(
      runAgent('middleware', [sendReminder], repeatingModel, repeatable),
    ).rejects.toThrow(/has its own "repeat"/);
  });

  test('a schema that is not an object is refused', () => {
    const { sendReminder } = reminders('zod 4', z.string());
    expect(() =>
      idempotentTool(sendReminder, { store: createMemoryStore(), policy: { repeatable: true } }),
    ).toThrow(/be a zod object/);
  });
});
