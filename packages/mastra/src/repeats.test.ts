/**
 * Deliberate repeats through Mastra's own Agent loop (its model router over HTTP against the
 * scripted server, Mastra Memory on a LibSQL file): two identical calls in one turn are one
 * (replayed); `repeat: 2` is a second effect; a retry of it is replayed; the tool never sees
 * `repeat`. Zod 4, zod 3, JSON-schema and Standard Schema tools.
 */

import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import { createTool } from '@mastra/core/tools';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { z as z3 } from 'zod/v3';
import {
  type AnyTool,
  approveToolCallGenerate,
  ConfigurationError,
  getToolCallApproval,
  type IdempotentToolsOptions,
  idempotentTool,
  idempotentTools,
} from './index.js';
import { type Api, libsql, makeAgent, runAgent, type Transport } from './test-utils/app.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

type Kind = 'zod 4' | 'zod 3' | 'JSON schema' | 'Standard Schema';
const KINDS: Kind[] = ['zod 4', 'zod 3', 'JSON schema', 'Standard Schema'];

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** A Standard Schema with JSON that is not zod: `{ to: string }`, no other keys. */
function standardSchema(properties: Record<string, unknown> = { to: { type: 'string' } }) {
  const json = { type: 'object', properties, required: ['to'], additionalProperties: false };
  const known = Object.keys(properties);
  return {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: (v: unknown) =>
        isObject(v) && typeof v.to === 'string' && Object.keys(v).every((k) => known.includes(k))
          ? { value: v }
          : { issues: [{ message: 'Expected { to: string } and nothing else.' }] },
      jsonSchema: { input: () => json, output: () => json },
    },
  };
}

const schemas: Record<Kind, () => unknown> = {
  'zod 4': () => z.object({ to: z.string() }).strict(),
  'zod 3': () => z3.object({ to: z3.string() }).strict(),
  'JSON schema': () => ({
    type: 'object',
    properties: { to: { type: 'string' } },
    required: ['to'],
    additionalProperties: false,
  }),
  'Standard Schema': () => standardSchema(),
};

/** A send_reminder tool whose effects are counted; `extra`: more createTool fields. */
function reminders(kind: Kind, extra: Record<string, unknown> = {}, schema = schemas[kind]()) {
  const sent: unknown[] = [];
  const sendReminder = createTool({
    id: 'send_reminder',
    description: 'Send a reminder.',
    inputSchema: schema as never,
    execute: async (input: { to: string }) => {
      sent.push(input);
      return { reminder: sent.length, to: input.to };
    },
    ...extra,
  } as never) as AnyTool;
  return { sendReminder, sent };
}

const call = (args: Record<string, unknown>) => ({ name: 'send_reminder', arguments: args });
/** Two identical calls in one step, then `repeat: 2`, then the same `repeat: 2` again. */
function repeatingModel(turn: ModelTurn): ScriptedReply {
  const step = turn.toolOutputs.length;
  if (step === 0) return { toolCalls: [call({ to: 'ann' }), call({ to: 'ann' })] };
  if (step === 2 || step === 3) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
  return { content: 'done' };
}

type Options = IdempotentToolsOptions<{ send_reminder: AnyTool }>;
const repeatable: Partial<Options> = { policies: { send_reminder: { repeatable: true } } };

/** One run of the agent; what the model read (the tool outputs) and the tool it was shown. */
async function run(
  transport: Transport,
  api: Api,
  tool: AnyTool,
  respond: (turn: ModelTurn) => ScriptedReply,
  extra: Partial<Options> = {},
) {
  let read: string[] = [];
  const server = await startScriptedServer({
    respond: (turn) => {
      read = turn.toolOutputs;
      return respond(turn);
    },
  });
  servers.push(server);
  const tools = idempotentTools({ send_reminder: tool }, { store: createMemoryStore(), ...extra });
  const agent = makeAgent({ server, tools, api, storage: libsql() });
  await runAgent(agent, transport, 'Remind Ann, twice.', {
    memory: { thread: 'chat-1', resource: 'user-1' },
  });
  const shown = (i = 0) => {
    const body = server.requests[i]?.body as { tools: Array<Record<string, unknown>> } | undefined;
    const t = body?.tools[0];
    return (t?.function ?? t) as {
      description: string;
      parameters: { properties: Record<string, Record<string, unknown>>; required?: string[] };
    };
  };
  const seen = read.map((output): unknown => {
    try {
      return JSON.parse(output);
    } catch {
      return output;
    }
  });
  return { seen, shown };
}

const NOTE =
  'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).';

