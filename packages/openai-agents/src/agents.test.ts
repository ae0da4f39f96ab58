import { createMemoryStore, RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '@idempotent-tools/core';
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/openai';
import {
  Agent,
  OpenAIResponsesModel,
  RunState,
  run,
  setDefaultOpenAIClient,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import { assistantMessage, functionCall, modelError, ScriptedModel } from '@openai/agents/testing';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { AGENTS_DEFAULT_ERROR_OUTPUT, wrapAgentTools, wrapFunctionTool } from './agents.js';
import { ConfigurationError, createIdempotency, type Idempotency } from './index.js';
import { client, ticketArgs, ticketModel, ticketSystem, withRetries } from './test-utils/app.js';

beforeAll(() => setTracingDisabled(true));
const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function ticketTool(system: ReturnType<typeof ticketSystem>, fail?: () => boolean) {
  return tool({
    name: 'create_ticket',
    description: 'Open a support ticket.',
    parameters: ticketArgs,
    execute: (args) => {
      if (fail?.()) throw new Error('ticket system down');
      return system.create(args);
    },
  });
}

/** The outputs the model was sent, by call id, parsed. */
function outputsSent(model: ScriptedModel): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const call of model.calls) {
    for (const item of call.request.input as Array<Record<string, unknown>>) {
      if (item.type !== 'function_call_result') continue;
      const text = (item.output as { text: string }).text;
      try {
        out[item.callId as string] = JSON.parse(text);
      } catch {
        out[item.callId as string] = text;
      }
    }
  }
  return out;
}

function agentWith(
  idempotency: Idempotency,
  system: ReturnType<typeof ticketSystem>,
  model: ScriptedModel,
) {
  const agent = new Agent({
    name: 'support',
    instructions: 'Open tickets.',
    tools: [ticketTool(system)],
    model,
  });
  return wrapAgentTools(idempotency, agent, { conversationId: 'chat-1' });
}
const fc = (callId: string, args: Record<string, unknown> = { title: 'Printer' }) =>
  functionCall('create_ticket', args, { callId });

