/**
 * `@openai/agents`: wrap a `FunctionTool` or all of an agent's tools. The agent's model (a `Model`
 * instance) is observed: each function call is linked to the turn of its request and, when it may
 * wait for an approval, recorded as emitted (the kit's `createRequestTurns`), so that a run resumed
 * in another process finds its turn and an approval authorises only the call the model asked for.
 */
import type { Idempotency, ToolPolicy } from '@idempotent-tools/core';
import { ConfigurationError } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type * as Agents from '@openai/agents';
import { requestTurns, responsesTurn } from './turns.js';

type AnyRunContext = Agents.RunContext<unknown>;
type Details = Parameters<Agents.FunctionTool['invoke']>[2];
// biome-ignore lint/suspicious/noExplicitAny: any context, parameters and result
type AnyFunctionTool = Agents.FunctionTool<any, any, any>;
type Policy = ToolPolicy<never, unknown> & kit.RepeatablePolicy;

/** The text `tool()` of @openai/agents returns when a tool throws (its default `errorFunction`). */
export const AGENTS_DEFAULT_ERROR_OUTPUT =
  'An error occurred while running the tool. Please try again.';

export interface AgentToolOptions {
  /**
   * Your id of the user turn: a string, or a function of the run context and call details.
   * @default `runContext.context.turnId` when it is a string, else the turn of the model request
   */
  turnId?: string | ((runContext: AnyRunContext, details: Details) => string | undefined);
  /**
   * Your chat / thread id, with which the turn is derived from the run's input (its user
   * messages). @default `runContext.context.conversationId` when it is a string
   */
  conversationId?: string | ((runContext: AnyRunContext) => string | undefined);
  /** Tenant / user: a string or a function of the run context. @default undefined */
  scope?: string | ((runContext: AnyRunContext, toolName: string) => string | undefined);
  /** Also mark fresh outputs (`replayed: false`). @default false */
  markFresh?: boolean;
  /**
   * Tells a failure returned as output (the tool's `errorFunction` text) from a result, so it is
   * not stored and a retry runs again. @default output === AGENTS_DEFAULT_ERROR_OUTPUT
   */
  isErrorOutput?: (output: unknown) => boolean;
}

type AgentCall = {
  runContext: AnyRunContext;
  details: Details;
  toolName: string;
  anchor: kit.TurnAnchor;
};
/** What the tools of one wrapper share; `observed`: the agent's model is seen. */
type Wrapper = ReturnType<typeof wrapperOf>;

