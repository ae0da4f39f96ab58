/**
 * What every framework adapter does besides mapping its framework's shapes: check the options
 * when the tools are wrapped (misspelt options, tool names, policies, exclude / unsafe lists, a
 * setup that can never tell conversations apart), make the executor, and resolve each call's
 * turn and scope. One implementation, so every adapter behaves the same.
 */
import { ConfigurationError, InvalidInputError } from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import type { ExecutorOptions } from '../executor/executor-options.js';
import {
  type Call,
  createIdempotency,
  IDEMPOTENCY_OPTION_FIELDS,
  type Idempotency,
  type IdempotencyOptions,
  TOOL_POLICY_FIELDS,
  type ToolPolicy,
} from '../executor.js';
import { type Repeats, repeatsOf } from './repeats.js';
import {
  checkPerCall,
  createTurnResolver,
  type PerCall,
  type ResolvedTurn,
  type TurnIdentityOptions,
  type TurnSources,
} from './turn-identity.js';

/** The options every adapter takes (with the executor's options or `{ idempotency }`). */
export interface AdapterOptions<Info, Policy = ToolPolicy<never, never>>
  extends TurnIdentityOptions<Info> {
  /**
   * Tenant / user: records of one scope are invisible to another. A string, or a function of the
   * call. Scope isolates records; it is not a conversation identity (two chats of one user share
   * a scope): give `conversationId` too.
   * @default undefined (one global scope)
   */
  scope?: PerCall<Info> | undefined;
  /**
   * Per-tool policy (ttl, lease, businessKey, reconcile, onStale, isTerminalError...), by tool
   * name. A tool with a `businessKey` needs no turn: its key is scope + tool + business key.
   * Adapters that support it also take `repeatable` (see `RepeatablePolicy`): deliberate repeats.
   * @default {} (the executor's defaults)
   */
  policies?: Readonly<Record<string, Policy | undefined>> | undefined;
  /**
   * Tools left exactly as they are (read-only tools), by name.
   * @default []
   */
  exclude?: readonly string[] | undefined;
  /**
   * Tools not made idempotent: every call runs again; their description tells the model they are
   * not safe to retry.
   * @default []
   */
  unsafe?: readonly string[] | undefined;
  /**
   * Also mark fresh results (`replayed: false`), not only replays.
   * @default false
   */
  markFresh?: boolean | undefined;
}

/** How an adapter describes itself to the kit. */
export interface AdapterSpec<Info> extends TurnSources<Info> {
  /** The public function, for the messages (e.g. `idempotentTools`). */
  caller: string;
  /** The options this adapter takes besides the kit's and the executor's. @default [] */
  options?: readonly string[];
  /**
   * Checks of the adapter's own options (taken besides `options`), each given the option's value
   * when it is not undefined: a string is why the value can never work (refused, naming the
   * option), undefined accepts it. An option that is gone (or that the framework makes
   * meaningless) is refused by a check that always answers why. @default {}
   */
  optionChecks?: Readonly<Record<string, (value: unknown) => string | undefined>>;
  /**
   * The names of the tools the adapter wraps, when they are known at wrap time: each is checked
   * (see `checkToolName`), names in `policies`, `exclude` and `unsafe` must be among them (or
   * among `otherToolNames`), and a setup that could never tell conversations apart is refused
   * when one of them needs a turn.
   */
  toolNames?: readonly string[];
  /**
   * Tools of the set that are never wrapped (provider-executed tools): they may be named in
   * `exclude` and need no identity. @default []
   */
  otherToolNames?: readonly string[];
  /**
   * Whether the adapter supports deliberate repeats (`repeatable` in a tool's policy: it adds
   * the repeat argument to the schema the model sees and takes it out before the tool runs).
   * Without it such a policy is refused. @default false
   */
  repeatable?: boolean;
  /**
   * Policy fields of the adapter's own (MCP's `approval`), each with its check: given the field's
   * value (not undefined) and the tool, it returns the checked value or throws a
   * `ConfigurationError`. They are matched against a misspelt field, never seen by the executor,
   * and read back with `adapter.policyField`. @default {}
   */
  policyFields?: Readonly<Record<string, PolicyFieldCheck>>;
}

