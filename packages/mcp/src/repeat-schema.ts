/**
 * The input schema of a repeatable MCP tool (deliberate repeats, see the adapter kit's
 * `repeats.ts`): the tool's own schema with the optional repeat argument, as each SDK takes it.
 * - 1.x (`@modelcontextprotocol/sdk`) takes zod only (3.25+ or 4) and parses the arguments with
 *   it (unknown keys are stripped): the object is extended with zod of the same major version,
 *   loaded from `zod/v4-mini` or `zod/v3` (both ship with zod 3.25+ and 4, which 1.x depends on).
 * - 2.x (`@modelcontextprotocol/server`) takes any Standard Schema with JSON Schema: the schema
 *   is wrapped; the repeat argument is checked apart and the rest goes to the tool's schema.
 */
import { createRequire } from 'node:module';
import { ConfigurationError } from '@idempotent-tools/core';
import {
  type Repeats,
  repeatClash,
  repeatProperty,
  schemaHasProperty,
  withRepeatProperty,
} from '@idempotent-tools/core/adapter-kit';

const require = createRequire(import.meta.url);

type StandardResult =
  | { value: unknown; issues?: undefined }
  | { issues: ReadonlyArray<{ message: string; path?: ReadonlyArray<PropertyKey> }> };
interface StandardWithJson {
  '~standard': {
    version: 1;
    vendor: string;
    validate: (value: unknown) => StandardResult | Promise<StandardResult>;
    jsonSchema?: {
      input: (options: { target: string }) => Record<string, unknown>;
      output: (options: { target: string }) => Record<string, unknown>;
    };
  };
}

const DESCRIPTION = repeatProperty().description as string;

function refuse(toolName: string, caller: string, why: string) {
  return new ConfigurationError({
    option: `policies.${toolName}.repeatable`,
    message: `${caller}: repeatable needs the inputSchema of ${toolName} to ${why}.`,
  });
}

/** zod (3.25+ or 4) of the major version of `schema`, as the app installed it. */
function zodOf(v4: boolean, toolName: string, caller: string): Record<string, never> {
  try {
    return require(v4 ? 'zod/v4-mini' : 'zod/v3');
  } catch {
    throw refuse(toolName, caller, 'be a zod object, with zod 3.25+ or 4 installed');
  }
}

/** 1.x: the zod object (or none: a tool without arguments) extended with the repeat argument. */
function zodWithRepeat(schema: unknown, toolName: string, repeats: Repeats, caller: string) {
  const s = schema as
    | { _zod?: { def?: { type?: string } }; _def?: { typeName?: string }; extend?: unknown }
    | undefined;
  const v4 = schema === undefined || s?._zod !== undefined;
  // biome-ignore lint/suspicious/noExplicitAny: either zod's API, loaded at run time
  const z = zodOf(v4, toolName, caller) as any;
  if (v4) {
    const repeat = z.optional(z.int().check(z.minimum(1), z.describe(DESCRIPTION)));
    if (schema === undefined) return z.object({ [repeats.argument]: repeat });
    if (s?._zod?.def?.type !== 'object') throw refuse(toolName, caller, 'be a zod object');
    return z.extend(schema, { [repeats.argument]: repeat });
  }
  if (s?._def?.typeName !== 'ZodObject' || typeof s.extend !== 'function') {
    throw refuse(toolName, caller, 'be a zod object');
  }
  const repeat = z.number().int().min(1).optional().describe(DESCRIPTION);
  return (s.extend as (shape: object) => unknown)({ [repeats.argument]: repeat });
}

/** 2.x: the Standard Schema (or none) wrapped to take the repeat argument. */
function standardWithRepeat(
  schema: unknown,
  toolName: string,
  repeats: Repeats,
  caller: string,
): StandardWithJson {
  const own = schema as StandardWithJson | undefined;
  if (own !== undefined && typeof own['~standard']?.jsonSchema?.input !== 'function') {
    throw refuse(
      toolName,
      caller,
      'be a Standard Schema with JSON Schema (zod 4.2+, fromJsonSchema)',
    );
  }
  const { argument } = repeats;
  const json = (io: 'input' | 'output') => (options: { target: string }) =>
    withRepeatProperty(own?.['~standard'].jsonSchema?.[io](options), toolName, repeats, caller);
  return {
    '~standard': {
      version: 1,
      vendor: 'idempotent-tools',
      async validate(value) {
        const given = (value ?? {}) as Record<string, unknown>;
        if (typeof given !== 'object' || Array.isArray(given)) {
          return own === undefined ? { value: given } : own['~standard'].validate(value);
        }
        const { [argument]: repeat, ...rest } = given;
        const inner = own === undefined ? { value: rest } : await own['~standard'].validate(rest);
        if (inner.issues !== undefined) return inner;
        if (repeat === undefined) return inner;
        if (typeof repeat !== 'number' || !Number.isSafeInteger(repeat) || repeat < 1) {
          const message = `${argument} must be a whole number from 1 up, e.g. 2`;
          return { issues: [{ message, path: [argument] }] };
        }
        return { value: { ...(inner.value as object), [argument]: repeat } };
      },
      jsonSchema: { input: json('input'), output: json('output') },
    },
  };
}

/**
 * The input schema the SDK should hold for a repeatable tool: the tool's own (`schema`, or
 * undefined for a tool without arguments) with the repeat argument.
 *
 * @throws ConfigurationError when the tool's schema has a property of that name already, or is
 *   not an object schema the adapter can extend
 */
export function withRepeatArgument(
  schema: unknown,
  modern: boolean,
  toolName: string,
  repeats: Repeats,
  caller: string,
): unknown {
  if (schema !== undefined && schemaHasProperty(schema, repeats.argument) === true) {
    throw repeatClash(toolName, repeats, caller);
  }
  return modern
    ? standardWithRepeat(schema, toolName, repeats, caller)
    : zodWithRepeat(schema, toolName, repeats, caller);
}
