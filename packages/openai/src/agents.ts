/**
 * `@openai/agents`: wrap a `FunctionTool` (its `invoke`) or all of an agent's tools. The agent's
 * model (a `Model` instance) is observed so that each function call is linked to the turn of
 * the request that produced it and to the call as the model emitted it (its tool and
 * arguments), in this process and, for calls that may wait for an approval, in the store (a run
 * resumed from `RunState.fromString` in another process finds it, and an approval authorises
 * only the call the model asked for).
 */
import {
  ApprovalConflictError,
  ApprovalRejectedError,
  type Approvals,
  ConfigurationError,
  createApprovals,
  DriftError,
  type Idempotency,
  InvalidInputError,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  audienceOf,
  createAdapter,
  createTurnLinks,
  errorText,
  keyArgs,
  markWrapped,
  NotAnOutcome,
  type RepeatablePolicy,
  refuseWrapped,
  runCall,
  type TurnLinks,
  takeRepeat,
  withRepeatNote,
  withRepeatProperty,
} from '@idempotent-tools/core/adapter-kit';
import type { Agent, FunctionTool, Model, ModelRequest, RunContext, Tool } from '@openai/agents';
import { markParts } from './parts.js';
import { type Anchor, anchorOf, inputItems, refusalOf } from './turns.js';

type AnyRunContext = RunContext<unknown>;
type Details = Parameters<FunctionTool['invoke']>[2];
// biome-ignore lint/suspicious/noExplicitAny: any context, parameters and result
type AnyFunctionTool = FunctionTool<any, any, any>;

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

type AgentCall = { runContext: AnyRunContext; details: Details; toolName: string; anchor: Anchor };
/** A function call as the model emitted it. */
type Emitted = { name: string; arguments: string };
/** What a call id is linked to: the turn of its request, and the call as the model emitted it. */
type Linked = Anchor & { call?: Emitted };
/** `observed`: the agent's model is seen (wrapAgentTools with a Model instance); its links durable. */
type Anchors = { links: TurnLinks<Linked>; observed: boolean };

/**
 * A call the run approved (`state.approve`, resumed from a `RunState` in any process) recorded on
 * the store, bound to its args and pinned to its call id: the same approval delivered again is
 * one approval, a saved state whose call was edited to other arguments is refused (DriftError),
 * a call rejected on the store first stays rejected. Returns the model's text when it must not
 * run, undefined when it may.
 */
async function approvedCall(
  approvals: Approvals,
  call: { toolName: string; turnId: string | undefined; scope: string | undefined; args: unknown },
  policy: ToolPolicy | undefined,
  callId: string,
): Promise<string | undefined> {
  try {
    const requested = await approvals.requestApproval(call, { policy, ref: callId });
    let approval = requested;
    if (requested.status === 'pending') {
      approval = await approvals
        .approve(requested.key, { by: `agents-sdk:${callId}` })
        .catch(async (error) => {
          if (!ApprovalConflictError.isInstance(error)) throw error;
          return (await approvals.getApproval(requested.key)) ?? requested;
        });
    }
    if (approval.status === 'rejected') throw new ApprovalRejectedError({ approval });
    return undefined;
  } catch (error) {
    if (audienceOf(error) !== 'model') throw error;
    return errorText(error);
  }
}

/**
 * An approved call is bound to the call the model asked for, as the observed model emitted it
 * (linked to its call id when the response came in, before the run stopped to ask): a saved
 * `RunState` whose pending call was edited (other arguments), or whose approval was moved to a
 * call the model never emitted (a made-up call id), runs nothing. Returns the model's text when
 * the call must not run, undefined when it is the call the model asked for.
 * @throws ConfigurationError when the model is not observed: what it asked for is unknown
 */
