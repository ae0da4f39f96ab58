/**
 * Deliberate repeats through the AI SDK's real loop (generateText / streamText) with the real
 * `@ai-sdk/openai` client over HTTP to the scripted server: two identical calls in one turn are
 * one (replayed); `repeat: 2` is a second effect; a retry of it is replayed; the tool never sees
 * `repeat`.
 */

import { createMemoryStore } from '@idempotent-tools/core';
import { generateText, isStepCount, jsonSchema, streamText, type Tool, tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  type IdempotentToolsOptions,
  idempotentTool,
  idempotentTools,
} from './index.js';
import { type Api, type ScriptStep, startScriptedModel } from './test-utils/scripted-model.js';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

type Mode = 'generateText' | 'streamText';

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A send_reminder tool whose effects are counted, with a zod or a JSON schema. */
function reminderTool(kind: 'zod' | 'json', extra: Partial<Tool> = {}) {
  const sent: unknown[] = [];
  const execute = async (input: { to: string }) => {
    sent.push(input);
    return { reminder: sent.length, to: input.to };
  };
  const inputSchema =
    kind === 'zod'
      ? z.object({ to: z.string() }).strict()
      : jsonSchema<{ to: string }>({
          type: 'object',
          properties: { to: { type: 'string' } },
          required: ['to'],
          additionalProperties: false,
        });
  const sendReminder = tool({
    description: 'Send a reminder.',
    inputSchema: inputSchema as never,
    execute,
    ...extra,
  } as never) as Tool;
  return { sendReminder, sent };
}

const call = (input: Record<string, unknown>) => ({ tool: 'send_reminder', input });
/** Two identical calls in one step, then `repeat: 2`, then the same `repeat: 2` again. */
const repeating: ScriptStep[] = [
  { calls: [call({ to: 'ann' }), call({ to: 'ann' })] },
  { calls: [call({ to: 'ann', repeat: 2 })] },
  { calls: [call({ to: 'ann', repeat: 2 })] },
  { text: 'done' },
];

async function runLoop(mode: Mode, api: Api, tools: Record<string, Tool>, steps: ScriptStep[]) {
  const scripted = await startScriptedModel(steps);
  closing.push(scripted.close);
  const common = {
    model: scripted.model(api),
    tools,
    prompt: 'Remind Ann, twice.',
    stopWhen: isStepCount(10),
  };
  if (mode === 'generateText') await generateText(common);
  else await streamText({ ...common, onError: () => {} }).consumeStream();
  const tool = (i: number) => {
    const body = scripted.server.requests[i]?.body as { tools: Array<Record<string, unknown>> };
    const [t] = body.tools;
    const fn = (t?.function ?? t) as {
      description: string;
      parameters: { properties: Record<string, unknown>; required?: string[] };
    };
    return fn;
  };
  // The last request carries every tool output of the turn.
  return { seen: (scripted.seen.at(-1) ?? []).map(parsed), tool };
}

const options = (
  extra: Partial<IdempotentToolsOptions<{ send_reminder: Tool }>> = {},
): IdempotentToolsOptions<{ send_reminder: Tool }> => ({
  store: createMemoryStore(),
  conversationId: 'chat-1',
  ...extra,
});
const repeatable = { policies: { send_reminder: { repeatable: true } } };

