/**
 * Deliberate repeats through the real `@google/genai` client and the scripted Gemini server, by
 * hand (`run`) and with automatic function calling (`callable`).
 */
import type { Content, FunctionDeclaration } from '@google/genai';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/gemini';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  type IdempotentFunctionsOptions,
  idempotentFunctions,
} from './index.js';
import { client, runTurn, type Surface } from './test-utils/app.js';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const reminderArgs = z.object({ to: z.string() });
const repeatable = { policies: { send_reminder: { repeatable: true } } };

function reminders(
  options: Partial<IdempotentFunctionsOptions> = {},
  declaration: Omit<FunctionDeclaration, 'name'> = {
    description: 'Send a reminder.',
    parametersJsonSchema: z.toJSONSchema(reminderArgs),
  },
) {
  const sent: unknown[] = [];
  const fns = idempotentFunctions(
    {
      send_reminder: {
        declaration,
        schema: reminderArgs,
        execute: (args: z.infer<typeof reminderArgs>) => {
          sent.push(args);
          return { reminder: sent.length };
        },
      },
    },
    { idempotency: createIdempotency({ store: createMemoryStore() }), ...options },
  );
  return { sent, fns };
}

/** Two identical calls in one response, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn) {
  const call = (args: Record<string, unknown>) => ({ name: 'send_reminder', args });
  const step = turn.functionResponses.length;
  if (step === 0) return { functionCalls: [call({ to: 'ann' }), call({ to: 'ann' })] };
  if (step === 2 || step === 3) return { functionCalls: [call({ to: 'ann', repeat: 2 })] };
  return { text: 'done' };
}

const responsesOf = (contents: Content[]) =>
  contents.flatMap((c) => (c.parts ?? []).flatMap((p) => p.functionResponse?.response ?? []));

async function turn(surface: Surface, fns: ReturnType<typeof reminders>['fns']) {
  server = await startScriptedServer({ respond: repeatingModel });
  const contents = await runTurn(client(server.baseUrl), fns, surface, {
    history: [],
    text: 'Remind Ann',
    system: 'You send reminders.',
    conversationId: 'chat-1',
  });
  // What the model was sent last (AFC keeps its steps to itself): every function response.
  const last = server.requests.at(-1)?.body as { contents?: Content[] } | undefined;
  expect(responsesOf(contents)).toEqual(
    surface === 'manual' ? responsesOf(last?.contents ?? []) : [],
  );
  return { responses: responsesOf(last?.contents ?? []), server };
}

const propertiesSeen = (s: ScriptedServer) =>
  Object.keys(
    (declarationSeen(s)?.parametersJsonSchema as { properties?: object } | undefined)?.properties ??
      {},
  );

const declarationSeen = (s: ScriptedServer) => {
  const body = s.requests[0]?.body as
    | { tools?: Array<{ functionDeclarations?: FunctionDeclaration[] }> }
    | undefined;
  return body?.tools?.[0]?.functionDeclarations?.[0];
};

describe.each(['manual', 'afc'] as const)('deliberate repeats, %s', (surface) => {
  test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
    const { sent, fns } = reminders(repeatable);
    const { responses, server } = await turn(surface, fns);
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the function never sees `repeat`
    expect(responses.slice(0, 2)).toEqual(
      expect.arrayContaining([{ reminder: 1 }, { reminder: 1, replayed: true }]),
    );
    expect(responses.slice(2)).toEqual([{ reminder: 2 }, { reminder: 2, replayed: true }]);
    expect(propertiesSeen(server)).toEqual(['to', 'repeat']);
    expect(declarationSeen(server)?.description).toContain('pass repeat: 2 (3, ...)');
  });

  test('off by default: the declaration is left as it is; the same call is a retry', async () => {
    const { sent, fns } = reminders();
    const { server } = await turn(surface, fns);
    expect(sent).toEqual([{ to: 'ann' }]);
    expect(propertiesSeen(server)).toEqual(['to']);
  });
});

describe('deliberate repeats, setup and bad input', () => {
  test('an invalid repeat: the model is told what to fix, nothing ran', async () => {
    const { sent, fns } = reminders(repeatable);
    const parts = await fns.run([{ name: 'send_reminder', args: { to: 'ann', repeat: 'x' } }], {
      conversationId: 'c',
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
    });
    expect(parts[0]?.functionResponse?.response).toMatchObject({
      error: { error: 'invalid_input', next: 'fix-input' },
    });
    expect(sent).toEqual([]);
  });

  test('OpenAPI-style parameters get the argument too; a clash is refused when wrapped', () => {
    const { fns } = reminders(repeatable, {
      parameters: { type: 'OBJECT' as never, properties: { to: { type: 'STRING' as never } } },
    });
    expect(fns.tool.functionDeclarations?.[0]?.parameters?.properties).toMatchObject({
      repeat: { type: 'INTEGER', minimum: 1 },
    });
    expect(() =>
      reminders(repeatable, {
        parameters: {
          type: 'OBJECT' as never,
          properties: { repeat: { type: 'BOOLEAN' as never } },
        },
      }),
    ).toThrow(ConfigurationError);
    expect(() =>
      reminders(repeatable, {
        parametersJsonSchema: { type: 'object', properties: { repeat: { type: 'boolean' } } },
      }),
    ).toThrow(/has its own "repeat"/);
  });
});