function notAsked(
  adapter: ReturnType<typeof adapterFor>,
  anchors: Anchors,
  caller: string,
  toolName: string,
  callId: string,
  given: string,
  emitted: Emitted | undefined,
  id: { turnId: string | undefined; scope: string | undefined },
): string | undefined {
  if (!anchors.observed) {
    throw new ConfigurationError({
      option: 'model',
      message: `${caller}: ${toolName} (${callId}) was approved, but this wrapper does not see the agent's model, so it cannot know that the model asked for this call with these arguments (a saved RunState can be edited). Nothing ran. Wrap the agent with wrapAgentTools and give it a Model instance (new OpenAIResponsesModel(client, 'gpt-4.1')).`,
    });
  }
  if (emitted === undefined || emitted.name !== toolName) {
    return errorText(
      new InvalidInputError({
        field: 'arguments',
        message: `The approval of ${toolName} (${callId}) is for a call the model never asked for (no such call was emitted by this agent's model, or its record expired). Nothing ran. Call the tool again to ask for an approval.`,
      }),
    );
  }
  const fingerprint = (json: string) => {
    let args: unknown;
    try {
      args = JSON.parse(json === '' ? '{}' : json);
    } catch {
      args = { unparsed: json };
    }
    return adapter.executor.keyOf({ toolName, turnId: id.turnId, scope: id.scope, args });
  };
  const asked = fingerprint(emitted.arguments);
  const approved = fingerprint(given);
  if (asked.fingerprint === approved.fingerprint) return undefined;
  return errorText(
    new DriftError({
      key: approved.key,
      toolName,
      storedFingerprint: asked.fingerprint,
      fingerprint: approved.fingerprint,
      message: `The approval of ${toolName} (${callId}) was asked for other arguments: it does not authorise these. Nothing ran. Call the tool again to ask for an approval of these arguments.`,
    }),
  );
}

const fromContext = (call: AgentCall, field: 'turnId' | 'conversationId') => {
  const value = (call.runContext?.context as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'string' && value !== '' ? value : undefined;
};

function adapterFor(
  caller: string,
  idempotency: Idempotency,
  toolNames: string[],
  { turnId, conversationId, scope, ...rest }: AgentToolOptions & Record<string, unknown>,
) {
  return createAdapter<AgentCall>(
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
      options: ['isErrorOutput'],
      repeatable: true,
      howTo:
        'conversationId (your chat id: run(agent, input, { context: { conversationId } }) or the conversationId option) or turnId (run(agent, input, { context: { turnId } }))',
      turn: (c) => fromContext(c, 'turnId') ?? ('turn' in c.anchor ? c.anchor.turn : undefined),
      refusal: (c) => refusalOf(c.anchor),
      conversation: (c) => fromContext(c, 'conversationId'),
      transcript: (c) =>
        'said' in c.anchor ? [{ role: 'user', content: c.anchor.said }] : undefined,
    },
  );
}

/** A structured tool output (`{ type: 'text' | 'image' | 'file' }`): the SDK sends it as parts. */
const isPart = (v: unknown) =>
  ['text', 'image', 'file'].includes((v as { type?: unknown } | null)?.type as string);

const UNKNOWN_TURN: Anchor = {
  refuse:
    "the turn of this call is unknown: the agent's model is given by name (or not at all), so its requests are not seen and the run's input may be only the newest message of a history kept by the server (previousResponseId, conversationId, a session); or the tool is not part of an agent wrapped with wrapAgentTools. Nothing ran. Give the agent a Model instance (new OpenAIResponsesModel(client, 'gpt-4.1')), or pass turnId (run(agent, input, { context: { turnId } })).",
};

