import {
  type Approvals,
  createApprovals,
  type ExecutionContext,
  type ToolPolicy,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import { toStandardSchema } from '@mastra/core/schema';
import { type Tool, type ToolExecutionContext, validateToolInput } from '@mastra/core/tools';
import { savesEarly, transcriptOf } from './transcript.js';

/** A Mastra tool, as `createTool` makes it (or any `ToolAction`). */
// biome-ignore lint/suspicious/noExplicitAny: a tool of any input, output and context types
export type AnyTool = Tool<any, any, any, any, any, any, any>;
/** Mastra's context of a call, with the `memory` it hands the tool (its type leaves it out). */
type Context = Partial<ToolExecutionContext> &
  Record<string, unknown> & {
    memory?: { recall(args: object): Promise<{ messages: unknown[] }> };
  };

/** One tool call as Mastra runs it: what `turnId`, `conversationId` and `scope` functions get. */
export interface ToolCallInfo {
  toolName: string;
  /** The tool input, validated by the tool's `inputSchema` (without the repeat argument). */
  input: unknown;
  /**
   * The execution context Mastra handed the tool: `requestContext`, `agent` (`threadId`,
   * `resourceId`, `messages`, `toolCallId`), `runId`, `workflow`.
   */
  context: Context;
  /** The memory thread's stored messages (empty without memory), read before the call. */
  history: readonly unknown[];
}

/** A per-call value: fixed (wrap per request), or computed from the call (undefined: not known). */
export type PerCall = kit.PerCall<ToolCallInfo>;

/** The policy type of a tool: its input and output types. */
export type PolicyOf<T> = kit.ExecutePolicyOf<T>;

/**
 * Options of `idempotentTools(tools, options)`. A policy may say `repeatable` (deliberate
 * repeats: the tool's `inputSchema` gets the `repeat` argument, see the README).
 */
export type IdempotentToolsOptions<TOOLS extends Record<string, AnyTool>> =
  kit.ExecuteToolSetOptions<ToolCallInfo, TOOLS>;

/** Options of `idempotentTool(tool, options)`. */
export type IdempotentToolOptions<TOOL extends AnyTool> = kit.ExecuteToolOptions<
  ToolCallInfo,
  TOOL
>;

const CONTEXT = Symbol.for('idempotent-tools.mastra.context');
/** Developer errors of calls (nothing ran): the wrapped `toModelOutput` throws them. */
const escapes = kit.createEscapes();

/**
 * The idempotency context of a wrapped call, from the context your `execute` received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(context: object): ExecutionContext | undefined {
  return (context as { [CONTEXT]?: ExecutionContext })[CONTEXT];
}

/** The stored messages of the call's memory thread (the agent's input holds only the new ones). */
async function historyOf(context: Context): Promise<unknown[]> {
  const threadId = context.agent?.threadId;
  if (context.memory === undefined || threadId === undefined) return [];
  const { resourceId } = context.agent ?? {};
  return (await context.memory.recall({ threadId, resourceId, perPage: false })).messages;
}

const GLOBAL = '__mastra_requireToolApproval';

/**
 * Whether Mastra's approval gate stood before this call (Mastra evaluates it the same way): the
 * tool's `requireApproval` (a function is asked again, with the same input and context), else
 * the run's `requireToolApproval`. Only for a call of an agent run (it has a tool-call id).
 */
async function passedApproval(
  requireApproval: unknown,
  toolName: string,
  args: unknown,
  context: Context | undefined,
): Promise<boolean> {
  const { agent, requestContext } = context ?? {};
  if (typeof agent?.toolCallId !== 'string' || agent.toolCallId === '') return false;
  const entries =
    typeof requestContext?.entries === 'function' ? [...requestContext.entries()] : [];
  const gateContext = {
    requestContext: Object.fromEntries(entries.filter(([key]) => key !== GLOBAL)),
    ...(context?.workspace === undefined ? {} : { workspace: context.workspace }),
  };
  if (typeof requireApproval === 'function' || requireApproval === true) {
    return kit.policyAsks(requireApproval, args, gateContext);
  }
  const global = requestContext?.get?.(GLOBAL) as unknown;
  return kit.policyAsks(global, { toolName, args, ...gateContext }, undefined);
}

/** A call's outcome as Mastra's `execute` answers it (Mastra shows a thrown error to the model). */
function answer(outcome: kit.CallOutcome | kit.Prepared<unknown>): unknown {
  if ('developer' in outcome) return escapes.escape(outcome.developer);
  return kit.returnOrThrow(outcome as kit.CallOutcome);
}

/**
 * The fields of a repeatable tool's copy: the `inputSchema` the model sees with the repeat
 * argument (Mastra's agent validates the model's input with it: the tool's schema, with Mastra's
 * repairs of model input, validates the input without it), and the tool's callbacks of the input
 * (Mastra hands them the model's input) without it.
 */
function repeatableFields(tool: AnyTool, shown: kit.ToolPresentation): Record<string, unknown> {
  const own = tool.inputSchema == null ? undefined : toStandardSchema(tool.inputSchema as never);
  const validate = (value: unknown) => {
    const checked = validateToolInput(own, value, shown.toolName);
    return checked.error === undefined
      ? { value: checked.data }
      : (own as unknown as kit.StandardJsonSchema)['~standard'].validate(value);
  };
  const strict = (tool as { strict?: unknown }).strict === true;
  const announce = tool.onInputAvailable as ((options: object) => unknown) | undefined;
  return {
    inputSchema: shown.standardSchema(own, { strict, validate }),
    requireApproval: shown.stripped(tool.requireApproval),
    needsApprovalFn: shown.stripped((tool as { needsApprovalFn?: unknown }).needsApprovalFn),
    ...(announce === undefined
      ? {}
      : {
          onInputAvailable: (o: { input: unknown }) =>
            announce({ ...o, input: shown.strip(o.input) }),
        }),
  };
}

function wrapTool(
  name: string,
  tool: AnyTool,
  adapter: kit.Adapter<ToolCallInfo>,
  approvals: Approvals,
  caller: string,
): AnyTool {
  const execute = tool.execute;
  const shown = kit.presentTool(adapter, name, caller);
  if (execute === undefined || shown.treatment === 'exclude') return tool;
  const copy = (fields: Record<string, unknown>): AnyTool =>
    kit.copyTool(tool, { ...fields, description: shown.describe(tool.description) });
  if (shown.treatment === 'unsafe') return copy({});
  const fields = shown.repeats === undefined ? {} : repeatableFields(tool, shown);
  /** The schema the input is validated with, as Mastra's agent validates it. */
  const schema = (fields.inputSchema ?? tool.inputSchema) as never;
  const policy = adapter.policy(name) as ToolPolicy | undefined;
  /** The tool's own approval gate: its calls are recorded when the model emits them. */
  const gated =
    Boolean(tool.requireApproval) ||
    typeof (tool as { needsApprovalFn?: unknown }).needsApprovalFn === 'function';
  const gate = kit.createGatedCalls(approvals, { toolName: name, policy, gated });
  const resuming = (context: Context) =>
    (context?.agent?.resumeData ?? context?.resumeData) != null;
  /**
   * The call prepared (the kit's pipeline) from the input as Mastra validates it (not on a
   * resume: Mastra hands the resumed call its snapshot's input), or Mastra's validation error
   * (nothing runs; the model reads it).
   */
  const prepare = async (given: unknown, context: Context) => {
    const checked = resuming(context) ? { data: given } : validateToolInput(schema, given, name);
    if (checked.error !== undefined) return { refused: checked.error };
    const history = await historyOf(context ?? {});
    const info = (args: unknown) => ({ toolName: name, input: args, context, history });
    const input = checked.data;
    return {
      input,
      prepared: await kit.prepareCall(adapter, { toolName: name, input, parsed: true, info }),
    };
  };

  const wrapped = async (given: unknown, context: Context) => {
    const identified = await prepare(given, context);
    if ('refused' in identified) return identified.refused; // nothing ran
    if (!('prepared' in identified.prepared)) return answer(identified.prepared);
    const ready = identified.prepared.prepared;
    // Approved by Mastra's gate (which gives the gate no call id): bound to the emitted call here.
    const args = identified.input;
    const requireApproval = fields.requireApproval ?? tool.requireApproval;
    const approved =
      !resuming(context) && (await passedApproval(requireApproval, name, args, context));
    const ref = context?.agent?.toolCallId ?? '';
    // The tool's `execute`, in the context Mastra gave with the call's; a suspension is no outcome.
    const run = (ctx: ExecutionContext) =>
      kit.runSuspendable(context, ['agent'], (watched) => {
        const abortSignal = kit.mergeSignals(context?.abortSignal, ctx.signal);
        return execute(ready.args, { ...watched, [CONTEXT]: ctx, abortSignal } as never);
      });
    const by = `mastra:${ref}`;
    return answer(await gate.run(adapter as never, ready, { approved, ref, by, args }, run));
  };

  const handle = gate.handle(async (given, context) => {
    const identified = await prepare(given, context as Context);
    if ('refused' in identified || 'text' in identified.prepared) return undefined;
    return { args: identified.input, prepared: kit.orThrow(identified.prepared) };
  });

  // The model emitted a call (Mastra announces it before its approval gate): recorded.
  const own = {
    onInputStart: tool.onInputStart,
    onInputAvailable: fields.onInputAvailable ?? tool.onInputAvailable,
  };
  const valid = (input: unknown) => {
    const checked = validateToolInput(schema, input, name);
    return checked.error === undefined ? { args: checked.data } : undefined;
  };
  return copy({
    ...handle,
    execute: kit.markWrapped(wrapped),
    ...fields,
    ...(gated ? gate.inputCallbacks(own, valid) : {}),
    toModelOutput: async (output: unknown) => {
      escapes.rethrow(output);
      return tool.toModelOutput?.(output);
    },
  });
}

/** How the adapter of a tools record describes itself (the kit's `ToolSetSpec`). */
const SET: Omit<kit.ToolSetSpec<ToolCallInfo>, 'caller'> = {
  set: 'the tools record of your Agent: { name: createTool({...}) }',
  tool: 'a Mastra tool: define it with createTool({ ... })',
  isTool: (tool) => typeof (tool as { id?: unknown }).id === 'string',
  conversation: ({ context }) => {
    const { threadId, resourceId } = context?.agent ?? {};
    if (threadId === undefined || threadId === '') return undefined;
    return resourceId === undefined ? threadId : JSON.stringify([resourceId, threadId]);
  },
  transcript: ({ context, history }) =>
    transcriptOf([...history, ...(context?.agent?.messages ?? [])], savesEarly(context ?? {})),
  repeatable: true,
  howTo:
    "a memory thread (agent.generate(prompt, { memory: { thread, resource } })), conversationId (your chat id, e.g. ({ context }) => context.requestContext.get('chatId')) or turnId (the id of the user message)",
};

const wrapSet = (tools: unknown, options: unknown, caller: string) =>
  kit.wrapToolSet<ToolCallInfo, AnyTool>(tools, options, { ...SET, caller }, (adapter) => {
    const approvals = createApprovals(adapter.executor);
    return (name, tool) => wrapTool(name, tool, adapter, approvals, caller);
  });

/**
 * Make a Mastra tools record idempotent: each tool's `execute` becomes a lookup first, so a
 * repeat of the same call in the same turn of the same conversation (memory thread) replays the
 * stored output (marked `replayed: true`) instead of running the side effect again. Every other
 * field (`requireApproval`, schemas, `toModelOutput`...) is kept.
 *
 * @throws ConfigurationError at once for a misspelt option, a bad policy, a tool name providers
 *   reject; out of `agent.generate` / `agent.stream` for a call of a run without a memory
 *   thread when neither `conversationId` nor `turnId` is given (nothing runs)
 */
export function idempotentTools<TOOLS extends Record<string, AnyTool>>(
  tools: TOOLS,
  options: IdempotentToolsOptions<TOOLS>,
): TOOLS {
  return wrapSet(tools, options, 'idempotentTools') as TOOLS;
}

/** Make one tool idempotent (see `idempotentTools`); its name is its `id`. */
export function idempotentTool<TOOL extends AnyTool>(
  tool: TOOL,
  options: IdempotentToolOptions<TOOL>,
): TOOL {
  const name = (tool as { id?: unknown } | null)?.id;
  return kit.wrapOneTool(name, tool, options, 'idempotentTool', wrapSet);
}