/** The check of an adapter's own policy field (see `AdapterSpec.policyFields`). */
export type PolicyFieldCheck = (
  value: unknown,
  tool: { toolName: string; treatment: ToolTreatment; caller: string },
) => unknown;

/** How one tool of the set is treated. */
export type ToolTreatment = 'wrap' | 'exclude' | 'unsafe';

export interface Adapter<Info> {
  readonly executor: Idempotency;
  readonly markFresh: boolean;
  /** How the tool is treated (`exclude`, `unsafe`, else `wrap`). */
  treatment(toolName: string): ToolTreatment;
  /** The tool's policy (validated when the adapter was made, or at its first use). */
  policy(toolName: string): ToolPolicy<never, never> | undefined;
  /** How the tool takes a deliberate repeat (its policy's `repeatable`), or undefined: it does not. */
  repeats(toolName: string): Repeats | undefined;
  /** The checked value of an adapter's own policy field (`AdapterSpec.policyFields`), or undefined. */
  policyField(toolName: string, field: string): unknown;
  /**
   * The key parts of one call: its turn and scope.
   * @throws ConfigurationError when nothing identifies the turn (a tool without a business key)
   */
  identify(
    call: Info,
    toolName: string,
  ): { turnId: string | undefined; scope: string | undefined; turn: ResolvedTurn | undefined };
  /** The scope of one call (the `scope` option), for a call that runs without its turn. */
  scopeOf(call: Info): string | undefined;
}

/**
 * The executor's call for one tool call, checked in full before anything runs: its turn and
 * scope (`adapter.identify`), and the key they make (`executor.keyOf`: a turn id or scope the
 * executor refuses, e.g. too long, fails here too). For adapters whose framework has a hook
 * before the tool runs whose errors reach the developer.
 *
 * @throws ConfigurationError / InvalidInputError (`audienceOf`: developer for the identity,
 *   model for arguments that are not JSON)
 */
export function callOf<Info>(
  adapter: Adapter<Info>,
  info: Info,
  toolName: string,
  args: unknown,
  policy?: ToolPolicy,
): Call {
  const { turnId, scope } = adapter.identify(info, toolName);
  const call = { toolName, turnId, scope, args };
  adapter.executor.keyOf(call, policy);
  return call;
}

/** The option names every adapter takes. */
const KIT_OPTIONS = [
  'turnId',
  'conversationId',
  'scope',
  'policies',
  'exclude',
  'unsafe',
  'markFresh',
  'idempotency',
] as const;

/**
 * Tool names the frameworks and providers accept: 1 to 128 letters, digits, `_`, `-` or `.`
 * (OpenAI and Anthropic take `[a-zA-Z0-9_-]{1,64}`, MCP adds `.`).
 */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** @throws ConfigurationError unless `name` is a tool name the providers accept. */
export function checkToolName(name: unknown, caller: string): asserts name is string {
  if (typeof name === 'string' && TOOL_NAME.test(name)) return;
  throw new ConfigurationError({
    option: 'toolName',
    message: `${caller}: ${JSON.stringify(name) ?? String(name)} is not a tool name the model providers accept: use 1 to 128 letters, digits, "_", "-" or "." (no spaces), e.g. "create_ticket".`,
  });
}

function names(field: string, value: unknown, caller: string): Set<string> {
  if (value === undefined) return new Set();
  if (!Array.isArray(value) || value.some((n) => typeof n !== 'string')) {
    throw new ConfigurationError({
      option: field,
      message: `${caller}: ${field} must be an array of tool names, e.g. ['get_weather'].`,
    });
  }
  return new Set(value as string[]);
}