describe('@openai/agents: the runner with a ScriptedModel', () => {
  test('the same call again in a later step: one execution, the model sees replayed: true', async () => {
    const system = ticketSystem();
    const model = new ScriptedModel([[fc('c1')], [fc('c2')], [assistantMessage('done')]]);
    const result = await run(
      agentWith(createIdempotency({ store: createMemoryStore() }), system, model),
      'Printer broken',
    );
    expect(result.finalOutput).toBe('done');
    expect(system.tickets).toHaveLength(1);
    expect(outputsSent(model)).toEqual({
      c1: { ticket: 'T-1', title: 'Printer', priority: 'normal' },
      c2: { ticket: 'T-1', title: 'Printer', priority: 'normal', replayed: true },
    });
  });

  test('two identical calls in one step: one execution', async () => {
    const system = ticketSystem();
    const model = new ScriptedModel([[fc('c1'), fc('c2')], [assistantMessage('done')]]);
    await run(agentWith(createIdempotency({ store: createMemoryStore() }), system, model), 'two');
    expect(system.tickets).toHaveLength(1);
    const outputs = Object.values(outputsSent(model)) as Array<{ replayed?: boolean }>;
    expect(outputs.map((o) => o.replayed === true).sort()).toEqual([false, true]);
  });

  test('the run fails after the tool ran and the app runs it again: replayed; a new turn runs again', async () => {
    const system = ticketSystem();
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const model = new ScriptedModel([
      [fc('c1')],
      modelError(new Error('connection reset')), // the run dies after the tool ran
      [fc('c9')], // the app's new run of the same input: the model asks again, new call id
      [assistantMessage('done')],
    ]);
    const agent = agentWith(idempotency, system, model);
    await expect(run(agent, 'Printer broken')).rejects.toThrow('connection reset');
    const again = await run(agent, 'Printer broken');
    expect(again.finalOutput).toBe('done');
    expect(system.tickets).toHaveLength(1);
    expect(outputsSent(model).c9).toMatchObject({ ticket: 'T-1', replayed: true });

    model.enqueue([fc('c10')], [assistantMessage('done again')]);
    await run(agent, [...again.history, { role: 'user', content: 'And another one, please' }]);
    expect(system.tickets.map((t) => t.id)).toEqual(['T-1', 'T-2']);
  });

  test('drift and outcome-unknown reach the model as tool output with guidance', async () => {
    let runs = 0;
    const createCustomer = tool({
      name: 'create_customer',
      description: 'Create a customer.',
      parameters: z.object({ email: z.string(), name: z.string() }),
      execute: (args) => ({ id: `cus_${++runs}`, ...args }),
    });
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const model = new ScriptedModel([
      [functionCall('create_customer', { email: 'a@x.io', name: 'Ann' }, { callId: 'c1' })],
      [functionCall('create_customer', { email: 'a@x.io', name: 'Bob' }, { callId: 'c2' })],
      [functionCall('create_customer', { email: 'b@x.io', name: 'Bea' }, { callId: 'c3' })],
      [assistantMessage('done')],
    ]);
    const agent = wrapAgentTools(
      idempotency,
      new Agent({ name: 'crm', tools: [createCustomer], model }),
      { policies: { create_customer: { businessKey: (a: { email: string }) => a.email } } },
    );
    // b@x.io: an earlier attempt died mid-way; its lease ran out.
    const { key, fingerprint } = idempotency.keyOf<{ email: string; name: string }>(
      { toolName: 'create_customer', args: { email: 'b@x.io', name: 'Bea' } },
      { businessKey: (a: { email: string }) => a.email },
    );
    await idempotency.store.claim({
      key,
      fingerprint,
      token: 'dead',
      leaseMs: 1,
      ttlMs: 60_000,
      meta: { toolName: 'create_customer' },
    });
    await run(agent, 'onboard');
    const sent = outputsSent(model);
    expect(runs).toBe(1);
    expect(sent.c2).toMatchObject({ error: 'drift', next: 'change-arguments' });
    expect(sent.c3).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });
  });

  test("the tool's own error: the framework's error output, nothing stored, the retry runs", async () => {
    const system = ticketSystem();
    let attempts = 0;
    const model = new ScriptedModel([[fc('c1')], [fc('c2')], [assistantMessage('done')]]);
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({ name: 'a', tools: [ticketTool(system, () => ++attempts === 1)], model }),
      { conversationId: 'chat-1' },
    );
    await run(agent, 'x');
    const sent = outputsSent(model);
    expect(sent.c1).toBe(AGENTS_DEFAULT_ERROR_OUTPUT);
    expect(sent.c2).toEqual({ ticket: 'T-1', title: 'Printer', priority: 'normal' });
    expect(attempts).toBe(2);
    expect(system.tickets).toHaveLength(1);
  });

  test('a tool without errorFunction throws: the run fails as without wrapping; the rerun runs it', async () => {
    let attempts = 0;
    const strict = tool({
      name: 'charge',
      description: 'Charge.',
      parameters: z.object({ cents: z.number() }),
      errorFunction: null,
      execute: () => {
        if (++attempts === 1) throw new Error('processor timeout');
        return { charged: true };
      },
    });
    const model = new ScriptedModel([
      [functionCall('charge', { cents: 5 }, { callId: 'c1' })],
      [functionCall('charge', { cents: 5 }, { callId: 'c2' })],
      [assistantMessage('done')],
    ]);
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({ name: 'a', tools: [strict], model }),
      { conversationId: 'chat-1' },
    );
    await expect(run(agent, 'pay')).rejects.toThrow('processor timeout');
    await run(agent, 'pay');
    expect(attempts).toBe(2);
    expect(outputsSent(model).c2).toEqual({ charged: true });
  });

  test('turn id from run context, replay shape of strings, exclude / unsafe, descriptions', async () => {
    let sends = 0;
    let reads = 0;
    const send = tool({
      name: 'send_sms',
      description: 'Send an SMS.',
      parameters: z.object({ to: z.string() }),
      execute: () => `sent #${++sends}`,
    });
    const read = tool({
      name: 'read',
      description: 'Read.',
      parameters: z.object({}),
      execute: () => ++reads,
    });
    const email = tool({
      name: 'email',
      description: 'Email.',
      parameters: z.object({}),
      execute: () => 'x',
    });
    const model = new ScriptedModel([
      [
        functionCall('send_sms', { to: '+1' }, { callId: 'c1' }),
        functionCall('read', {}, { callId: 'c2' }),
      ],
      [
        functionCall('send_sms', { to: '+1' }, { callId: 'c3' }),
        functionCall('read', {}, { callId: 'c4' }),
      ],
      [assistantMessage('done')],
    ]);
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({ name: 'a', tools: [send, read, email], model }),
      { exclude: ['read'], unsafe: ['email'] },
    );
    expect(agent.tools.map((t) => (t as { description: string }).description)).toEqual([
      `Send an SMS.\n\n${RETRY_SAFE_NOTE}`,
      'Read.',
      `Email.\n\n${RETRY_UNSAFE_NOTE}`,
    ]);
    expect(send.description).toBe('Send an SMS.'); // the user's tool is not mutated
    await run(agent, 'go', { context: { turnId: 'msg_1' } });
    expect([sends, reads]).toEqual([1, 2]);
    expect(outputsSent(model).c3).toEqual({ result: 'sent #1', replayed: true });
  });

  test('wrapFunctionTool: explicit turn id and scope; bad input is a typed error', async () => {
    let runs = 0;
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const raw = tool({
      name: 'op',
      description: 'Op.',
      parameters: z.object({ n: z.number() }),
      execute: () => ++runs,
    });
    const wrapped = wrapFunctionTool(idempotency, raw, {
      turnId: (ctx) => (ctx.context as { msg: string }).msg,
      scope: (ctx) => (ctx.context as { user: string }).user,
    });
    const model = new ScriptedModel([
      [functionCall('op', { n: 1 }, { callId: 'a' })],
      [assistantMessage('ok')],
      [functionCall('op', { n: 1 }, { callId: 'a' })],
      [assistantMessage('ok')],
      [functionCall('op', { n: 1 }, { callId: 'a' })],
      [assistantMessage('ok')],
    ]);
    const agent = new Agent({ name: 'a', tools: [wrapped], model });
    await run(agent, 'x', { context: { msg: 'm1', user: 'u1' } });
    await run(agent, 'x', { context: { msg: 'm1', user: 'u1' } });
    await run(agent, 'x', { context: { msg: 'm1', user: 'u2' } });
    expect(runs).toBe(2);

    expect(() => wrapFunctionTool(idempotency, { type: 'hosted_tool' } as never)).toThrow(
      ConfigurationError,
    );
    expect(() => wrapAgentTools(idempotency, {} as never)).toThrow(/takes an Agent/);
    const noTurn = new ScriptedModel([[functionCall('op', { n: 1 }, { callId: 'a' })]]);
    const bare = new Agent({
      name: 'b',
      tools: [wrapFunctionTool(idempotency, raw)],
      model: noTurn,
    });
    await expect(run(bare, 'x')).rejects.toThrow(
      /wrapFunctionTool: the turn of this call is unknown/,
    );
  });
});

