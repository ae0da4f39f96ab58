import {
  ConfigurationError,
  createApprovals,
  type ExecutionContext,
  type ExecutorOptions,
  InvalidInputError,
  markReplayed,
  type ToolPolicy,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import { askOf, checkApproval, type McpToolPolicy, watchCapabilities } from './approval.js';
import {
  type CallToolResult,
  callbacksOf,
  callInfo,
  entryField,
  type McpServerLike,
  outputDeclaresReplayed,
  type RegisteredTool,
  type ToolCallInfo,
  type ToolExtra,
  withSignal,
} from './sdk.js';

export {
  APPROVAL_INPUT_PREFIX,
  type McpApprovalOption,
  type McpApprovalPolicy,
  type McpToolPolicy,
} from './approval.js';
export type { CallToolResult, McpServerLike, ToolCallInfo, ToolExtra } from './sdk.js';

/** `_meta` field of a `tools/call` request: the client's idempotency key for this one call. */
export const IDEMPOTENCY_KEY_META = 'io.idempotent-tools/key';
/** `_meta` field of a `tools/call` request: the client's id of the user turn. */
export const TURN_ID_META = 'io.idempotent-tools/turn-id';
/** `_meta` field of a `CallToolResult`: `true` on a replay (`false` on a fresh one with `markFresh`). */
export const REPLAYED_META = 'io.idempotent-tools/replayed';
/** Default `sessionWindow`: 5 minutes (the content-based deduplication window of SQS FIFO queues). */
export const DEFAULT_SESSION_WINDOW = 5 * 60_000;

/** A per-call value: fixed, or computed from the call (undefined: not known). */
export type PerCall = kit.PerCall<ToolCallInfo>;

/** Options of `idempotentServer(server, options)` and `idempotentRegisterTool(server, options)`. */
export type IdempotentServerOptions = ExecutorOptions &
  Omit<kit.AdapterOptions<ToolCallInfo, McpToolPolicy>, 'conversationId'> & {
    /**
     * How long a call that only its session identifies (stateful HTTP, no turn id from the
     * client) is remembered, in ms: a repeat in the session within it is a retry (replayed), a
     * repeat after it a new action (runs). `false`: such calls are refused, like calls with no
     * identity at all (stateless HTTP, stdio without a turn id).
     * @default 300000 (5 minutes)
     */
    sessionWindow?: number | false;
    /** Also wrap tools annotated `readOnlyHint: true` (left as they are by default). @default false */
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
const CALLER = 'idempotentServer';
const HOW_TO = `_meta["${TURN_ID_META}"] on tools/call (the client's id of the user turn, new for every user message and the same on a retry, e.g. the message id), or the server's turnId option`;
/** MCP's own options, and those that can never work on MCP (and why), for `optionChecks`. */
const OPTION_CHECKS: Record<string, (value: unknown) => string | undefined> = {
  noSessionTurnId: () =>
    `noSessionTurnId is gone: it gave every client without a session one shared turn, so one client's call replayed another's. Have clients send ${HOW_TO}.`,
  conversationId: () =>
    `an MCP server never sees the conversation's messages, so conversationId cannot tell its turns apart. Use ${HOW_TO}.`,
  sessionWindow: (window) =>
    window === false || (Number.isInteger(window) && (window as number) > 0)
      ? undefined
      : `sessionWindow must be a whole number of milliseconds (e.g. 300000) or false, got ${String(window)}.`,
  wrapReadOnly: (value) =>
    typeof value === 'boolean' ? undefined : 'wrapReadOnly must be true or false.',
};
const contexts = kit.createContextRegistry();
const require = kit.requireNear(import.meta.url);

/**
 * The idempotency context of a wrapped call, from the `extra` (1.x) / `ctx` (2.x) your callback
 * received: `key` (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(extra: object): ExecutionContext | undefined {
  return contexts.get(extra);
}

/** Where a turn the client gave comes from; `session` turns are kept for `sessionWindow` only. */
type Source = { turnId: string; kind: 'key' | 'client' | 'task' | 'session'; key?: unknown[] };

/** The turn the client gave: its key, its turn id, its task, else its session (scoped by client). */
function clientTurn(call: ToolCallInfo, window: number | false): Source | undefined {
  const meta = (field: string) => {
    const value = call.meta?.[field];
    if (value === undefined || (typeof value === 'string' && value !== '')) return value;
    throw new InvalidInputError({
      field,
      message: `_meta["${field}"] must be a non-empty string, got ${JSON.stringify(value) ?? typeof value}. Send a unique id (e.g. a UUID), or leave the field out.`,
    });
  };
  const known = [call.authInfo?.clientId, call.clientName];
  const who = known.every((part) => part === undefined) ? [] : known.map((part) => part ?? null);
  const scoped = (prefix: string, id: string) =>
    `${prefix}:${who.length === 0 ? id : JSON.stringify([...who, id])}`;
  const key = meta(IDEMPOTENCY_KEY_META);
  if (key !== undefined)
    return { kind: 'key', turnId: scoped('key', key), key: ['client-key', ...who, key] };
  const turn = meta(TURN_ID_META);
  if (turn !== undefined) return { kind: 'client', turnId: scoped('turn', turn) };
  const task = (call.meta?.['io.modelcontextprotocol/related-task'] as { taskId?: unknown })
    ?.taskId;
  if (typeof task === 'string' && task !== '')
    return { kind: 'task', turnId: scoped('task', task) };
  if (call.sessionId === undefined || window === false) return undefined;
  return { kind: 'session', turnId: `session:${call.sessionId}` };
}

/** A replayed (with `markFresh`, a fresh) result, marked in content, `_meta` and structuredContent. */
function markResult(result: CallToolResult, replayed: boolean, tool: RegisteredTool) {
  const content = kit.markContent(result.content ?? [], replayed);
  const marked = { ...result, content, _meta: { ...result._meta, [REPLAYED_META]: replayed } };
  // `replayed` in the structured content only where the output schema lets it in.
  const declared = outputDeclaresReplayed(tool);
  const structured = result.structuredContent;
  if (structured === undefined || declared === false) return marked;
  if (declared === true) return { ...marked, structuredContent: { ...structured, replayed } };
  if (Object.hasOwn(structured, 'replayed')) return marked;
  return { ...marked, structuredContent: markReplayed(structured, replayed, { markFresh: true }) };
}

/** A `CallOutcome` as the SDK's reply: an `isError` result the model reads, or the tool's own. */
function replyOf(outcome: kit.CallOutcome): CallToolResult {
  if ('output' in outcome) return outcome.output as CallToolResult;
  const error =
    'text' in outcome ? undefined : 'error' in outcome ? outcome.error : outcome.developer;
  if (error instanceof ToolResultError) return error.result;
  const text = 'text' in outcome ? outcome.text : kit.errorText(error);
  if (text === undefined) throw error; // the tool's own error: the SDK reports it as usual
  return { content: [{ type: 'text', text }], isError: true };
}

/** Check the options and make the adapter; returns what wraps one registered tool. */
function prepare(server: McpServerLike, options: IdempotentServerOptions) {
  const refuse = (option: string, why: string) =>
    new ConfigurationError({ option, message: `${CALLER}: ${why}` });
  if (typeof server?.registerTool !== 'function') {
    throw refuse(
      'server',
      'pass an McpServer (new McpServer(...) from @modelcontextprotocol/server or @modelcontextprotocol/sdk/server/mcp.js).',
    );
  }
  if (kit.isWrapped(server)) {
    throw refuse(
      'server',
      'this server is already made idempotent: give per-tool options in its policies, exclude and unsafe.',
    );
  }
  const o = (options ?? {}) as Record<string, unknown>;
  const window = (o.sessionWindow ?? DEFAULT_SESSION_WINDOW) as number | false;
  const adapter = kit.createAdapter<ToolCallInfo>(o as never, {
    caller: CALLER,
    optionChecks: OPTION_CHECKS,
    repeatable: true,
    howTo: HOW_TO,
    policyFields: { approval: checkApproval },
    turn: (call) => clientTurn(call, window)?.turnId,
  });
  const approval = (name: string) =>
    adapter.policyField(name, 'approval') as kit.AskingApproval<ToolCallInfo> | undefined;
  const ttl = typeof o.ttl === 'number' ? o.ttl : undefined; // never with { idempotency }
  const approvals = createApprovals(adapter.executor, ttl === undefined ? {} : { ttl });
  const asking = Object.keys((o.policies ?? {}) as object).filter(
    (name) => approval(name) !== undefined,
  );
  if (asking.length > 0) watchCapabilities(server, asking, CALLER);

  /** The call's policy: the tool's, with the client's key or the session window. */
  const policyOf = (call: ToolCallInfo, turn: { source: string } | undefined, own?: ToolPolicy) => {
    const source = clientTurn(call, window);
    if (own?.businessKey !== undefined || source === undefined) return { ...own };
    if (source.kind === 'key') return { ...own, businessKey: () => source.key };
    // A turn only the session gives is remembered for the session window, not the ttl.
    if (source.kind !== 'session' || turn?.source !== 'framework' || window === false) {
      return { ...own };
    }
    return { ...own, ttl: Math.min(window, own?.ttl ?? ttl ?? window) };
  };

  /** Make one registered tool idempotent (or mark it unsafe), now and after `update(...)`. */
  return (name: unknown, tool: RegisteredTool) => {
    if (typeof name !== 'string' || tool === null || typeof tool !== 'object') return;
    const field = entryField(tool);
    const { description, annotations, inputSchema } = tool;
    const raw = { name, handler: tool[field], description, annotations, inputSchema };
    const mark = (value: unknown, replayed: boolean) =>
      replayed || adapter.markFresh ? markResult(value as CallToolResult, replayed, tool) : value;

    const wrapped = kit.markWrapped(async (...params: unknown[]) => {
      const extra = params[params.length - 1] as ToolExtra;
      const input = (params.length > 1 ? params[0] : undefined) ?? {};
      const info = (args: unknown) => callInfo(raw.name, args as never, extra, server);
      const given = { toolName: raw.name, input, parsed: true, info, policy: policyOf };
      const prepared = await kit.prepareCall(adapter, given);
      if (!('prepared' in prepared)) return replyOf(prepared);
      // A tool without arguments whose schema only the repeat argument made is still called so.
      const hasArgs =
        params.length > 1 && (!adapter.repeats(raw.name) || raw.inputSchema !== undefined);
      const execute = async (args: unknown, context: ExecutionContext) => {
        const inner = withSignal(extra, context.signal);
        contexts.set(inner, context);
        const handler = raw.handler as Handler;
        const output = (await handler(...(hasArgs ? [args, inner] : [inner]))) as CallToolResult;
        // A 2026-07-28 `input_required` round is never the outcome: the claim is released.
        if (output?.resultType === 'input_required') throw new kit.NotAnOutcome(output);
        if (output?.isError === true) throw new ToolResultError(output);
        return output;
      };
      const ask = askOf(approval(raw.name), server, prepared.prepared.info);
      return replyOf(
        await kit.runAsking(adapter, approvals, prepared.prepared, execute, ask, mark),
      );
    });

    const apply = () => {
      for (const own of callbacksOf(tool)) {
        if (own !== wrapped) kit.refuseWrapped(raw.name, own, CALLER);
      }
      const treatment = adapter.treatment(raw.name);
      const readOnly = raw.annotations?.readOnlyHint === true && o.wrapReadOnly !== true;
      const kind =
        typeof raw.handler !== 'function' || treatment === 'exclude'
          ? 'skip'
          : treatment === 'unsafe'
            ? 'unsafe'
            : readOnly && approval(raw.name) === undefined // never run unapproved
              ? 'skip'
              : 'wrap';
      const present = kit.presentTool(adapter, raw.name, CALLER);
      tool.inputSchema =
        kind !== 'wrap'
          ? raw.inputSchema
          : field === 'executor'
            ? present.standardSchema(raw.inputSchema)
            : present.zodSchema(raw.inputSchema, require);
      // 2.x memoises the JSON of a tool's input schema: forget it once the schema changed.
      delete (server as { _toolInputSchemaJson?: Record<string, unknown> })._toolInputSchemaJson?.[
        raw.name
      ];
      tool.description = kind === 'skip' ? raw.description : present.describe(raw.description);
      // `idempotentHint` only where it is true: unsafe, or a business key (one call across turns).
      const keyed = kind === 'wrap' && adapter.policy(raw.name)?.businessKey !== undefined;
      const hint = kind === 'unsafe' ? false : keyed ? true : undefined;
      const own = hint === undefined || raw.annotations?.idempotentHint !== undefined;
      tool.annotations = own ? raw.annotations : { ...raw.annotations, idempotentHint: hint };
      tool[field] = kind === 'wrap' ? wrapped : raw.handler;
    };

    // A later `update({ callback, description, annotations, name })` is wrapped again.
    const update = tool.update.bind(tool);
    tool.update = (updates) => {
      update(updates);
      if (typeof updates.name === 'string') raw.name = updates.name;
      if (updates.paramsSchema !== undefined) raw.inputSchema = tool.inputSchema;
      if (tool[field] !== wrapped) raw.handler = tool[field]; // a new callback (2.x: a new executor)
      if (updates.description !== undefined) raw.description = updates.description as string;
      if (updates.annotations !== undefined) raw.annotations = updates.annotations as never;
      apply();
    };
    apply();
  };
}

/** `registerTool` (or 1.x `tool`) of `server` that wraps each tool it registers. */
const registering =
  (server: McpServerLike, original: Handler, wrap: ReturnType<typeof prepare>) =>
  (...args: unknown[]) => {
    const registered = original.apply(server, args);
    wrap(args[0], registered as RegisteredTool);
    return registered;
  };

/**
 * Make every tool of an MCP server (`@modelcontextprotocol/sdk` 1.x or
 * `@modelcontextprotocol/server` 2.x) idempotent, those registered already and later: a retried
 * `tools/call` of the same turn replays the stored `CallToolResult`, marked replayed; a call that
 * nothing identifies is refused with an `isError` result saying what the client must send.
 * Returns the same server. See the README.
 * @throws ConfigurationError for options that can never work (when the server is wrapped)
 */
export function idempotentServer<S extends McpServerLike>(
  server: S,
  options: IdempotentServerOptions,
): S {
  const wrap = prepare(server, options);
  const tools = Object.entries((server as { _registeredTools?: object })._registeredTools ?? {});
  // Refused before any tool is changed: tools an idempotentRegisterTool of this server made.
  for (const [name, tool] of tools) {
    for (const own of callbacksOf(tool)) kit.refuseWrapped(name, own, CALLER);
  }
  for (const [name, tool] of tools) wrap(name, tool);
  for (const method of ['registerTool', 'tool'] as const) {
    const original = (server as Record<string, unknown>)[method];
    if (typeof original !== 'function') continue;
    const value = registering(server, original as Handler, wrap);
    Object.defineProperty(server, method, { configurable: true, writable: true, value });
  }
  return kit.markWrapped(server);
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
  return registering(server, server.registerTool as never, wrap) as unknown as S['registerTool'];
}
