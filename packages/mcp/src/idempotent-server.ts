import {
  type Approvals,
  ConfigurationError,
  createApprovals,
  type ExecutionContext,
  type ExecutorOptions,
  type IdempotentResult,
  InvalidInputError,
  markReplayed,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type Adapter,
  type AdapterOptions,
  createAdapter,
  createContextRegistry,
  errorText,
  isWrapped,
  keyArgs,
  markContent,
  markWrapped,
  mergeSignals,
  NotAnOutcome,
  takeRepeat,
  withRepeatNote,
} from '@idempotent-tools/core/adapter-kit';
import {
  type McpToolPolicy,
  runApproved,
  type ToolApproval,
  takeApprovals,
  watchCapabilities,
} from './approval.js';
import { withRepeatArgument } from './repeat-schema.js';
import {
  type CallToolResult,
  type CallView,
  entryField,
  isInputRequired,
  type McpServerLike,
  outputDeclaresReplayed,
  type RegisteredTool,
  relatedTaskId,
  signalOf,
  type ToolAnnotations,
  type ToolCallInfo,
  type ToolExtra,
  viewOf,
  withSignal,
} from './sdk.js';

export type { McpToolPolicy } from './approval.js';
export type { CallToolResult, McpServerLike, ToolCallInfo, ToolExtra } from './sdk.js';

/** `_meta` field of a `tools/call` request: the client's idempotency key for this one call. */
export const IDEMPOTENCY_KEY_META = 'io.idempotent-tools/key';
/** `_meta` field of a `tools/call` request: the client's id of the user turn. */
export const TURN_ID_META = 'io.idempotent-tools/turn-id';
/** `_meta` field of a `CallToolResult`: `true` on a replay (`false` on a fresh result with `markFresh`). */
export const REPLAYED_META = 'io.idempotent-tools/replayed';
/** Default `sessionWindow`: 5 minutes (the window of content-based deduplication in SQS FIFO queues). */
export const DEFAULT_SESSION_WINDOW = 5 * 60_000;

/** A per-call value: fixed, or computed from the call (undefined: not known). */
export type PerCall = string | ((call: ToolCallInfo) => string | undefined);

/** Options of `idempotentServer(server, options)` and `idempotentRegisterTool(server, options)`. */
export type IdempotentServerOptions = ExecutorOptions &
  Omit<AdapterOptions<ToolCallInfo, McpToolPolicy>, 'conversationId'> & {
    /**
     * How long a call that only its session identifies (stateful HTTP, no turn id from the
     * client) is remembered, in ms: a repeat in the session within it is a retry (replayed), a
     * repeat after it a new action (runs). `false`: such calls are refused, like calls with no
     * identity at all (stateless HTTP, stdio without a turn id).
     * @default 300000 (5 minutes)
     */
    sessionWindow?: number | false;
    /**
     * Also wrap tools annotated `readOnlyHint: true` (left as they are by default).
     * @default false
     */
    wrapReadOnly?: boolean;
  };

/**
 * An `isError: true` result of a tool: not stored (the claim is released, so a retry runs
 * again), unless `isTerminalError` says so; `isTerminalError` receives this error.
 */
export class ToolResultError extends Error {
  readonly result: CallToolResult;
  constructor(result: CallToolResult) {
    const text = (result.content ?? []).flatMap((part) =>
      part.type === 'text' && typeof part.text === 'string' ? [part.text] : [],
    );
    super(text.join('\n') || 'The tool returned an error result.');
    this.name = 'ToolResultError';
    this.result = result;
  }
}

type Handler = (...params: unknown[]) => unknown;
type Kind = 'wrap' | 'unsafe' | 'skip';
/** Where a framework turn came from; `session` turns are kept for `sessionWindow` only. */
type Source = { turnId: string; kind: 'key' | 'client' | 'task' | 'session'; key?: unknown[] };

const contexts = createContextRegistry();
const HOW_TO = `_meta["${TURN_ID_META}"] on tools/call (the client's id of the user turn, new for every user message and the same on a retry, e.g. the message id), or the server's turnId option`;