describe.each<[Transport, Api, Kind]>([
  ['generate', 'chat', 'zod 4'],
  ['stream', 'responses', 'zod 4'],
  ['generate', 'responses', 'zod 3'],
  ['stream', 'chat', 'JSON schema'],
  ['generate', 'chat', 'Standard Schema'],
])(
  'deliberate repeats: Agent.%s, %s, a %s tool (scripted model over HTTP)',
  (transport, api, kind) => {
    test('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { seen, shown } = await run(transport, api, sendReminder, repeatingModel, repeatable);
      expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the tool never sees `repeat`
      expect(seen.slice(0, 2)).toEqual(
        expect.arrayContaining([
          { reminder: 1, to: 'ann' },
          { reminder: 1, to: 'ann', replayed: true },
        ]),
      );
      expect(seen.slice(2)).toEqual([
        { reminder: 2, to: 'ann' },
        { reminder: 2, to: 'ann', replayed: true },
      ]);
      const { properties, required = [] } = shown().parameters;
      expect(Object.keys(properties)).toEqual(['to', 'repeat']);
      expect(JSON.stringify(properties.repeat)).toContain('integer');
      // Mastra's OpenAI compat layer makes every property required, an optional one nullable.
      if (required.includes('repeat')) expect(JSON.stringify(properties.repeat)).toContain('null');
      expect(shown().description).toContain(NOTE);
    });

    test('off by default: no repeat argument in the schema or the description', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { seen, shown } = await run(transport, api, sendReminder, repeatingModel);
      expect(Object.keys(shown().parameters.properties)).toEqual(['to']);
      expect(shown().description).not.toContain('repeat: 2');
      expect(seen.slice(0, 2)).toEqual(
        expect.arrayContaining([
          { reminder: 1, to: 'ann' },
          { reminder: 1, to: 'ann', replayed: true },
        ]),
      );
      expect(sent).toEqual([{ to: 'ann' }]); // `repeat` is not a parameter of the strict schema
      expect(JSON.stringify(seen[2])).toMatch(/validation failed/i);
    });

    test('an invalid repeat: the model is told what to fix, nothing ran', async () => {
      const { sendReminder, sent } = reminders(kind);
      const { seen } = await run(
        transport,
        api,
        sendReminder,
        (turn) =>
          turn.toolOutputs.length === 0
            ? { toolCalls: [call({ to: 'ann', repeat: 'twice' }), call({ to: 'ann', repeat: 0 })] }
            : { content: 'ok' },
        repeatable,
      );
      expect(sent).toEqual([]);
      expect(seen).toHaveLength(2);
      for (const output of seen) {
        expect(output).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
        expect((output as { message: string }).message).toMatch(/repeat of send_reminder must be/);
      }
    });
  },
);

test('a null repeat (what a strict schema makes the model send to leave it out) is the first call', async () => {
  const { sendReminder, sent } = reminders('zod 4');
  const { seen } = await run(
    'generate',
    'chat',
    sendReminder,
    (turn) =>
      turn.toolOutputs.length === 0
        ? { toolCalls: [call({ to: 'ann', repeat: null }), call({ to: 'ann' })] }
        : { content: 'done' },
    repeatable,
  );
  expect(sent).toEqual([{ to: 'ann' }]);
  expect(seen).toEqual(
    expect.arrayContaining([
      { reminder: 1, to: 'ann' },
      { reminder: 1, to: 'ann', replayed: true },
    ]),
  );
});

test('a direct call of the wrapped execute: repeat 2 has its own key, its retry replays', async () => {
  const { sendReminder, sent } = reminders('zod 4');
  const wrapped = idempotentTool(sendReminder, {
    store: createMemoryStore(),
    turnId: 'm-1',
    policy: { repeatable: true },
  });
  const run = (input: object) => wrapped.execute?.(input as never, {} as never);
  expect(await run({ to: 'ann' })).toEqual({ reminder: 1, to: 'ann' });
  expect(await run({ to: 'ann', repeat: 1 })).toEqual({ reminder: 1, to: 'ann', replayed: true });
  expect(await run({ to: 'ann', repeat: 2 })).toEqual({ reminder: 2, to: 'ann' });
  expect(await run({ to: 'ann', repeat: 2 })).toEqual({ reminder: 2, to: 'ann', replayed: true });
  expect(String(await run({ to: 'ann', repeat: 2.5 }))).toMatch(/"error":"invalid_input"/);
  expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
});

