/**
 * Deliberate repeats (design section 11, docs/design.md): within one turn two calls of a tool
 * with the same arguments share one key (the model's retry: the first result is replayed). A
 * tool whose policy says `repeatable` gets an optional integer argument (default `repeat`) in the
 * schema the model sees, explained in its description: `repeat: 2` (3, ...) asks for the action
 * again on purpose. The argument is part of the key's args (a repeat gets its own key; a retry of
 * `repeat: 2` replays repeat 2); the tool never sees it. Off by default: without the option
 * nothing changes (no schema change, the same keys).
 */
import { ConfigurationError } from '../errors/index.js';
import { withRetryNote } from '../model-output.js';
import { invalidArgumentsText } from './calls.js';

/** The `repeatable` option of a tool policy. */
export type RepeatableOption =
  | boolean
  | {
      /**
       * The name of the argument the model passes to repeat the call on purpose.
       * @default 'repeat'
       */
      argument?: string;
    };

/** The policy fields the adapter kit reads itself (the executor never sees them). */
export interface RepeatablePolicy {
  /**
   * Let the model do the same call again on purpose within one turn: the tool's schema gets an
   * optional integer argument (`repeat`, or the name you give), its description says how to use
   * it, and `repeat: 2` (3, ...) is a new call with its own key (a retry of it replays it). The
   * tool never sees the argument. Not with `businessKey`, `exclude` or `unsafe`.
   * @default false (two calls with the same arguments in one turn are one call)
   */
  repeatable?: RepeatableOption | undefined;
}

/** How a repeatable tool takes its repeat: the argument's name. */
export interface Repeats {
  readonly argument: string;
}

/** The default name of the repeat argument. */
export const DEFAULT_REPEAT_ARGUMENT = 'repeat';

/** An argument name a JSON schema and every provider accept. */
const ARGUMENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * The repeats of one tool's policy (`repeatable`), checked when the tools are wrapped.
 * @throws ConfigurationError for a value that is not `true`, `false` or `{ argument }`
 */
export function repeatsOf(value: unknown, toolName: string, caller: string): Repeats | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return { argument: DEFAULT_REPEAT_ARGUMENT };
  const option = `policies.${toolName}.repeatable`;
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const { argument = DEFAULT_REPEAT_ARGUMENT, ...rest } = value as { argument?: unknown };
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) {
      throw new ConfigurationError({
        option: `${option}.${extra}`,
        message: `${caller}: ${option} has an unknown field "${extra}"; it takes { argument }, e.g. { argument: 'repeat' }.`,
      });
    }
    if (typeof argument === 'string' && ARGUMENT.test(argument)) return { argument };
    throw new ConfigurationError({
      option: `${option}.argument`,
      message: `${caller}: ${option}.argument must be an argument name (letters, digits, "_"; not starting with a digit), e.g. 'repeat', got ${JSON.stringify(argument) ?? String(argument)}.`,
    });
  }
  throw new ConfigurationError({
    option,
    message: `${caller}: ${option} must be true, false or { argument: 'repeat' }.`,
  });
}

/** The sentence of a repeatable tool's description that says how to repeat it on purpose. */
export function repeatNote(argument: string): string {
  return `Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass ${argument}: 2 (3, ...).`;
}

/** The description of a repeatable tool: the retry-safety note, then how to repeat on purpose. */
export function withRepeatNote(description: string | undefined, repeats: Repeats): string {
  const base = withRetryNote(description, true);
  const note = repeatNote(repeats.argument);
  return base.includes(note) ? base : `${base} ${note}`;
}

/**
 * The JSON schema of the repeat argument; `nullable` for a strict schema (OpenAI `strict: true`
 * wants every property required: the model passes null to leave it out).
 */
