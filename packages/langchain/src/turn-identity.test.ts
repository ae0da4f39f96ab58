/**
 * Issue 15, turn identity, through the real loop: `createAgent` + `ChatOpenAI` over HTTP against
 * the scripted server (JSON and streamed), and the manual `bindTools` loop outside a graph.
 * Before: the turn was the thread id + the id of the last human message, and LangGraph's
 * add_messages reducer gives a message without an id a fresh random id on every invoke.
 */
import {
  ConfigurationError,
  createMemoryStore,
  type IdempotencyStore,
} from '@idempotent-tools/core';
import type { ScriptedServer } from '@idempotent-tools/testing/openai';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { StructuredToolInterface } from '@langchain/core/tools';
import { MemorySaver, MessagesAnnotation, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import {
  type AgentMiddleware,
  createAgent,
  createMiddleware,
  toolRetryMiddleware,
} from 'langchain';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { idempotentToolsMiddleware } from './middleware.js';
import { toolResults } from './test-utils/fixtures.js';
import {
  carryOut,
  chatModel,
  type ModelScript,
  runAgent,
  startModelServer,
  TRANSPORTS,
} from './test-utils/openai.js';
import { idempotentTool, idempotentTools } from './tools.js';
import type { IdempotentToolsMiddlewareOptions } from './types.js';
import { idempotencyOf } from './wrap-tool.js';

let server: ScriptedServer;
let effects: string[];
let store: IdempotencyStore;
/** What the scripted model does: the tests that need `carry_out_now` set it. */
let script: ModelScript;
beforeEach(async () => {
  script = {};
  server = await startModelServer(script);
  effects = [];
  store = createMemoryStore();
});
afterEach(() => server.close());

const thread = (id: string) => ({ configurable: { thread_id: id } });
/** What a chat backend passes: messages parsed from the request body, so without ids. */
const user = (text: string) => new HumanMessage(text);
const answered = (text: string) => new AIMessage(text);
const modelCalls = () => server.requests.filter((r) => r.path === '/chat/completions').length;

/** The error `agent.invoke` rejected with, and the ConfigurationError in it. */
async function refusal(run: Promise<unknown>): Promise<ConfigurationError> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  const found = ConfigurationError.isInstance(error)
    ? error
    : (error as { cause?: unknown } | undefined)?.cause;
  if (!ConfigurationError.isInstance(found)) {
    throw new Error(`expected a ConfigurationError, got ${String(error)}`);
  }
  return found;
}