/**
 * The idempotency context of a wrapped call, from the `extra` (1.x) / `ctx` (2.x) your callback
 * received: `key` (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(extra: object): ExecutionContext | undefined {
  return contexts.get(extra);
}

function metaString(view: CallView, field: string): string | undefined {
  const value = view.meta?.[field];
  if (value === undefined) return undefined;
  if (typeof value === 'string' && value !== '') return value;
  throw new InvalidInputError({
    field,
    message: `_meta["${field}"] must be a non-empty string, got ${JSON.stringify(value) ?? typeof value}. Send a unique id (e.g. a UUID), or leave the field out.`,
  });
}

/** The turn the client gave: its key, its turn id, its task, else its session (scoped by client). */
function frameworkTurn(call: ToolCallInfo, window: number | false): Source | undefined {
  const known = [call.authInfo?.clientId, call.clientName];
  const who = known.every((part) => part === undefined) ? [] : known.map((part) => part ?? null);
  const scoped = (prefix: string, id: string) =>
    who.length === 0 ? `${prefix}:${id}` : `${prefix}:${JSON.stringify([...who, id])}`;
  const key = metaString(call, IDEMPOTENCY_KEY_META);
  if (key !== undefined)
    return { kind: 'key', turnId: scoped('key', key), key: ['client-key', ...who, key] };
  const turn = metaString(call, TURN_ID_META);
  if (turn !== undefined) return { kind: 'client', turnId: scoped('turn', turn) };
  const task = relatedTaskId(call);
  if (task !== undefined) return { kind: 'task', turnId: scoped('task', task) };
  if (call.sessionId !== undefined && window !== false) {
    return { kind: 'session', turnId: `session:${call.sessionId}` };
  }
  return undefined;
}

/** `replayed` in the structured content, where the output schema lets it in. */
function markStructured(
  structured: Record<string, unknown>,
  replayed: boolean,
  tool: RegisteredTool,
) {
  const declared = outputDeclaresReplayed(tool);
  if (declared === true) return { ...structured, replayed };
  if (declared === false || Object.hasOwn(structured, 'replayed')) return structured;
  return markReplayed(structured, replayed, { markFresh: true }) as Record<string, unknown>;
}

function markResult(
  result: CallToolResult,
  replayed: boolean,
  tool: RegisteredTool,
): CallToolResult {
  const marked: CallToolResult = {
    ...result,
    content: markContent(result.content ?? [], replayed),
    _meta: { ...result._meta, [REPLAYED_META]: replayed },
  };
  if (result.structuredContent !== undefined) {
    marked.structuredContent = markStructured(result.structuredContent, replayed, tool);
  }
  return marked;
}

/** The tool's annotations as the client reads them: `idempotentHint` only where it is true. */
function annotate(
  annotations: ToolAnnotations | undefined,
  kind: Kind,
  policy: McpToolPolicy | undefined,
) {
  if (kind === 'skip' || annotations?.idempotentHint !== undefined) return annotations;
  if (kind === 'unsafe') return { ...annotations, idempotentHint: false };
  // Only a business key makes the same arguments one call across turns.
  return policy?.businessKey === undefined ? annotations : { ...annotations, idempotentHint: true };
}

interface Wrapping {
  adapter: Adapter<ToolCallInfo>;
  server: McpServerLike;
  options: IdempotentServerOptions;
  window: number | false;
  kindOf: (name: string, annotations: ToolAnnotations | undefined) => Kind;
  sources: WeakMap<ToolCallInfo, Source | undefined>;
  approvals: Approvals;
  approval: (name: string) => ToolApproval | undefined;
}

/** The call's policy: the tool's, with the client's key and the session window. */
function callPolicy(w: Wrapping, name: string, source: Source | undefined, used: boolean) {
  const policy = { ...(w.adapter.policy(name) as McpToolPolicy | undefined) };
  if (policy.businessKey === undefined && source?.kind === 'key') {
    policy.businessKey = () => source.key;
  } else if (
    policy.businessKey === undefined &&
    used &&
    source?.kind === 'session' &&
    w.window !== false
  ) {
    const ttl = policy.ttl ?? (w.options as { ttl?: number }).ttl;
    policy.ttl = Math.min(w.window, ttl ?? w.window);
  }
  return policy;
}