const fromContext = (call: AgentCall, field: 'turnId' | 'conversationId') => {
  const value = (call.runContext?.context as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'string' && value !== '' ? value : undefined;
};

function wrapperOf(
  caller: string,
  idempotency: Idempotency,
  toolNames: string[],
  observed: boolean,
  options: AgentToolOptions & Record<string, unknown>,
) {
  const { turnId, conversationId, scope, isErrorOutput, ...rest } = options;
  const anchor = kit.anchorSources<AgentCall>((c) => c.anchor);
  const adapter = kit.createAdapter<AgentCall>(
    {
      ...rest,
      idempotency,
      turnId: typeof turnId === 'function' ? (c) => turnId(c.runContext, c.details) : turnId,
      conversationId:
        typeof conversationId === 'function' ? (c) => conversationId(c.runContext) : conversationId,
      scope: typeof scope === 'function' ? (c) => scope(c.runContext, c.toolName) : scope,
    },
    {
      caller,
      toolNames,
      repeatable: true,
      howTo:
        'conversationId (your chat id: run(agent, input, { context: { conversationId } }) or the conversationId option) or turnId (run(agent, input, { context: { turnId } }))',
      ...anchor,
      turn: (c) => fromContext(c, 'turnId') ?? anchor.turn(c),
      conversation: (c) => fromContext(c, 'conversationId'),
    },
  );
  const turns = requestTurns(adapter.executor);
  const isError = isErrorOutput ?? ((output: unknown) => output === AGENTS_DEFAULT_ERROR_OUTPUT);
  return { caller, adapter, turns, observed, isError };
}

/** Whether a call of the tool may wait for an approval (`needsApproval`: `true` or a function). */
async function mayWait(tool: AnyFunctionTool | undefined): Promise<boolean> {
  // The SDK's needsApproval for `true` / `false` takes no arguments; a policy may say yes.
  const policy = tool?.needsApproval as unknown as (() => Promise<boolean>) | undefined;
  return policy !== undefined && (policy.length > 0 || (await policy()) === true);
}

/** A structured tool output (`{ type: 'text' | 'image' | 'file' }`): the SDK sends it as parts. */
const isPart = (v: unknown) =>
  ['text', 'image', 'file'].includes((v as { type?: unknown } | null)?.type as string);

const UNKNOWN_TURN: kit.TurnAnchor = {
  refuse:
    "the turn of this call is unknown: the agent's model is given by name (or not at all), so its requests are not seen and the run's input may be only the newest message of a history kept by the server (previousResponseId, conversationId, a session); or the tool is not part of an agent wrapped with wrapAgentTools. Nothing ran. Give the agent a Model instance (new OpenAIResponsesModel(client, 'gpt-4.1')), or pass turnId (run(agent, input, { context: { turnId } })).",
};

function wrapOne<T extends AnyFunctionTool>(tool: T, w: Wrapper): T {
  const { adapter } = w;
  const { name: toolName, invoke: original } = tool;
  const shown = kit.presentTool(adapter, toolName, w.caller);
  // Parts keep their shape (the mark in the last text part); a lone part is sent as parts.
  const mark = (value: unknown, replayed: boolean) =>
    kit.markOutput(
      isPart(value) && (replayed || adapter.markFresh) ? [value] : value,
      replayed,
      adapter.markFresh,
    );
  const invoke: Agents.FunctionTool['invoke'] = async (runContext, given, details) => {
    const callId = details?.toolCall?.callId;
    /** An approved call must be one the model emitted (a saved state can be edited). */
    const approvedBy = async () => {
      if (runContext?.isToolApproved?.({ toolName, callId: callId as string }) !== true) return;
      if (!(await mayWait(tool))) return;
      if (w.observed) return `agents-sdk:${callId}`;
      throw new ConfigurationError({
        option: 'model',
        message: `${w.caller}: ${toolName} (${callId}) was approved, but this wrapper does not see the agent's model, so it cannot know that the model asked for this call with these arguments (a saved RunState can be edited). Nothing ran. Wrap the agent with wrapAgentTools and give it a Model instance (new OpenAIResponsesModel(client, 'gpt-4.1')).`,
      });
    };
    const info = (anchor: kit.TurnAnchor) => ({ runContext, details, toolName, anchor });
    const call = { toolName, callId, input: given, durable: w.observed, unlinked: UNKNOWN_TURN };
    const execute = async ({ args }: kit.PreparedCall<AgentCall>) => {
      // The tool's own invoke parses the input without the repeat argument.
      const input = shown.repeats === undefined ? given : JSON.stringify(args);
      const toolCall = details?.toolCall && { ...details.toolCall, arguments: input };
      const output = await original(
        runContext,
        input,
        toolCall ? { ...details, toolCall } : details,
      );
      if (w.isError(output)) throw new kit.NotAnOutcome(output);
      return output;
    };
    const linked = { ...call, info, approvedBy };
    return kit.returnOrThrow(await w.turns.runLinked(adapter, linked, execute, mark));
  };
  // The model sees the repeat argument (required and nullable in strict mode, as the SDK's
  // strict schemas want); a conditional approval policy reads the tool's own input.
  const { needsApproval } = tool as { needsApproval: (...a: unknown[]) => unknown };
  return kit.markWrapped(
    kit.copyTool(tool, {
      invoke: kit.markWrapped(invoke),
      description: shown.describe(tool.description),
      parameters: shown.jsonSchema(tool.parameters, tool.strict),
      ...(needsApproval?.length > 0 && { needsApproval: shown.stripped(needsApproval, 1) }),
    }),
  );
}

/**
 * A copy of `tool` whose `invoke` runs each call idempotently and whose description carries the
 * retry note. Alone it sees no model request: its turn comes from `turnId` (the option or
 * `runContext.context.turnId`). In an agent, prefer `wrapAgentTools`.
 */
export function wrapFunctionTool<T extends AnyFunctionTool>(
  idempotency: Idempotency,
  tool: T,
  options: AgentToolOptions & Pick<kit.OneToolOptions<Policy>, 'policy'> = {},
): T {
  if (tool?.type !== 'function' || typeof tool.invoke !== 'function' || !tool.name) {
    throw new ConfigurationError({
      option: 'tool',
      message:
        'wrapFunctionTool takes a function tool with a name and an invoke function, e.g. tool({ name, parameters, execute }).',
    });
  }
  const caller = 'wrapFunctionTool';
  kit.refuseWrapped(tool.name, tool, caller);
  const { policy, ...rest } = options;
  const policies = policy && { [tool.name]: policy };
  return wrapOne(tool, wrapperOf(caller, idempotency, [tool.name], false, { ...rest, policies }));
}

/**
 * The model, observed (the kit's `RequestTurns.observe`): each function call of a response is
 * linked to the request's turn, and one that may wait for an approval recorded as emitted.
 */
function observed(
  model: Agents.Model,
  w: Wrapper,
  tools: Map<string, AnyFunctionTool>,
): Agents.Model {
  type Emitted = { type: string; callId: string; name: string; arguments: string };
  const callsOf = (output: readonly unknown[]) =>
    Promise.all(
      (output as Emitted[])
        .filter((i) => i.type === 'function_call' && tools.has(i.name))
        .map(async ({ callId: id, name: toolName, arguments: args }) => {
          return { id, toolName, args, asks: await mayWait(tools.get(toolName)) };
        }),
    );
  const turnOf = ({ input, previousResponseId, conversationId }: Agents.ModelRequest) =>
    responsesTurn(input, { previous: previousResponseId, conversation: conversationId });
  return w.turns.observe(model, {
    getResponse: { turnOf, callsOf: (response: Agents.ModelResponse) => callsOf(response.output) },
    getStreamedResponse: {
      stream: true,
      turnOf,
      callsOf: (event: Agents.StreamEvent) =>
        event.type === 'response_done' ? callsOf(event.response.output) : undefined,
    },
  });
}

/**
 * A clone of `agent` whose function tools are wrapped (`exclude`d ones left as they are,
 * `unsafe` ones only get the unsafe note) and whose model is observed to tell the turn of each
 * call (see the README's table). Hosted and MCP tools are not wrapped. A model given by name is
 * not seen: its calls need turnId.
 */
// biome-ignore lint/suspicious/noExplicitAny: any context and output type
export function wrapAgentTools<A extends Agents.Agent<any, any>>(
  idempotency: Idempotency,
  agent: A,
  options: AgentToolOptions & kit.ToolSetOptions<string, Record<string, Policy>> = {},
): A {
  if (agent == null || !Array.isArray(agent.tools) || typeof agent.clone !== 'function') {
    throw new ConfigurationError({
      option: 'agent',
      message: 'wrapAgentTools takes an Agent of @openai/agents: new Agent({ name, tools }).',
    });
  }
  const caller = 'wrapAgentTools';
  const all: Agents.Tool<unknown>[] = agent.tools;
  const functions = all.filter((t): t is AnyFunctionTool => t.type === 'function');
  const model = agent.model as Agents.Model | string | undefined;
  const observable = typeof (model as Agents.Model | undefined)?.getResponse === 'function';
  const names = functions.map((t) => t.name);
  const w = wrapperOf(caller, idempotency, names, observable, { ...options });
  const toWrap = functions.filter((t) => w.adapter.treatment(t.name) === 'wrap');
  for (const tool of toWrap) kit.refuseWrapped(tool.name, tool, caller);
  const tools = all.map((tool) => {
    if (tool.type !== 'function') return tool;
    const shown = kit.presentTool(w.adapter, tool.name, caller);
    if (shown.treatment === 'wrap') return wrapOne(tool, w);
    const description = shown.describe(tool.description); // unsafe: the note; excluded: as it is
    return shown.treatment === 'unsafe' ? kit.copyTool(tool, { description }) : tool;
  });
  const wrapped = new Map(toWrap.map((t) => [t.name, t]));
  return agent.clone({
    tools: tools as never,
    ...(observable ? { model: observed(model as Agents.Model, w, wrapped) } : {}),
  }) as A;
}