function wrapOne<T extends AnyFunctionTool>(
  tool: T,
  adapter: ReturnType<typeof adapterFor>,
  approvals: Approvals,
  anchors: Anchors,
  caller: string,
  isErrorOutput: (output: unknown) => boolean = (output) => output === AGENTS_DEFAULT_ERROR_OUTPUT,
): T {
  const original = tool.invoke;
  const repeats = adapter.repeats(tool.name);
  const invoke: FunctionTool['invoke'] = async (runContext, given, givenDetails) => {
    let input = given;
    let details = givenDetails;
    let args: unknown;
    try {
      args = JSON.parse(input === '' ? '{}' : input);
    } catch {
      return original(runContext as never, input, details); // nothing runs: the SDK's input error
    }
    /** The key's args: with the repeat of a repeatable tool, which the tool itself never sees. */
    let key = args;
    if (repeats !== undefined) {
      const taken = takeRepeat(args, tool.name, repeats);
      if ('error' in taken) return taken.error; // the model's error: nothing ran
      if (taken.args !== args) {
        args = taken.args;
        input = JSON.stringify(args);
        const toolCall = details?.toolCall;
        details = {
          ...details,
          ...(toolCall ? { toolCall: { ...toolCall, arguments: input } } : {}),
        };
      }
      key = keyArgs(args, taken.repeat, repeats);
    }
    const callId = details?.toolCall?.callId;
    const linked = callId ? await anchors.links.find([callId], anchors.observed) : undefined;
    const anchor: Anchor = linked ?? UNKNOWN_TURN;
    const call = { runContext, details, toolName: tool.name, anchor };
    const id = adapter.identify(call, tool.name);
    const approved =
      callId !== undefined &&
      runContext?.isToolApproved?.({ toolName: tool.name, callId }) === true &&
      tool.needsApproval !== undefined;
    if (approved) {
      const policy = adapter.policy(tool.name) as ToolPolicy | undefined;
      const unasked = notAsked(
        adapter,
        anchors,
        caller,
        tool.name,
        callId,
        given,
        linked?.call,
        id,
      );
      if (unasked !== undefined) return unasked;
      const refused = await approvedCall(
        approvals,
        { toolName: tool.name, turnId: id.turnId, scope: id.scope, args: key },
        policy,
        callId,
      );
      if (refused !== undefined) return refused;
    }
    const ran = await runCall(
      adapter,
      { toolName: tool.name, turnId: id.turnId, scope: id.scope, args: key },
      async () => {
        const output = await original(runContext as never, input, details);
        if (isErrorOutput(output)) throw new NotAnOutcome(output);
        return output;
      },
      (value, replayed) => markParts(value, replayed, adapter.markFresh, isPart),
    );
    if ('error' in ran) throw ran.error;
    return ran.output;
  };
  markWrapped(invoke);
  const copy = markWrapped(
    Object.create(Object.getPrototypeOf(tool), Object.getOwnPropertyDescriptors(tool)),
  );
  if (repeats === undefined) {
    return Object.assign(copy, { invoke, description: withRetryNote(tool.description) }) as T;
  }
  // The model sees the repeat argument (required and nullable in strict mode, as the SDK's
  // strict schemas want); a conditional approval policy reads the tool's own input.
  const own = tool.needsApproval as unknown as (...a: unknown[]) => Promise<boolean>;
  const dynamic = typeof own === 'function' && own.length > 0;
  return Object.assign(copy, {
    invoke,
    description: withRepeatNote(tool.description, repeats),
    parameters: withRepeatProperty(tool.parameters, tool.name, repeats, caller, tool.strict),
    ...(dynamic
      ? {
          needsApproval: (runContext: unknown, input: unknown, callId?: string) => {
            const taken = takeRepeat(input, tool.name, repeats);
            return own(runContext, 'error' in taken ? input : taken.args, callId);
          },
        }
      : {}),
  }) as T;
}

/**
 * A copy of `tool` whose `invoke` runs each call idempotently and whose description carries the
 * retry note. Alone it sees no model request: its turn comes from `turnId` (the option or
 * `runContext.context.turnId`). In an agent, prefer `wrapAgentTools`.
 */
export function wrapFunctionTool<T extends AnyFunctionTool>(
  idempotency: Idempotency,
  tool: T,
  options: AgentToolOptions & {
    /** ttl, lease, businessKey, reconcile, onStale, ..., repeatable @default {} */
    policy?: ToolPolicy<never, unknown> & RepeatablePolicy;
  } = {},
): T {
  if (tool?.type !== 'function' || typeof tool.invoke !== 'function' || !tool.name) {
    throw new ConfigurationError({
      option: 'tool',
      message:
        'wrapFunctionTool takes a function tool with a name and an invoke function, e.g. tool({ name, parameters, execute }).',
    });
  }
  refuseWrapped(tool.name, tool, 'wrapFunctionTool');
  const { policy, isErrorOutput, ...rest } = options;
  const policies = policy === undefined ? undefined : { [tool.name]: policy };
  const adapter = adapterFor('wrapFunctionTool', idempotency, [tool.name], { ...rest, policies });
  const links = createTurnLinks<Linked>(adapter.executor);
  const anchors = { links, observed: false };
  const approvals = createApprovals(adapter.executor);
  return wrapOne(tool, adapter, approvals, anchors, 'wrapFunctionTool', isErrorOutput);
}