/**
 * @throws ConfigurationError when a callback of the tool (its `handler` / `callback`, 2.x's
 *   `executor`) came out of an idempotent-tools wrapper already (another server's, an
 *   `idempotentRegisterTool`, `idempotency.wrap`): its call would run inside this one's with the
 *   same key and wait for itself
 */
function refuseWrappedTool(tool: RegisteredTool, name: string, own?: Handler): void {
  const callbacks = [tool.handler, tool.callback, tool.executor];
  if (!callbacks.some((callback) => callback !== own && isWrapped(callback))) return;
  throw new ConfigurationError({
    option: 'tools',
    message: `${CALLER}: tool "${name}" is already idempotent (its callback came out of an idempotent-tools wrapper), and wrapping it again would make its call wait for itself. Register the original callback once, through one wrapper.`,
  });
}

/** Make one registered tool idempotent (or mark it unsafe), now and after `update(...)`. */
function wrapRegistered(tool: RegisteredTool, name: string, w: Wrapping): void {
  const field = entryField(tool);
  const raw = {
    name,
    handler: tool[field],
    description: tool.description,
    annotations: tool.annotations,
    inputSchema: tool.inputSchema,
    /** The schema given to the tool's repeat argument (set by `apply`). */
    repeatSchema: undefined as unknown,
  };

  const wrapped: Handler = markWrapped(async (...params: unknown[]) => {
    const extra = params[params.length - 1] as ToolExtra;
    // A tool without arguments whose schema only the repeat argument made is still called so.
    const hasArgs =
      params.length > 1 && (raw.repeatSchema === undefined || raw.inputSchema !== undefined);
    const given = ((params.length > 1 ? params[0] : undefined) ?? {}) as Record<string, unknown>;
    const repeats = w.adapter.repeats(raw.name);
    const taken =
      repeats === undefined ? { args: given, repeat: 1 } : takeRepeat(given, raw.name, repeats);
    if ('error' in taken) {
      return {
        content: [{ type: 'text', text: taken.error }],
        isError: true,
      } satisfies CallToolResult;
    }
    const args = taken.args as Record<string, unknown>;
    const call: ToolCallInfo = { toolName: raw.name, args, extra, ...viewOf(extra, w.server) };
    const handler = raw.handler as Handler;
    try {
      const source = frameworkTurn(call, w.window);
      w.sources.set(call, source);
      const { turnId, scope, turn } = w.adapter.identify(call, raw.name);
      const policy = callPolicy(w, raw.name, source, turn?.source === 'framework');
      const executorCall = {
        toolName: raw.name,
        turnId,
        scope,
        args:
          repeats === undefined
            ? args
            : (keyArgs(args, taken.repeat, repeats) as Record<string, unknown>),
      };
      const fn = async (_keyArgs: unknown, context: ExecutionContext) => {
        const inner = withSignal(extra, mergeSignals(signalOf(extra), context.signal));
        contexts.set(inner, context);
        // The tool's own arguments: a repeat argument is not one of them.
        const output = (await handler(...(hasArgs ? [args, inner] : [inner]))) as CallToolResult;
        // A 2026-07-28 `input_required` round is never the outcome: the claim is released.
        if (isInputRequired(output)) throw new NotAnOutcome(output);
        if (output?.isError === true) throw new ToolResultError(output);
        return output;
      };
      const approval = w.approval(raw.name);
      let result: IdempotentResult<CallToolResult>;
      if (approval === undefined) {
        result = await w.adapter.executor.run(executorCall, fn, policy);
      } else {
        const approved = await runApproved({
          ...{ approvals: w.approvals, approval, server: w.server, info: call, extra },
          ...{ call: executorCall, policy, fn },
        });
        if ('reply' in approved) return approved.reply;
        result = approved.result;
      }
      return result.replayed || w.adapter.markFresh
        ? markResult(result.value, result.replayed, tool)
        : result.value;
    } catch (error) {
      if (NotAnOutcome.isInstance(error)) return error.value;
      if (error instanceof ToolResultError) return error.result;
      const text = errorText(error);
      if (text === undefined) throw error; // the tool's own error: the SDK reports it as usual
      return { content: [{ type: 'text', text }], isError: true } satisfies CallToolResult;
    }
  });

  const apply = () => {
    refuseWrappedTool(tool, raw.name, wrapped);
    const kind = typeof raw.handler === 'function' ? w.kindOf(raw.name, raw.annotations) : 'skip';
    const policy = w.adapter.policy(raw.name) as McpToolPolicy | undefined;
    const repeats = kind === 'wrap' ? w.adapter.repeats(raw.name) : undefined;
    raw.repeatSchema =
      repeats === undefined
        ? undefined
        : withRepeatArgument(raw.inputSchema, field === 'executor', raw.name, repeats, CALLER);
    tool.inputSchema = raw.repeatSchema ?? raw.inputSchema;
    // 2.x memoises the JSON of a tool's input schema: forget it once the schema changed.
    delete (w.server as { _toolInputSchemaJson?: Record<string, unknown> })._toolInputSchemaJson?.[
      raw.name
    ];
    tool.description =
      kind === 'skip'
        ? raw.description
        : repeats === undefined
          ? withRetryNote(raw.description, kind === 'wrap')
          : withRepeatNote(raw.description, repeats);
    tool.annotations = annotate(raw.annotations, kind, policy);
    tool[field] = kind === 'wrap' ? wrapped : raw.handler;
  };

  // A later `update({ callback, description, annotations, name })` is wrapped again.
  const update = tool.update.bind(tool);
  tool.update = (updates) => {
    update(updates);
    if (typeof updates.name === 'string') raw.name = updates.name;
    if (updates.paramsSchema !== undefined) raw.inputSchema = tool.inputSchema;
    if (tool[field] !== wrapped) raw.handler = tool[field]; // a new callback (2.x: a new executor)
    if (updates.description !== undefined) raw.description = updates.description;
    if (updates.annotations !== undefined) raw.annotations = updates.annotations;
    apply();
  };
  apply();
}

