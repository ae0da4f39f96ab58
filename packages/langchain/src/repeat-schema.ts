/**
 * The schema of a repeatable LangChain tool (deliberate repeats, see the adapter kit's
 * `repeats.ts`): the tool's own schema with the optional repeat argument. LangChain's `invoke`
 * parses the input with the tool's schema before `_call` (a zod object drops unknown keys, a JSON
 * schema is validated), and binds the same schema for the model: so the schema itself is
 * extended, as the MCP adapter does for the 1.x SDK. A zod object is extended with zod of the
 * same major version (`zod/v4-mini` or `zod/v3`, both shipped by zod 3.25+ and 4, which
 * `@langchain/core` depends on); a JSON schema gets the property.
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
const DESCRIPTION = repeatProperty().description as string;

function refuse(toolName: string, caller: string, why: string) {
  return new ConfigurationError({
    option: `policies.${toolName}.repeatable`,
    message: `${caller}: repeatable needs the schema of ${toolName} to ${why}.`,
  });
}

/** zod (3.25+ or 4) of the major version of the tool's schema, as the app installed it. */
function zodOf(v4: boolean, toolName: string, caller: string): Record<string, never> {
  try {
    return require(v4 ? 'zod/v4-mini' : 'zod/v3');
  } catch {
    throw refuse(toolName, caller, 'be a zod object, with zod 3.25+ or 4 installed');
  }
}

/**
 * The schema a repeatable tool should hold: its own (a zod object, or a JSON schema of an object)
 * with the optional repeat argument.
 *
 * @throws ConfigurationError when the schema has a property of that name already, or is not an
 *   object schema the adapter can extend
 */
export function withRepeatArgument(
  schema: unknown,
  toolName: string,
  repeats: Repeats,
  caller: string,
): unknown {
  if (schemaHasProperty(schema, repeats.argument) === true) {
    throw repeatClash(toolName, repeats, caller);
  }
  const s = schema as
    | { _zod?: { def?: { type?: string } }; _def?: { typeName?: string }; extend?: unknown }
    | undefined;
  if (s?._zod !== undefined) {
    if (s._zod.def?.type !== 'object') throw refuse(toolName, caller, 'be a zod object');
    // biome-ignore lint/suspicious/noExplicitAny: zod's API, loaded at run time
    const z = zodOf(true, toolName, caller) as any;
    const repeat = z.optional(z.int().check(z.minimum(1), z.describe(DESCRIPTION)));
    return z.extend(schema, { [repeats.argument]: repeat });
  }
  if (s?._def !== undefined) {
    if (s._def.typeName !== 'ZodObject' || typeof s.extend !== 'function') {
      throw refuse(toolName, caller, 'be a zod object');
    }
    // biome-ignore lint/suspicious/noExplicitAny: zod's API, loaded at run time
    const z = zodOf(false, toolName, caller) as any;
    const repeat = z.number().int().min(1).optional().describe(DESCRIPTION);
    return (s.extend as (shape: object) => unknown)({ [repeats.argument]: repeat });
  }
  return withRepeatProperty(schema, toolName, repeats, caller);
}