describe.each(TRANSPORTS)('createAgent + ChatOpenAI over HTTP (%s): turn identity', (transport) => {
  const agentWith = (
    options: Partial<IdempotentToolsMiddlewareOptions> = {},
    extra: { systemPrompt?: string; checkpointer?: MemorySaver } = {},
  ) =>
    createAgent({
      model: chatModel(server),
      tools: [carryOut(effects)],
      middleware: [
        idempotentToolsMiddleware({ store, ...options } as IdempotentToolsMiddlewareOptions),
      ],
      ...(extra.systemPrompt === undefined ? {} : { systemPrompt: extra.systemPrompt }),
      ...(extra.checkpointer === undefined ? {} : { checkpointer: extra.checkpointer }),
    });
  const run = (agent: unknown, messages: unknown, config: object = {}) =>
    runAgent(agent, transport, messages === null ? null : { messages }, config);
  /** One turn whose reply is lost after the tool ran (the stream or the body is cut). */
  const losingReply = (agent: unknown, messages: () => BaseMessage[], config: object) => {
    server.inject(undefined, 'truncate');
    return expect(run(agent, messages(), config)).rejects.toThrow();
  };

  test('two users with the same prompt, each on their own thread: two effects', async () => {
    const agent = agentWith();
    await run(agent, [user('Cancel my subscription.')], thread('chat-ann'));
    await run(agent, [user('Cancel my subscription.')], thread('chat-bob'));
    expect(effects).toEqual(['Cancel my subscription.', 'Cancel my subscription.']);
  });

  test('two chats whose message ids repeat per chat ("m1"), told apart by the conversationId option, no thread: two effects (was: the second user got the first user\'s receipt)', async () => {
    const agent = agentWith({
      conversationId: ({ config }) => (config.context as { chatId?: string } | undefined)?.chatId,
    });
    const first = () => [new HumanMessage({ id: 'm1', content: 'Cancel my subscription.' })];
    const ann = await run(agent, first(), { context: { chatId: 'chat-ann' } });
    const bob = await run(agent, first(), { context: { chatId: 'chat-bob' } });
    expect(effects).toHaveLength(2);
    expect(toolResults(bob.messages)[0]?.content).toEqual({
      done: 'Cancel my subscription.',
      receipt: 'R-2',
    });
    expect(toolResults(ann.messages)[0]?.content).toMatchObject({ receipt: 'R-1' });
  });

  test('no thread_id, no conversationId, no turn_id: agent.invoke throws a ConfigurationError naming them; the model was not called, nothing ran', async () => {
    const error = await refusal(run(agentWith(), [user('Cancel my subscription.')]));
    expect(error.option).toBe('conversationId');
    expect(error.message).toMatch(/thread_id/);
    expect(error.message).toMatch(/conversationId/);
    expect(error.message).toMatch(/turn_id/);
    expect(modelCalls()).toBe(0);
    expect(effects).toEqual([]);
  });

  test('the app retries agent.invoke after a lost reply (messages without ids, same thread, no checkpointer): one effect (was: a second charge)', async () => {
    const agent = agentWith();
    const request = () => [user('Charge me $5 for the upgrade.')];
    await losingReply(agent, request, thread('chat-ann'));
    expect(effects).toHaveLength(1);
    const out = await run(agent, request(), thread('chat-ann'));
    expect(effects).toHaveLength(1);
    expect(idempotencyOf(out.messages.findLast((m) => m.getType() === 'tool'))).toMatchObject({
      replayed: true,
    });
  });

  test('the app retries agent.invoke after a lost reply, with a checkpointer (the thread keeps the first attempt): one effect', async () => {
    const agent = agentWith({}, { checkpointer: new MemorySaver() });
    await losingReply(agent, () => [user('Charge me $5 for the upgrade.')], thread('chat-ann'));
    await run(agent, [user('Charge me $5 for the upgrade.')], thread('chat-ann'));
    expect(effects).toHaveLength(1);
  });

  test('with a checkpointer, a returnDirect tool answered the turn (the run ended on its result): the same words again are a new turn, two effects; re-sent after a lost reply: still two', async () => {
    const agent = createAgent({
      model: chatModel(server),
      tools: [carryOut(effects), carryOut(effects, { returnDirect: true })],
      middleware: [idempotentToolsMiddleware({ store })],
      checkpointer: new MemorySaver(),
    });
    script.tool = 'carry_out_now';
    const first = await run(agent, [user('Yes, send it.')], thread('chat-ann'));
    expect(first.messages.at(-1)?.getType()).toBe('tool'); // no answer after the tool's result
    await run(agent, [user('Yes, send it.')], thread('chat-ann'));
    expect(effects).toEqual(['Yes, send it.', 'Yes, send it.']);
    script.tool = 'carry_out';
    await losingReply(agent, () => [user('Yes, send it.')], thread('chat-ann'));
    await run(agent, [user('Yes, send it.')], thread('chat-ann'));
    expect(effects).toHaveLength(3);
  });

  test('turn 3 and turn 9 of one thread both say "Yes, send it.": two effects; turn 9 re-sent after a lost reply: still two', async () => {
    const agent = agentWith();
    const history: BaseMessage[] = [];
    const turn = async (text: string) => {
      const out = await run(agent, [...history, user(text)], thread('chat-ann'));
      history.push(user(text), answered(out.messages.at(-1)?.text ?? ''));
    };
    for (const text of ['Draft an email to Bob.', 'Make it shorter.', 'Yes, send it.']) {
      await turn(text);
    }
    for (const text of ['Draft one to Carol.', 'Formal.', 'Add a date.', 'Shorter.', 'Fine.']) {
      await turn(text);
    }
    const ninth = () => [...history.map((m) => m), user('Yes, send it.')];
    await losingReply(agent, ninth, thread('chat-ann'));
    await run(agent, ninth(), thread('chat-ann'));
    expect(effects.filter((e) => e === 'Yes, send it.')).toHaveLength(2);
    expect(effects).toHaveLength(9);
  });

  test('a retry whose systemPrompt was rebuilt (a timestamp, the user profile): one effect', async () => {
    const at = (time: string, plan = '') =>
      agentWith({}, { systemPrompt: `You are a support agent. It is ${time}.${plan}` });
    await losingReply(at('09:00:00'), () => [user('Cancel my subscription.')], thread('chat-ann'));
    await run(
      at('09:00:07', ' Plan: gold.'),
      [user('Cancel my subscription.')],
      thread('chat-ann'),
    );
    expect(effects).toHaveLength(1);
  });
});

