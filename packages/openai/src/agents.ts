/**
 * `@openai/agents`: wrap a `FunctionTool` (its `invoke`) or all of an agent's tools.
 */
import {
  type Idempotency,
  InvalidInputError,
  type ToolPolicy,
  turnIdFromMessages,
  withRetryNote,
} from '@idempotent-tools/core';
import type { Agent, FunctionTool, RunContext, Tool } from '@openai/agents';
import { type CommonOptions, checkNames, FailedOutput, runCall } from './shared.js';

type AnyRunContext = RunContext<unknown>;
type Details = Parameters<FunctionTool['invoke']>[2];

/** The text `tool()` of @openai/agents returns when a tool throws (its default `errorFunction`). */
export const AGENTS_DEFAULT_ERROR_OUTPUT =
  'An error occurred while running the tool. Please try again.';

export interface AgentToolOptions {
  /**
   * The turn id: a string, or a function of the run context and call details (e.g. your message
   * id from `runContext.context`). @default `runContext.context.turnId` when it is a string, else
   * the id derived from the run's input up to its last user message (by `wrapAgentTools`)
   */
  turnId?: string | ((runContext: AnyRunContext, details: Details) => string | undefined);
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

/** Turn ids derived at `agent_start` of the run that owns a RunContext. */
const derivedTurns = new WeakMap<object, string>();

function resolveTurnId(
  options: AgentToolOptions,
  runContext: AnyRunContext,
  details: Details,
): string | undefined {
  if (typeof options.turnId === 'function') return options.turnId(runContext, details);
  if (options.turnId !== undefined) return options.turnId;
  const own = (runContext?.context as { turnId?: unknown } | undefined)?.turnId;
  return typeof own === 'string' ? own : derivedTurns.get(runContext);
}

/**
 * A copy of `tool` whose `invoke` runs each call idempotently and whose description carries the
 * retry note. Replays come back marked (`{ ...output, replayed: true }`).
 */
// biome-ignore lint/suspicious/noExplicitAny: any context, parameters and result
export function wrapFunctionTool<T extends FunctionTool<any, any, any>>(
  idempotency: Idempotency,
  tool: T,
  options: AgentToolOptions & {
    /** ttl, lease, businessKey, reconcile, onStale, ... @default {} */
    policy?: ToolPolicy<never, unknown>;
  } = {},
): T {
  const original = tool?.invoke;
  if (tool?.type !== 'function' || typeof original !== 'function' || !tool.name) {
    throw new InvalidInputError({
      field: 'tool',
      message:
        'wrapFunctionTool takes a function tool with a name and an invoke function, e.g. tool({ name, parameters, execute }).',
    });
  }
  const isErrorOutput =
    options.isErrorOutput ?? ((output: unknown) => output === AGENTS_DEFAULT_ERROR_OUTPUT);
  const invoke: FunctionTool['invoke'] = async (runContext, input, details) => {
    let args: unknown;
    try {
      args = JSON.parse(input === '' ? '{}' : input);
    } catch {
      return original(runContext as never, input, details); // nothing runs: the SDK's input error
    }
    const turnId = resolveTurnId(options, runContext, details);
    if (turnId === undefined) {
      throw new InvalidInputError({
        field: 'turnId',
        message: `No turn id for tool ${tool.name}: wrap the agent with wrapAgentTools, pass run(agent, input, { context: { turnId } }), or set the turnId option.`,
      });
    }
    const scope =
      typeof options.scope === 'function' ? options.scope(runContext, tool.name) : options.scope;
    const result = await runCall(
      idempotency,
      { toolName: tool.name, turnId, scope, args },
      async () => {
        const output = await original(runContext as never, input, details);
        if (isErrorOutput(output)) throw new FailedOutput(output);
        return output;
      },
      options.policy,
      options.markFresh ?? false,
    );
    if (!result.ok) throw result.error;
    return result.value;
  };
  const copy = Object.create(
    Object.getPrototypeOf(tool),
    Object.getOwnPropertyDescriptors(tool),
  ) as T;
  return Object.assign(copy, { invoke, description: withRetryNote(tool.description) });
}

/**
 * A clone of `agent` whose function tools are wrapped (`exclude`d ones left as they are,
 * `unsafe` ones only get the unsafe note). It derives the turn id of each run from the run's
 * input up to its last user message, unless one is given. Hosted and MCP tools are not wrapped.
 */
// biome-ignore lint/suspicious/noExplicitAny: any context and output type
export function wrapAgentTools<A extends Agent<any, any>>(
  idempotency: Idempotency,
  agent: A,
  options: AgentToolOptions & Omit<CommonOptions<never>, 'scope' | 'markFresh'> = {},
): A {
  if (agent == null || !Array.isArray(agent.tools) || typeof agent.clone !== 'function') {
    throw new InvalidInputError({
      field: 'agent',
      message: 'wrapAgentTools takes an Agent of @openai/agents: new Agent({ name, tools }).',
    });
  }
  const tools: Tool<unknown>[] = agent.tools;
  const names = tools.flatMap((t) => (t.type === 'function' ? [t.name] : []));
  const exclude = checkNames('exclude', options.exclude, names);
  const unsafe = checkNames('unsafe', options.unsafe, names);
  const wrapped = tools.map((tool) => {
    if (tool.type !== 'function' || exclude.includes(tool.name)) return tool;
    if (unsafe.includes(tool.name)) {
      return Object.assign(
        Object.create(Object.getPrototypeOf(tool), Object.getOwnPropertyDescriptors(tool)),
        { description: withRetryNote(tool.description, false) },
      ) as Tool;
    }
    const policy = options.policies?.[tool.name];
    return wrapFunctionTool(
      idempotency,
      tool,
      policy === undefined ? options : { ...options, policy },
    );
  });
  const clone = agent.clone({ tools: wrapped as never }) as A;
  clone.on('agent_start', (runContext, _agent, turnInput) => {
    const turnId = turnIdFromMessages(
      turnInput ?? [],
      (item) => (item as { role?: string }).role === 'user',
    );
    if (turnId !== undefined) derivedTurns.set(runContext, turnId);
  });
  return clone;
}