const CALLER = 'idempotentServer';

function prepare(server: McpServerLike, options: IdempotentServerOptions) {
  const caller = CALLER;
  if (server === null || typeof server !== 'object' || typeof server.registerTool !== 'function') {
    throw new ConfigurationError({
      option: 'server',
      message: `${caller}: pass an McpServer (new McpServer(...) from @modelcontextprotocol/server or @modelcontextprotocol/sdk/server/mcp.js).`,
    });
  }
  if (isWrapped(server)) {
    throw new ConfigurationError({
      option: 'server',
      message: `${caller}: this server is already made idempotent: give per-tool options in its policies, exclude and unsafe.`,
    });
  }
  const o = (options ?? {}) as Record<string, unknown>;
  if (o.noSessionTurnId !== undefined) {
    throw new ConfigurationError({
      option: 'noSessionTurnId',
      message: `${caller}: noSessionTurnId is gone: it gave every client without a session one shared turn, so one client's call replayed another's. Have clients send ${HOW_TO}.`,
    });
  }
  if (o.conversationId !== undefined) {
    throw new ConfigurationError({
      option: 'conversationId',
      message: `${caller}: an MCP server never sees the conversation's messages, so conversationId cannot tell its turns apart. Use ${HOW_TO}.`,
    });
  }
  const window = o.sessionWindow ?? DEFAULT_SESSION_WINDOW;
  if (
    window !== false &&
    (typeof window !== 'number' || !Number.isInteger(window) || window <= 0)
  ) {
    throw new ConfigurationError({
      option: 'sessionWindow',
      message: `${caller}: sessionWindow must be a whole number of milliseconds (e.g. 300000) or false, got ${String(window)}.`,
    });
  }
  if (o.wrapReadOnly !== undefined && typeof o.wrapReadOnly !== 'boolean') {
    throw new ConfigurationError({
      option: 'wrapReadOnly',
      message: `${caller}: wrapReadOnly must be true or false.`,
    });
  }
  const sources = new WeakMap<ToolCallInfo, Source | undefined>();
  // `approval` is this adapter's: the kit checks the rest of each policy.
  const taken = takeApprovals(o, caller);
  const kitOptions = o.policies === undefined ? o : { ...o, policies: taken.policies };
  const adapter = createAdapter<ToolCallInfo>(kitOptions as never, {
    caller,
    options: ['sessionWindow', 'wrapReadOnly'],
    repeatable: true,
    turn: (call) => sources.get(call)?.turnId,
    howTo: HOW_TO,
  });
  const kindOf = (name: string, annotations: ToolAnnotations | undefined): Kind => {
    const treatment = adapter.treatment(name);
    if (treatment !== 'wrap') return treatment === 'unsafe' ? 'unsafe' : 'skip';
    if (taken.approvals.has(name)) return 'wrap'; // never run unapproved
    return annotations?.readOnlyHint === true && o.wrapReadOnly !== true ? 'skip' : 'wrap';
  };
  const ttl = (o as { ttl?: unknown }).ttl;
  const approvals = createApprovals(
    adapter.executor,
    typeof ttl === 'number' && o.idempotency === undefined ? { ttl } : {},
  );
  if (taken.approvals.size > 0) watchCapabilities(server, [...taken.approvals.keys()], caller);
  const approval = (name: string) => taken.approvals.get(name);
  const w: Wrapping = { adapter, server, options, window, kindOf, sources, approvals, approval };
  return (name: unknown, registered: unknown) => {
    if (typeof name !== 'string' || registered === null || typeof registered !== 'object') return;
    wrapRegistered(registered as RegisteredTool, name, w);
  };
}