describe('createAgent + ChatOpenAI: a refusal reaches the developer, whatever the middleware', () => {
  const retry = () =>
    toolRetryMiddleware({
      maxRetries: 1,
      initialDelayMs: 0,
      jitter: false,
    }) as unknown as AgentMiddleware;
  const input = { messages: [new HumanMessage('Cancel my subscription.')] };

  test.each([
    ['toolRetryMiddleware outside', 'outside'],
    ['toolRetryMiddleware inside', 'inside'],
  ])('no identity, %s: agent.invoke throws, nothing ran', async (_name, where) => {
    const own = idempotentToolsMiddleware({ store });
    const agent = createAgent({
      model: chatModel(server),
      tools: [carryOut(effects)],
      middleware: where === 'outside' ? [retry(), own] : [own, retry()],
    });
    expect((await refusal(agent.invoke(input))).option).toBe('conversationId');
    expect(effects).toEqual([]);
  });

  test('a turnId function that finds no turn, toolRetryMiddleware inside (its onFailure would make a message of it): agent.invoke throws, nothing ran', async () => {
    const agent = createAgent({
      model: chatModel(server),
      tools: [carryOut(effects)],
      middleware: [
        idempotentToolsMiddleware({
          store,
          turnId: ({ config }) => config.configurable?.request_id as string | undefined,
        }),
        retry(),
      ],
    });
    expect((await refusal(agent.invoke(input))).message).toMatch(/turn_id/);
    expect(effects).toEqual([]);
  });

  test('wrapped tools with the middleware: refused out of agent.invoke', async () => {
    const agent = createAgent({
      model: chatModel(server),
      tools: idempotentTools([carryOut(effects)], { store }),
      middleware: [idempotentToolsMiddleware({ store })],
    });
    await refusal(agent.invoke(input));
    expect(effects).toEqual([]);
  });

  test('tools that idempotentTools returned, made idempotent again by the middleware: refused before the model is called, nothing ran (was: passed through)', async () => {
    const agent = createAgent({
      model: chatModel(server),
      tools: idempotentTools([carryOut(effects)], { store }),
      middleware: [idempotentToolsMiddleware({ store })],
    });
    const error = await refusal(agent.invoke(input, thread('chat-ann')));
    expect(error.option).toBe('tools');
    expect(error.message).toMatch(
      /idempotentToolsMiddleware: tool "carry_out" is already idempotent/,
    );
    expect(modelCalls()).toBe(0);
    expect(effects).toEqual([]);
    // Listed in exclude, the middleware leaves them as they are: they run once, idempotent.
    const excluded = createAgent({
      model: chatModel(server),
      tools: idempotentTools([carryOut(effects)], { store }),
      middleware: [idempotentToolsMiddleware({ store, exclude: ['carry_out'] })],
    });
    await excluded.invoke(input, thread('chat-ann'));
    expect(effects).toHaveLength(1);
  });

  test("limit: wrapped tools in a createAgent without any wrapToolCall middleware: LangChain's tool node hands the refusal to the model; nothing ran", async () => {
    const agent = createAgent({
      model: chatModel(server),
      tools: idempotentTools([carryOut(effects)], { store }),
    });
    const out = await agent.invoke(input);
    expect(effects).toEqual([]);
    expect(toolResults(out.messages)[0]?.status).toBe('error');
    expect(toolResults(out.messages)[0]?.content).toMatch(/ConfigurationError: .*thread_id/);
  });
});

describe('createAgent + ChatOpenAI: a resume from a checkpoint is a retry', () => {
  test('the tool step failed after the tool ran; agent.invoke(null) re-runs it: replayed', async () => {
    let lost = false;
    const lossy = createMiddleware({
      name: 'LossyReply',
      wrapToolCall: async (request, handler) => {
        const reply = await handler(request);
        if (!lost) {
          lost = true;
          throw new Error('ECONNRESET: the worker died before the step was saved');
        }
        return reply;
      },
    });
    const agent = createAgent({
      model: chatModel(server),
      tools: [carryOut(effects)],
      middleware: [lossy, idempotentToolsMiddleware({ store })],
      checkpointer: new MemorySaver(),
    });
    const config = thread('chat-ann');
    await expect(
      agent.invoke({ messages: [user('Cancel my subscription.')] }, config),
    ).rejects.toThrow('ECONNRESET');
    const out = await agent.invoke(null, config);
    expect(effects).toHaveLength(1);
    expect(idempotencyOf(out.messages.findLast((m) => m.getType() === 'tool'))).toMatchObject({
      replayed: true,
    });
  });
});