describe.each<[Mode, Api, 'zod' | 'json']>([
  ['generateText', 'chat', 'zod'],
  ['generateText', 'responses', 'json'],
  ['streamText', 'chat', 'json'],
  ['streamText', 'responses', 'zod'],
])(
  'deliberate repeats: %s, %s, a %s schema (real @ai-sdk/openai, scripted model over HTTP)',
  (mode, api, kind) => {
    it('same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed', async () => {
      const { sendReminder, sent } = reminderTool(kind);
      const tools = idempotentTools({ send_reminder: sendReminder }, options(repeatable));
      const { seen, tool } = await runLoop(mode, api, tools, repeating);
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
      expect(Object.keys(tool(0).parameters.properties)).toEqual(['to', 'repeat']);
      expect(tool(0).parameters.required ?? []).not.toContain('repeat');
      expect(tool(0).description).toContain(
        'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).',
      );
    });

    it('off by default: no repeat argument in the schema or the description', async () => {
      const { sendReminder, sent } = reminderTool(kind);
      const tools = idempotentTools({ send_reminder: sendReminder }, options());
      const { seen, tool } = await runLoop(mode, api, tools, repeating);
      expect(Object.keys(tool(0).parameters.properties)).toEqual(['to']);
      expect(tool(0).description).not.toContain('repeat: 2');
      expect(seen.slice(0, 2)).toEqual(
        expect.arrayContaining([
          { reminder: 1, to: 'ann' },
          { reminder: 1, to: 'ann', replayed: true },
        ]),
      );
      // The strict zod object refuses `repeat` (a JSON schema without a validator is not checked).
      if (kind === 'zod') expect(sent).toEqual([{ to: 'ann' }]);
    });

    it('an invalid repeat: the model is told what to fix, nothing ran', async () => {
      const { sendReminder, sent } = reminderTool(kind);
      const tools = idempotentTools({ send_reminder: sendReminder }, options(repeatable));
      const { seen } = await runLoop(mode, api, tools, [
        { calls: [call({ to: 'ann', repeat: 'twice' })] },
        { calls: [call({ to: 'ann', repeat: 0 })] },
      ]);
      expect(sent).toEqual([]);
      for (const output of seen) {
        const error = parsed((output as { error: string }).error);
        expect(error).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
        expect((error as { message: string }).message).toMatch(/repeat of send_reminder must be/);
      }
      expect(seen).toHaveLength(2);
    });
  },
);

describe('deliberate repeats: setup', () => {
  it('a tool whose own schema has `repeat` is refused when it is wrapped (zod and JSON schema)', () => {
    const own = z.object({ to: z.string(), repeat: z.boolean() });
    const zodTool = tool({ inputSchema: own, execute: async () => 1 });
    expect(() => idempotentTools({ send_reminder: zodTool }, options(repeatable))).toThrow(
      ConfigurationError,
    );
    const jsonTool = tool({
      inputSchema: jsonSchema<{ to: string; repeat: boolean }>({
        type: 'object',
        properties: { to: { type: 'string' }, repeat: { type: 'boolean' } },
      }),
      execute: async () => 1,
    });
    expect(() => idempotentTools({ send_reminder: jsonTool }, options(repeatable))).toThrow(
      /has its own "repeat"/,
    );
    // Another name for the repeat argument: accepted.
    const renamed = idempotentTool('send_reminder', zodTool, {
      store: createMemoryStore(),
      conversationId: 'chat-1',
      policy: { repeatable: { argument: 'times' } },
    });
    expect(renamed.description).toContain('pass times: 2 (3, ...)');
  });

  it('a strict tool gets the argument required and nullable; null is the first call', async () => {
    const { sendReminder, sent } = reminderTool('json', { strict: true } as Partial<Tool>);
    const tools = idempotentTools({ send_reminder: sendReminder }, options(repeatable));
    const { seen, tool } = await runLoop('generateText', 'responses', tools, [
      { calls: [call({ to: 'ann', repeat: null })] },
      { calls: [call({ to: 'ann', repeat: null })] },
      { calls: [call({ to: 'ann', repeat: 2 })] },
    ]);
    expect(tool(0).parameters).toMatchObject({
      properties: { repeat: { type: ['integer', 'null'], minimum: 1 } },
      required: ['to', 'repeat'],
    });
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
    expect(seen).toEqual([
      { reminder: 1, to: 'ann' },
      { reminder: 1, to: 'ann', replayed: true },
      { reminder: 2, to: 'ann' },
    ]);
  });

  it('a repeatable that is not true, false or { argument } is refused', () => {
    const { sendReminder } = reminderTool('zod');
    expect(() =>
      idempotentTools(
        { send_reminder: sendReminder },
        options({ policies: { send_reminder: { repeatable: 'yes' as never } } }),
      ),
    ).toThrow(ConfigurationError);
  });
});