/** The executor of the options: `options.idempotency`, or a new one from the executor's options. */
function executorOf(options: Record<string, unknown>, caller: string): Idempotency {
  const hasStore = options.store != null;
  const shared = options.idempotency as Idempotency | null | undefined;
  if (hasStore === (shared != null)) {
    throw new ConfigurationError({
      option: 'store',
      message: `${caller} needs exactly one of { store } or { idempotency }: e.g. ${caller}(..., { store: openSqliteStore('agent.db') }).`,
    });
  }
  if (shared != null) {
    if (typeof shared.run !== 'function') {
      throw new ConfigurationError({
        option: 'idempotency',
        message: `${caller}: idempotency must be an executor from createIdempotency({ store }).`,
      });
    }
    const executorFields = IDEMPOTENCY_OPTION_FIELDS.filter(
      (f) => f !== 'store' && options[f] !== undefined,
    );
    if (executorFields.length > 0) {
      throw new ConfigurationError({
        option: executorFields[0] as string,
        message: `${caller}: ${executorFields.join(', ')} are options of the executor; with { idempotency } they belong in createIdempotency({ ... }).`,
      });
    }
    return shared;
  }
  const executorOptions: Record<string, unknown> = {};
  for (const field of IDEMPOTENCY_OPTION_FIELDS) {
    if (options[field] !== undefined) executorOptions[field] = options[field];
  }
  return createIdempotency(executorOptions as unknown as IdempotencyOptions);
}

/**
 * Check an adapter's options and make its executor. Throws (to the developer, at wrap time) on
 * a misspelt option, a bad policy, a name in `policies` / `exclude` / `unsafe` that is not a tool,
 * a tool name providers reject, and a setup that could never tell conversations apart.
 *
 * @throws ConfigurationError, or InvalidInputError naming a bad executor option or policy field
 */