describe('a graph of your own that ends after its tool node (ChatOpenAI over HTTP, MemorySaver), tools wrapped by idempotentTools', () => {
  /** model -> tools -> end: each run makes one tool call and ends on its result. */
  function oneShot(tools: StructuredToolInterface[]) {
    const model = chatModel(server).bindTools(tools);
    return new StateGraph(MessagesAnnotation)
      .addNode('model', async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode('tools', new ToolNode(tools, { handleToolErrors: false }))
      .addEdge('__start__', 'model')
      .addEdge('model', 'tools')
      .addEdge('tools', '__end__')
      .compile({ checkpointer: new MemorySaver() });
  }

  test('the same words in a new run: the run before ended on a tool result, which cannot be told from a broken run: refused (ConfigurationError naming turnId), nothing ran again', async () => {
    const graph = oneShot(idempotentTools([carryOut(effects)], { store }));
    await graph.invoke({ messages: [user('Yes, send it.')] }, thread('chat-ann'));
    const error = await refusal(
      graph.invoke({ messages: [user('Yes, send it.')] }, thread('chat-ann')),
    );
    expect(error.option).toBe('turnId');
    expect(error.message).toMatch(/repeats the words of the turn before it.*Pass turnId/);
    expect(effects).toEqual(['Yes, send it.']);
    // Other words are a new turn; a turn_id per message tells the same words apart.
    await graph.invoke({ messages: [user('Cancel it.')] }, thread('chat-ann'));
    const turn = (id: string) => ({ configurable: { thread_id: 'chat-bob', turn_id: id } });
    await graph.invoke({ messages: [user('Yes, send it.')] }, turn('m1'));
    await graph.invoke({ messages: [user('Yes, send it.')] }, turn('m2'));
    expect(effects).toEqual(['Yes, send it.', 'Cancel it.', 'Yes, send it.', 'Yes, send it.']);
  });
});

describe('the manual bindTools loop outside a graph (ChatOpenAI over HTTP)', () => {
  /** The docs' loop: the model with the tools bound, each tool call invoked by hand. */
  async function loop(
    tools: StructuredToolInterface[],
    text: string,
    config: object,
  ): Promise<BaseMessage[]> {
    const model = chatModel(server).bindTools(tools);
    const messages: BaseMessage[] = [user(text)];
    for (let step = 0; step < 4; step++) {
      const ai = await model.invoke(messages);
      messages.push(ai);
      if ((ai.tool_calls ?? []).length === 0) break;
      for (const call of ai.tool_calls ?? []) {
        const chosen = tools.find((t) => t.name === call.name) as StructuredToolInterface;
        messages.push((await chosen.invoke(call, config)) as BaseMessage);
      }
    }
    return messages;
  }

  test('with configurable.turn_id: one effect per turn; the turn run again replays (was: refused, turn_id was not read)', async () => {
    const tools = idempotentTools([carryOut(effects)], { store });
    const turn = (id: string) => ({ configurable: { turn_id: id } });
    await loop(tools, 'Cancel my subscription.', turn('req-1'));
    const again = await loop(tools, 'Cancel my subscription.', turn('req-1'));
    await loop(tools, 'Cancel my subscription.', turn('req-2'));
    expect(effects).toHaveLength(2);
    expect(idempotencyOf(again.find((m) => m.getType() === 'tool'))).toMatchObject({
      replayed: true,
    });
  });

  test('without turn_id: tool.invoke throws a ConfigurationError naming turn_id; nothing ran', async () => {
    const tools = idempotentTools([carryOut(effects)], { store });
    const error = await refusal(loop(tools, 'Cancel my subscription.', {}));
    expect(error.message).toMatch(/configurable: \{ turn_id \}/);
    // A thread id alone is not enough: outside a graph there are no messages to tell turns apart.
    expect((await refusal(loop(tools, 'Cancel.', thread('chat-ann')))).option).toBe('turnId');
    expect(effects).toEqual([]);
  });

  test('tool.invoke(args) with the turnId option (the app wraps per request)', async () => {
    const wrapped = idempotentTool(carryOut(effects), { store, turnId: 'req-1' });
    expect(await wrapped.invoke({ request: 'Cancel.' })).toEqual({
      done: 'Cancel.',
      receipt: 'R-1',
    });
    expect(await wrapped.invoke({ request: 'Cancel.' })).toMatchObject({ replayed: true });
    expect(effects).toHaveLength(1);
  });
});