export function repeatProperty(nullable = false): Record<string, unknown> {
  return {
    type: nullable ? ['integer', 'null'] : 'integer',
    minimum: 1,
    description:
      'Only to do this same call again on purpose in this turn: 2 the second time, 3 the third... Leave it out otherwise.',
  };
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null &&
  typeof value === 'object' &&
  !Array.isArray(value) &&
  (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null);

/** The refusal of a tool whose own schema has the repeat argument already. */
export function repeatClash(toolName: string, repeats: Repeats, caller: string) {
  return new ConfigurationError({
    option: `policies.${toolName}.repeatable`,
    message: `${caller}: the schema of ${toolName} has its own "${repeats.argument}" property, so it cannot take the repeat argument of the same name. Name the repeat argument otherwise: policies: { ${toolName}: { repeatable: { argument: 'repeat_count' } } }.`,
  });
}

/**
 * A copy of a tool's JSON schema (an object schema, or none: a tool without parameters) with the
 * repeat argument among its properties, not required; with `strict` (a provider's strict mode,
 * where every property is required) required and nullable.
 *
 * @throws ConfigurationError when the schema has a property of that name already, or does not
 *   describe an object
 */
export function withRepeatProperty(
  schema: unknown,
  toolName: string,
  repeats: Repeats,
  caller: string,
  strict = false,
): Record<string, unknown> {
  const given = schema ?? { type: 'object', properties: {} };
  if (!isPlainObject(given) || (given.type !== undefined && given.type !== 'object')) {
    throw new ConfigurationError({
      option: `policies.${toolName}.repeatable`,
      message: `${caller}: repeatable needs the parameters of ${toolName} to be a JSON schema of an object ({ type: 'object', properties }).`,
    });
  }
  const properties = given.properties ?? {};
  if (!isPlainObject(properties)) {
    throw new ConfigurationError({
      option: `policies.${toolName}.repeatable`,
      message: `${caller}: the properties of ${toolName}'s schema must be an object.`,
    });
  }
  if (Object.hasOwn(properties, repeats.argument)) throw repeatClash(toolName, repeats, caller);
  const required = Array.isArray(given.required) ? given.required : [];
  return {
    ...given,
    type: 'object',
    properties: { ...properties, [repeats.argument]: repeatProperty(strict) },
    ...(strict ? { required: [...required, repeats.argument] } : {}),
  };
}

/**
 * Whether a tool's own schema (a Standard Schema with `~standard.jsonSchema`, e.g. zod 4.2+, or
 * a zod object's shape) has a property named like the repeat argument; undefined when it cannot
 * be told.
 */
export function schemaHasProperty(schema: unknown, name: string): boolean | undefined {
  if (schema === null || (typeof schema !== 'object' && typeof schema !== 'function')) {
    return undefined;
  }
  const s = schema as {
    '~standard'?: { jsonSchema?: { input?: (options: { target: string }) => unknown } };
    shape?: unknown;
    _zod?: { def?: { shape?: unknown } };
  };
  const shape = s._zod?.def?.shape ?? s.shape;
  if (isPlainObject(shape)) return Object.hasOwn(shape, name);
  try {
    const json = s['~standard']?.jsonSchema?.input?.({ target: 'draft-2020-12' }) as
      | { properties?: unknown }
      | undefined;
    if (isPlainObject(json?.properties)) return Object.hasOwn(json.properties, name);
  } catch {
    // a schema that cannot be converted: not known
  }
  // A compiled validator that keeps its JSON Schema (ajv's `validate.schema`).
  const compiled = (schema as { schema?: { properties?: unknown } }).schema;
  if (isPlainObject(compiled?.properties)) return Object.hasOwn(compiled.properties, name);
  return undefined;
}

/** The model's arguments of a repeatable call, split: the tool's, and the repeat. */
export type TakenRepeat = { args: unknown; repeat: number } | { error: string };

/**
 * The repeat argument taken out of the model's arguments (the tool never sees it): its value
 * (1 when left out), or the model's error text for a value that is not a whole number from 1 up
 * (nothing runs).
 */
export function takeRepeat(args: unknown, toolName: string, repeats: Repeats): TakenRepeat {
  const { argument } = repeats;
  if (!isPlainObject(args) || !Object.hasOwn(args, argument)) return { args, repeat: 1 };
  const { [argument]: value, ...rest } = args;
  if (value === undefined || value === null) return { args: rest, repeat: 1 };
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1) {
    return { args: rest, repeat: value };
  }
  return {
    error: invalidArgumentsText(
      `The argument ${argument} of ${toolName} must be a whole number from 1 up (2 to do the same call a second time on purpose in this turn, 3 a third...), got ${JSON.stringify(value) ?? String(value)}. Nothing ran. Leave ${argument} out for a retry, or call ${toolName} again with ${argument}: 2.`,
    ),
  };
}

/**
 * The args a call's key is made of: the tool's own, with the repeat when it is 2 or more. The
 * first call (`repeat` left out or 1) keeps the key it has without the option.
 */
export function keyArgs(args: unknown, repeat: number, repeats: Repeats): unknown {
  if (repeat <= 1) return args;
  return isPlainObject(args)
    ? { ...args, [repeats.argument]: repeat }
    : { args, [repeats.argument]: repeat };
}