describe('@openai/agents over a flaky network (OpenAIResponsesModel, real openai client)', () => {
  test('dropped connection, then a truncated body after the tool ran: the rerun replays', async () => {
    const system = ticketSystem();
    const server = await startScriptedServer({
      respond: ticketModel,
      faults: ['drop', undefined, 'truncate'],
    });
    servers.push(server);
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({
        name: 'support',
        tools: [ticketTool(system)],
        model: new OpenAIResponsesModel(client(server.baseURL), 'scripted'),
      }),
    );
    const context = { conversationId: 'chat-1' };
    const result = await withRetries(3, () => run(agent, 'Server room flooded', { context }));
    expect(system.tickets).toEqual([{ id: 'T-1', title: 'Server room flooded' }]);
    expect(server.requests.map((r) => r.fault ?? 'ok')).toEqual([
      'drop',
      'ok',
      'truncate',
      'ok',
      'ok',
    ]);
    expect(result.finalOutput).toContain('"replayed":true');
  });
});

describe('@openai/agents with a model given by name (not observed)', () => {
  test('its calls need turnId: the run input alone (maybe the newest message of a server-kept history) is refused', async () => {
    const server = await startScriptedServer({
      respond: (turn) =>
        turn.toolOutputs.length === 0
          ? { toolCalls: [{ name: 'refund', arguments: { order: turn.userText } }] }
          : { content: 'done' },
    });
    servers.push(server);
    setDefaultOpenAIClient(client(server.baseURL));
    let refunds = 0;
    const make = (needsApproval: boolean) =>
      wrapAgentTools(
        createIdempotency({ store: createMemoryStore() }),
        new Agent({
          name: 'billing',
          model: 'scripted',
          tools: [
            tool({
              name: 'refund',
              description: 'Refund.',
              parameters: z.object({ order: z.string() }),
              needsApproval,
              execute: () => ++refunds,
            }),
          ],
        }),
      );
    const agent = make(false);
    // Turn 1 and turn 2 of Bob's chat with previousResponseId would both send only '42': refused.
    await expect(run(agent, '42', { context: { conversationId: 'chat-bob' } })).rejects.toThrow(
      /Give the agent a Model instance/,
    );
    expect(refunds).toBe(0);
    await run(agent, '42', { context: { turnId: 'bob-msg-1' } });
    await run(agent, '42', { context: { turnId: 'bob-msg-2' } });
    await run(agent, '42', { context: { turnId: 'bob-msg-2' } }); // a retry of Bob's second turn
    expect(refunds).toBe(2);

    // An approval needs to know what the model asked for (a saved RunState can be edited): with
    // a model given by name the adapter never sees it, so an approved call is refused (issue 25:
    // it used to run the state's call, whatever it had become).
    const approving = make(true);
    const interrupted = await run(approving, '43', { context: { turnId: 'cy-msg-1' } });
    const state = await RunState.fromString(approving, interrupted.state.toString());
    for (const interruption of state.getInterruptions()) state.approve(interruption);
    const refused = await run(approving, state).catch((error: unknown) => error);
    const cause = (refused as { error?: unknown }).error;
    expect(ConfigurationError.isInstance(cause)).toBe(true);
    expect((cause as ConfigurationError).option).toBe('model');
    expect(String((cause as Error).message)).toMatch(/give it a Model instance/);
    expect(refunds).toBe(2);
  });
});

