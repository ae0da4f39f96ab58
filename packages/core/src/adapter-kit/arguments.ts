/**
 * The model's arguments of a call, as JSON text: parsed and checked against the tool's schema
 * before anything runs, with the text that tells the model what to fix.
 */
import { invalidArgumentsText } from './calls.js';
import { type Repeats, takeRepeat } from './repeats.js';

/** A Standard Schema (zod >= 3.24, valibot, arktype...): https://standardschema.dev */
export interface StandardSchema<Output = unknown> {
  readonly '~standard': {
    validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
  };
}
type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string;
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
      }>;
    };

/** A JSON-schema validator in the ajv style: true when valid, else false with `errors`. */
export type ValidateFunction = ((value: unknown) => boolean) & {
  errors?: ReadonlyArray<{ instancePath?: string; message?: string }> | null;
};

/**
 * A parse function (returns the args, throws on bad input: a zod schema's `parse`, a tool's own
 * `parse`) as a Standard Schema, for `parseArguments`: a thrown error's `issues`, else its text.
 */
export const parseSchema = (parse: (value: unknown) => unknown): StandardSchema => ({
  '~standard': {
    validate(value) {
      try {
        return { value: parse(value) };
      } catch (error) {
        const issues = (error as { issues?: unknown }).issues;
        return { issues: Array.isArray(issues) ? issues : [{ message: String(error) }] };
      }
    },
  },
});

const issuesText = (
  issues: ReadonlyArray<{ message?: string; path?: unknown; instancePath?: string }>,
) =>
  issues
    .map((i) => {
      const path = Array.isArray(i.path)
        ? i.path.map((p) => (typeof p === 'object' ? String(p.key) : String(p))).join('.')
        : (i.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
      return path === '' ? i.message : `${path}: ${i.message}`;
    })
    .join('; ');

/**
 * The model's arguments of a call (JSON text, or a value the provider already parsed: it goes
 * through JSON too), parsed and checked against the tool's schema (a Standard Schema's output,
 * defaults applied, becomes the args), or the model's error text saying what to fix (nothing ran).
 * With `repeats` (a repeatable tool), the repeat argument is taken out before the schema sees the
 * arguments, and comes back as `repeat` (1 when left out).
 */
export async function parseArguments(
  toolName: string,
  given: unknown,
  schema?: StandardSchema | ValidateFunction,
  repeats?: Repeats,
): Promise<{ args: unknown; repeat?: number } | { error: string }> {
  const text = typeof given === 'string' ? given : (JSON.stringify(given ?? {}) ?? '{}');
  let args: unknown;
  try {
    args = JSON.parse(text === '' ? '{}' : text);
  } catch (error) {
    return {
      error: invalidArgumentsText(
        `The arguments of ${toolName} are not valid JSON (${(error as Error).message}). Nothing ran. Call ${toolName} again with a JSON object that matches its parameters.`,
      ),
    };
  }
  let repeat: number | undefined;
  if (repeats !== undefined) {
    const taken = takeRepeat(args, toolName, repeats);
    if ('error' in taken) return taken;
    ({ args, repeat } = taken);
  }
  let problem: string | undefined;
  try {
    if (typeof schema === 'function') {
      if (!schema(args)) problem = issuesText(schema.errors ?? []) || 'invalid';
    } else if (schema !== undefined) {
      const result = await schema['~standard'].validate(args);
      if (result.issues === undefined) args = result.value;
      else problem = issuesText(result.issues);
    }
  } catch (error) {
    problem = (error as Error).message;
  }
  if (problem === undefined) return repeat === undefined ? { args } : { args, repeat };
  return {
    error: invalidArgumentsText(
      `The arguments of ${toolName} do not match its parameters (${problem}). Nothing ran. Call ${toolName} again with corrected arguments.`,
    ),
  };
}