/**
 * Make every tool of an MCP server (`@modelcontextprotocol/sdk` 1.x or
 * `@modelcontextprotocol/server` 2.x) idempotent: the ones registered already and every one
 * registered later. A retried `tools/call` (same client turn id, or the same session within
 * `sessionWindow`; same tool, same arguments) replays the stored `CallToolResult`, marked
 * replayed, instead of running the tool again. A call that nothing identifies is refused with an
 * `isError` result that says what the client must send. Returns the same server.
 *
 * ```ts
 * const server = idempotentServer(new McpServer({ name: 'helpdesk', version: '1.0.0' }), {
 *   store: openSqliteStore('mcp.db'),
 * });
 * server.registerTool('create_ticket', { inputSchema: { title: z.string() } }, createTicket);
 * ```
 *
 * @throws ConfigurationError for options that can never work (when the server is wrapped)
 */
export function idempotentServer<S extends McpServerLike>(
  server: S,
  options: IdempotentServerOptions,
): S {
  const wrap = prepare(server, options);
  const existing = (server as { _registeredTools?: Record<string, unknown> })._registeredTools;
  // Refused before any tool is changed: tools an idempotentRegisterTool of this server made.
  for (const [name, registered] of Object.entries(existing ?? {})) {
    if (registered !== null && typeof registered === 'object') {
      refuseWrappedTool(registered as RegisteredTool, name);
    }
  }
  for (const [name, registered] of Object.entries(existing ?? {})) wrap(name, registered);
  for (const method of ['registerTool', 'tool'] as const) {
    const original = (server as Record<string, unknown>)[method] as
      | ((...args: unknown[]) => unknown)
      | undefined;
    if (typeof original !== 'function') continue;
    Object.defineProperty(server, method, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) => {
        const registered = original.apply(server, args);
        wrap(args[0], registered);
        return registered;
      },
    });
  }
  return markWrapped(server);
}

/**
 * A `registerTool` for `server` whose tools are idempotent; `server.registerTool` itself is left
 * as it is (for tools you do not want wrapped). Same options as `idempotentServer`.
 */
export function idempotentRegisterTool<S extends McpServerLike>(
  server: S,
  options: IdempotentServerOptions,
): S['registerTool'] {
  const wrap = prepare(server, options);
  const registerTool = server.registerTool as unknown as (...args: unknown[]) => unknown;
  return ((...args: unknown[]) => {
    const registered = registerTool.apply(server, args);
    wrap(args[0], registered);
    return registered;
  }) as unknown as S['registerTool'];
}