describe('@openai/agents approvals bound to the call the model emitted (in process)', () => {
  const chargeTool = (charges: number[]) =>
    tool({
      name: 'charge',
      description: 'Charge.',
      parameters: z.object({ amount: z.number() }),
      needsApproval: true,
      execute: ({ amount }) => {
        charges.push(amount);
        return { charged: amount };
      },
    });

  test('alwaysApprove: a later call of the tool, emitted by the model in the same run, runs without asking again', async () => {
    const server = await startScriptedServer({
      respond: (turn) =>
        turn.toolOutputs.length < 2
          ? { toolCalls: [{ name: 'charge', arguments: { amount: 5 + turn.toolOutputs.length } }] }
          : { content: 'done' },
    });
    servers.push(server);
    const charges: number[] = [];
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({
        name: 'billing',
        tools: [chargeTool(charges)],
        model: new OpenAIResponsesModel(client(server.baseURL), 'scripted'),
      }),
    );
    const interrupted = await run(agent, 'Charge me twice.', { context: { conversationId: 'c' } });
    const state = interrupted.state;
    for (const item of state.getInterruptions()) state.approve(item, { alwaysApprove: true });
    const result = await run(agent, state);
    expect(result.interruptions).toEqual([]);
    expect(charges).toEqual([5, 6]);
  });

  test('wrapFunctionTool sees no model: an approved call is refused to the developer, nothing ran', async () => {
    const server = await startScriptedServer({
      respond: (turn) =>
        turn.toolOutputs.length === 0
          ? { toolCalls: [{ name: 'charge', arguments: { amount: 5 } }] }
          : { content: 'done' },
    });
    servers.push(server);
    const charges: number[] = [];
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const agent = new Agent({
      name: 'billing',
      tools: [wrapFunctionTool(idempotency, chargeTool(charges))],
      model: new OpenAIResponsesModel(client(server.baseURL), 'scripted'),
    });
    const interrupted = await run(agent, 'Charge 5.', { context: { turnId: 'msg-1' } });
    const state = interrupted.state;
    for (const item of state.getInterruptions()) state.approve(item);
    const refused = await run(agent, state).catch((error: unknown) => error);
    expect(ConfigurationError.isInstance((refused as { error?: unknown }).error)).toBe(true);
    expect(charges).toEqual([]);
  });
});

describe('@openai/agents: tools made idempotent twice are refused when wrapped', () => {
  test('wrapAgentTools of a wrapped agent, of a wrapFunctionTool tool; wrapFunctionTool of a wrapped tool', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const system = ticketSystem();
    const agent = new Agent({ name: 'support', tools: [ticketTool(system)] });
    const wrapped = wrapAgentTools(idempotency, agent);
    expect(() => wrapAgentTools(idempotency, wrapped)).toThrow(/already idempotent/);
    const one = wrapFunctionTool(idempotency, ticketTool(system), { turnId: 't' });
    expect(() => wrapFunctionTool(idempotency, one, { turnId: 't' })).toThrow(ConfigurationError);
    expect(() => wrapAgentTools(idempotency, new Agent({ name: 'a', tools: [one] }))).toThrow(
      /already idempotent/,
    );
    expect(() => wrapFunctionTool(idempotency, wrapped.tools[0] as never, { turnId: 't' })).toThrow(
      /already idempotent/,
    );
    // Left as they are, an excluded or unsafe wrapped tool is not wrapped again: no refusal.
    expect(() =>
      wrapAgentTools(idempotency, new Agent({ name: 'a', tools: [one] }), {
        exclude: ['create_ticket'],
      }),
    ).not.toThrow();
    expect(system.tickets).toEqual([]);
  });
});