/** The model, observed: each function call of a response is linked to the request's turn. */
function observed(
  model: Model,
  links: TurnLinks<Linked>,
  tools: Map<string, AnyFunctionTool>,
): Model {
  const mayWait = async (name: string) => {
    const needsApproval = tools.get(name)?.needsApproval;
    // The SDK's needsApproval for `true` / `false` takes no arguments; a policy may say yes.
    const policy = needsApproval as unknown as (() => Promise<boolean>) | undefined;
    return policy !== undefined && (policy.length > 0 || (await policy()) === true);
  };
  const anchor = (request: ModelRequest) =>
    anchorOf(
      inputItems(request.input),
      { previous: request.previousResponseId, conversation: request.conversationId },
      links,
    );
  /** Each function call linked to the turn and to the call as emitted (its tool and arguments). */
  const link = async (turn: Linked, output: readonly unknown[]) => {
    const calls = (output as Array<Emitted & { type: string; callId: string }>).filter(
      (item) => item.type === 'function_call' && tools.has(item.name),
    );
    const durable = (await Promise.all(calls.map((c) => mayWait(c.name)))).includes(true);
    const { call: _, ...anchor } = turn;
    await Promise.all(
      calls.map((c) =>
        links.remember(
          [c.callId],
          { ...anchor, call: { name: c.name, arguments: c.arguments } } as Linked,
          durable,
        ),
      ),
    );
  };
  return new Proxy(model, {
    get(target, property) {
      if (property === 'getResponse') {
        return async (request: ModelRequest) => {
          const turn = await anchor(request);
          const response = await target.getResponse(request);
          await link(turn, response.output);
          return response;
        };
      }
      if (property === 'getStreamedResponse') {
        return async function* (request: ModelRequest) {
          const turn = await anchor(request);
          for await (const event of target.getStreamedResponse(request)) {
            if (event.type === 'response_done') await link(turn, event.response.output);
            yield event;
          }
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * A clone of `agent` whose function tools are wrapped (`exclude`d ones left as they are,
 * `unsafe` ones only get the unsafe note) and whose model is observed to tell the turn of each
 * call (see the README's table). Hosted and MCP tools are not wrapped.
 */
// biome-ignore lint/suspicious/noExplicitAny: any context and output type
export function wrapAgentTools<A extends Agent<any, any>>(
  idempotency: Idempotency,
  agent: A,
  options: AgentToolOptions & {
    /** Per-tool policy, by tool name (`repeatable`: deliberate repeats, see the README). @default {} */
    policies?: Record<string, ToolPolicy<never, unknown> & RepeatablePolicy>;
    /** Read-only tools, left as they are. @default [] */
    exclude?: readonly string[];
    /** Tools not safe to retry: not wrapped, their description gets the unsafe note. @default [] */
    unsafe?: readonly string[];
  } = {},
): A {
  if (agent == null || !Array.isArray(agent.tools) || typeof agent.clone !== 'function') {
    throw new ConfigurationError({
      option: 'agent',
      message: 'wrapAgentTools takes an Agent of @openai/agents: new Agent({ name, tools }).',
    });
  }
  const caller = 'wrapAgentTools';
  const all: Tool<unknown>[] = agent.tools;
  const functions = all.filter((t): t is AnyFunctionTool => t.type === 'function');
  const { isErrorOutput, ...rest } = options;
  const adapter = adapterFor(
    caller,
    idempotency,
    functions.map((t) => t.name),
    rest,
  );
  for (const tool of functions) {
    if (adapter.treatment(tool.name) === 'wrap') refuseWrapped(tool.name, tool, caller);
  }
  const links = createTurnLinks<Linked>(adapter.executor);
  const model = agent.model as Model | string | undefined;
  const observable = typeof (model as Model | undefined)?.getResponse === 'function';
  const anchors: Anchors = { links, observed: observable };
  const wrapped = new Map<string, AnyFunctionTool>();
  const approvals = createApprovals(adapter.executor);
  const tools = all.map((tool) => {
    if (tool.type !== 'function' || adapter.treatment(tool.name) === 'exclude') return tool;
    if (adapter.treatment(tool.name) === 'unsafe') {
      const copy = Object.create(
        Object.getPrototypeOf(tool),
        Object.getOwnPropertyDescriptors(tool),
      );
      return Object.assign(copy, { description: withRetryNote(tool.description, false) }) as Tool;
    }
    wrapped.set(tool.name, tool);
    return wrapOne(tool, adapter, approvals, anchors, caller, isErrorOutput);
  });
  const clone = agent.clone({
    tools: tools as never,
    ...(observable ? { model: observed(model as Model, links, wrapped) } : {}),
  }) as A;
  // A model given by name is not seen: its calls need turnId (the run's input alone cannot tell a
  // new turn from a retry when the server keeps the history).
  return clone;
}