export function createAdapter<Info>(
  options: (AdapterOptions<Info, unknown> & ExecutorOptions) | undefined,
  spec: AdapterSpec<Info>,
): Adapter<Info> {
  const { caller } = spec;
  if (options === null || typeof options !== 'object') {
    throw new ConfigurationError({
      option: 'options',
      message: `${caller} needs options: { store } (or { idempotency }) and how to tell conversations apart ({ conversationId } or { turnId }).`,
    });
  }
  const o = options as unknown as Record<string, unknown> & AdapterOptions<Info, unknown>;
  const unknown = unknownOption(o, [
    ...KIT_OPTIONS,
    ...IDEMPOTENCY_OPTION_FIELDS,
    ...(spec.options ?? []),
    ...Object.keys(spec.optionChecks ?? {}),
  ]);
  if (unknown !== undefined) {
    throw new ConfigurationError({
      option: unknown.name,
      message: `${caller}: ${unknown.message}`,
    });
  }
  for (const [option, check] of Object.entries(spec.optionChecks ?? {})) {
    const why = o[option] === undefined ? undefined : check(o[option]);
    if (why !== undefined) throw new ConfigurationError({ option, message: `${caller}: ${why}` });
  }
  const executor = executorOf(o, caller);
  checkPerCall('scope', o.scope, caller);
  if (o.markFresh !== undefined && typeof o.markFresh !== 'boolean') {
    throw new ConfigurationError({
      option: 'markFresh',
      message: `${caller}: markFresh must be true or false.`,
    });
  }
  const exclude = names('exclude', o.exclude, caller);
  const unsafe = names('unsafe', o.unsafe, caller);
  for (const name of exclude) {
    if (unsafe.has(name)) {
      throw new ConfigurationError({
        option: 'unsafe',
        message: `${caller}: "${name}" is in both exclude and unsafe. Keep it in one of them.`,
      });
    }
  }
  const policies = o.policies ?? {};
  if (policies === null || typeof policies !== 'object' || Array.isArray(policies)) {
    throw new ConfigurationError({
      option: 'policies',
      message: `${caller}: policies must be an object { [toolName]: policy }.`,
    });
  }
  const executorPolicies: Record<string, ToolPolicy<never, never>> = {};
  const repeats = new Map<string, Repeats>();
  const ownFields = spec.policyFields ?? {};
  const fields = [...TOOL_POLICY_FIELDS, 'repeatable', ...Object.keys(ownFields)];
  const treatment = (name: string): ToolTreatment =>
    exclude.has(name) ? 'exclude' : unsafe.has(name) ? 'unsafe' : 'wrap';
  const ownValues = new Map<string, Map<string, unknown>>();
  for (const [name, given] of Object.entries(policies)) {
    if (given === undefined) continue;
    if (given === null || typeof given !== 'object') {
      throw new ConfigurationError({
        option: `policies.${name}`,
        message: `${caller}: the policy of ${name} must be an object, e.g. { ttl: 3600000 }.`,
      });
    }
    const { repeatable, ...policy } = given as ToolPolicy<never, never> & { repeatable?: unknown };
    const misspelt = unknownOption(policy, fields);
    if (misspelt !== undefined) {
      throw new ConfigurationError({
        option: `policies.${name}.${misspelt.name}`,
        message: `${caller}: policies.${name}: ${misspelt.message}. The fields are ${fields.join(', ')}.`,
      });
    }
    for (const [field, check] of Object.entries(ownFields)) {
      const value = (policy as Record<string, unknown>)[field];
      delete (policy as Record<string, unknown>)[field];
      if (value === undefined) continue;
      const checked = check(value, { toolName: name, treatment: treatment(name), caller });
      if (!ownValues.has(name)) ownValues.set(name, new Map());
      ownValues.get(name)?.set(field, checked);
    }
    const repeat = repeatsOf(repeatable, name, caller);
    if (repeat !== undefined) {
      const refuse = (why: string) =>
        new ConfigurationError({
          option: `policies.${name}.repeatable`,
          message: `${caller}: policies.${name}.repeatable: ${why}`,
        });
      if (spec.repeatable !== true) {
        throw refuse(
          `${caller} does not support deliberate repeats; leave repeatable out (two calls with the same arguments in one turn are one call).`,
        );
      }
      if (policy.businessKey !== undefined) {
        throw refuse(
          'a tool with a businessKey is one operation per business key, so a repeat of it is always a retry. Leave out businessKey or repeatable.',
        );
      }
      if (exclude.has(name) || unsafe.has(name)) {
        throw refuse(
          `${name} is in ${exclude.has(name) ? 'exclude' : 'unsafe'}, so every call of it runs anyway. Leave out repeatable.`,
        );
      }
      repeats.set(name, repeat);
    }
    executorPolicies[name] = policy;
    try {
      executor.checkPolicy(policy);
    } catch (error) {
      if (!InvalidInputError.isInstance(error)) throw error;
      throw new ConfigurationError({
        option: `policies.${name}.${error.field}`,
        cause: error,
        message: `${caller}: policies.${name}: ${error.message}`,
      });
    }
  }
  if (spec.toolNames !== undefined) {
    for (const name of spec.toolNames) checkToolName(name, caller);
    const known = new Set([...spec.toolNames, ...(spec.otherToolNames ?? [])]);
    for (const [field, listed] of [
      ['policies', Object.keys(policies)],
      ['exclude', [...exclude]],
      ['unsafe', [...unsafe]],
    ] as const) {
      const strangers = listed.filter((n) => !known.has(n));
      if (strangers.length > 0) {
        throw new ConfigurationError({
          option: field,
          message: `${caller}: ${field} names ${strangers.map((n) => `"${n}"`).join(', ')}, but there is no such tool. The tools are ${[...known].join(', ')}.`,
        });
      }
    }
  }
  const turns = createTurnResolver(o, spec, caller);
  const policyOf = (name: string): ToolPolicy<never, never> | undefined =>
    Object.hasOwn(executorPolicies, name) ? executorPolicies[name] : undefined;
  if (!turns.possible && spec.toolNames !== undefined) {
    const needTurn = spec.toolNames.filter(
      (name) => treatment(name) === 'wrap' && policyOf(name)?.businessKey === undefined,
    );
    if (needTurn.length > 0) {
      throw new ConfigurationError({
        option: 'conversationId',
        message: `${caller}: nothing tells one conversation from another, so ${needTurn.join(', ')} would replay one user's call to another user who sends the same words. Pass ${spec.howTo}. A tool whose identity is in its arguments (an email, an order id) can use policies: { name: { businessKey } } instead.`,
      });
    }
  }
  const scopeOf = (call: Info) => (typeof o.scope === 'function' ? o.scope(call) : o.scope);
  return {
    executor,
    markFresh: o.markFresh === true,
    treatment,
    policy: policyOf,
    repeats: (name) => repeats.get(name),
    policyField: (name, field) => ownValues.get(name)?.get(field),
    identify(call, toolName) {
      const needed = policyOf(toolName)?.businessKey === undefined;
      const turn = turns.resolve(call, needed);
      return { turnId: turn?.turnId, scope: scopeOf(call), turn };
    },
    scopeOf,
  };
}