describe('deliberate repeats: the tool and its callbacks never see `repeat`', () => {
  test('requireApproval, toModelOutput and onInputAvailable get the tool input; repeat 2 is approved on its own', async () => {
    const gated: unknown[] = [];
    const available: unknown[] = [];
    const modelOutputs: unknown[] = [];
    const { sendReminder, sent } = reminders('zod 4', {
      requireApproval: async (input: unknown) => {
        gated.push(input);
        return true;
      },
      onInputAvailable: ({ input }: { input: unknown }) => {
        available.push(input);
      },
      toModelOutput: (output: unknown) => {
        modelOutputs.push(output);
        return { type: 'json', value: output };
      },
    });
    const server = await startScriptedServer({
      respond: (turn) => {
        const step = turn.toolOutputs.length;
        if (step === 0) return { toolCalls: [call({ to: 'ann' })] };
        if (step === 1) return { toolCalls: [call({ to: 'ann', repeat: 2 })] };
        return { content: 'done' };
      },
    });
    servers.push(server);
    const tools = idempotentTools(
      { send_reminder: sendReminder },
      { store: createMemoryStore(), ...repeatable },
    );
    const agent = makeAgent({ server, tools, storage: libsql() });
    const memory = { memory: { thread: 'chat-1', resource: 'user-1' } };
    const target = (out: { runId?: string | undefined; suspendPayload?: unknown }) => ({
      runId: out.runId as string,
      toolCallId: (out.suspendPayload as { toolCallId: string }).toolCallId,
      ...memory,
    });
    const first = await agent.generate('Remind Ann, twice.', memory);
    expect(first.finishReason).toBe('suspended');
    const approval = await getToolCallApproval(agent, target(first));
    expect(approval).toMatchObject({ status: 'pending', toolName: 'send_reminder' });
    const second = await approveToolCallGenerate(agent, { ...target(first), by: 'alice' });
    // The repeat is another call: its own approval, not covered by the first one.
    expect(second.finishReason).toBe('suspended');
    const repeat = await getToolCallApproval(agent, target(second));
    expect(repeat).toMatchObject({ status: 'pending', toolName: 'send_reminder' });
    expect(repeat.key).not.toBe(approval.key);
    expect(sent).toEqual([{ to: 'ann' }]);
    const last = await approveToolCallGenerate(agent, { ...target(second), by: 'alice' });
    expect(last.finishReason).toBe('stop');
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
    for (const input of [...gated, ...available]) expect(input).toEqual({ to: 'ann' });
    expect(gated.length).toBeGreaterThanOrEqual(2);
    expect(available.length).toBeGreaterThanOrEqual(2);
    expect(modelOutputs).toEqual([
      { reminder: 1, to: 'ann' },
      { reminder: 2, to: 'ann' },
    ]);
  });
});

describe('deliberate repeats: setup', () => {
  const own: Record<Kind, () => unknown> = {
    'zod 4': () => z.object({ to: z.string(), repeat: z.boolean() }),
    'zod 3': () => z3.object({ to: z3.string(), repeat: z3.boolean() }),
    'JSON schema': () => ({ type: 'object', properties: { to: {}, repeat: {} } }),
    'Standard Schema': () => standardSchema({ to: { type: 'string' }, repeat: {} }),
  };
  test.each(KINDS)(
    'a %s tool whose own schema has `repeat` is refused when it is wrapped',
    (kind) => {
      const { sendReminder } = reminders(kind, {}, own[kind]());
      const store = createMemoryStore();
      expect(() =>
        idempotentTools({ send_reminder: sendReminder }, { store, ...repeatable }),
      ).toThrow(ConfigurationError);
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

  test('a schema that is not an object, or a repeatable that is not true, false or { argument }: refused', () => {
    const store = createMemoryStore();
    const { sendReminder } = reminders('zod 4', {}, z.string());
    expect(() => idempotentTool(sendReminder, { store, policy: { repeatable: true } })).toThrow(
      ConfigurationError,
    );
    const { sendReminder: ok } = reminders('zod 4');
    expect(() =>
      idempotentTools(
        { send_reminder: ok },
        { store, policies: { send_reminder: { repeatable: 'yes' as never } } },
      ),
    ).toThrow(ConfigurationError);
  });

  test('without the option the tool keeps its own inputSchema', () => {
    const { sendReminder } = reminders('zod 4');
    const wrapped = idempotentTool(sendReminder, { store: createMemoryStore(), turnId: 'm-1' });
    expect(wrapped.inputSchema).toBe(sendReminder.inputSchema);
    expect(wrapped.description).not.toContain('repeat: 2');
  });
});
