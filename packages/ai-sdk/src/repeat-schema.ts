/**
 * The input schema of a repeatable tool (deliberate repeats, see the adapter kit's `repeats.ts`):
 * the tool's own `inputSchema` (zod, a Standard Schema, `jsonSchema()`) with the optional repeat
 * argument in the JSON schema the model sees. The AI SDK validates the model's input with the
 * tool's schema and hands its output to `execute`: the repeat argument is taken out before the
 * tool's schema sees the input (a strict zod object would refuse it, a plain one drop it) and put
 * back as given, for the wrapper to check and take out again before the tool runs.
 */
import {
  type Repeats,
  repeatClash,
  schemaHasProperty,
  withRepeatProperty,
} from '@idempotent-tools/core/adapter-kit';
import { asSchema, type FlexibleSchema, type JSONSchema7, jsonSchema, type Tool } from 'ai';

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The input without the repeat argument (for the tool's own callbacks). */
export function withoutRepeat(input: unknown, repeats: Repeats | undefined): unknown {
  if (repeats === undefined || !isObject(input) || !Object.hasOwn(input, repeats.argument)) {
    return input;
  }
  const { [repeats.argument]: _, ...rest } = input;
  return rest;
}

/**
 * The `inputSchema` of a repeatable tool: its JSON schema with the repeat argument (required and
 * nullable for a `strict` tool), its validation that of the tool's own schema.
 *
 * @throws ConfigurationError when the tool's schema has a property of that name already, or does
 *   not describe an object
 */
export function withRepeatInput(
  tool: Tool,
  toolName: string,
  repeats: Repeats,
  caller: string,
): FlexibleSchema {
  const given = tool.inputSchema as FlexibleSchema | undefined;
  if (given !== undefined && schemaHasProperty(given, repeats.argument) === true) {
    throw repeatClash(toolName, repeats, caller);
  }
  const own = asSchema(given);
  const strict = (tool as { strict?: boolean }).strict === true;
  const extend = (json: JSONSchema7) =>
    withRepeatProperty(json, toolName, repeats, caller, strict) as JSONSchema7;
  const json = own.jsonSchema;
  // Extended now when it is at hand (a clash with a JSON schema's own property fails at wrap time).
  const extended =
    typeof (json as PromiseLike<JSONSchema7>).then === 'function'
      ? Promise.resolve(json).then(extend)
      : extend(json as JSONSchema7);
  const { argument } = repeats;
  return jsonSchema(extended, {
    async validate(value) {
      if (!isObject(value) || !Object.hasOwn(value, argument)) {
        return own.validate === undefined ? { success: true, value } : own.validate(value);
      }
      const { [argument]: repeat, ...rest } = value;
      const result =
        own.validate === undefined
          ? { success: true as const, value: rest }
          : await own.validate(rest);
      if (!result.success || !isObject(result.value)) return result;
      return { success: true, value: { ...result.value, [argument]: repeat } };
    },
  });
}
