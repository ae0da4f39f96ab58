/**
 * The input schema of a repeatable Mastra tool (deliberate repeats, see the adapter kit's
 * `repeats.ts`). `createTool` keeps its `inputSchema` (zod, a Standard Schema, a JSON schema) as
 * a Standard Schema with JSON; Mastra's agent makes the JSON schema the model sees of it (through
 * its provider compat layers) and validates the model's input with it before the tool's
 * `execute`. So the wrapper's schema is a Standard Schema of its own: the tool's JSON schema with
 * the optional repeat argument, and the tool's validation of the input without it (a strict
 * object would refuse it), put back as given for the wrapped `execute` to check and take out.
 */
import { type Repeats, withRepeatProperty } from '@idempotent-tools/core/adapter-kit';
import {
  type StandardSchemaWithJSON,
  standardSchemaToJSONSchema,
  toStandardSchema,
} from '@mastra/core/schema';
import { validateToolInput } from '@mastra/core/tools';

type Result = { value: unknown; issues?: undefined } | { issues: readonly unknown[] };
type JsonOptions = { target: string; libraryOptions?: Record<string, unknown> };
type Schema = {
  '~standard': {
    version: 1;
    vendor: string;
    validate(value: unknown): Result | Promise<Result>;
    jsonSchema: { input(o: JsonOptions): unknown; output(o: JsonOptions): unknown };
  };
};

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
 * nullable for a `strict` tool), its validation that of the tool's own schema (with Mastra's
 * repairs of model input: nullish fields, stringified JSON).
 *
 * @throws ConfigurationError when the tool's schema has a property of that name already, or does
 *   not describe an object
 */
export function withRepeatInput(
  own: unknown,
  toolName: string,
  repeats: Repeats,
  caller: string,
  strict: boolean,
): StandardSchemaWithJSON {
  const schema = (own == null ? undefined : toStandardSchema(own as never)) as
    | (Schema & StandardSchemaWithJSON)
    | undefined;
  const extend = (json: unknown) => withRepeatProperty(json, toolName, repeats, caller, strict);
  // At wrap time: a clash with the tool's own property, or a schema that is not an object.
  extend(schema === undefined ? undefined : standardSchemaToJSONSchema(schema, { io: 'input' }));
  const check = (value: unknown): Result | Promise<Result> => {
    if (schema === undefined) return { value };
    const checked = validateToolInput(schema, value, toolName);
    return checked.error === undefined
      ? { value: checked.data }
      : schema['~standard'].validate(value); // its issues, as the tool's schema words them
  };
  const { argument } = repeats;
  const wrapper: Schema = {
    '~standard': {
      version: 1,
      vendor: 'idempotent-tools',
      validate(value) {
        if (!isObject(value) || !Object.hasOwn(value, argument)) return check(value);
        const { [argument]: repeat, ...rest } = value;
        const put = (result: Result): Result =>
          result.issues !== undefined || !isObject(result.value)
            ? result
            : { value: { ...result.value, [argument]: repeat } };
        const result = check(rest);
        return result instanceof Promise ? result.then(put) : put(result);
      },
      jsonSchema: {
        input: (options) => extend(schema?.['~standard'].jsonSchema.input(options)),
        output: (options) => extend(schema?.['~standard'].jsonSchema.output(options)),
      },
    },
  };
  return wrapper as unknown as StandardSchemaWithJSON;
}

type Gate = (input: unknown, ...rest: unknown[]) => unknown;

/** A gate of the tool's own (`requireApproval`, `needsApprovalFn`), given the input without it. */
export function gateWithoutRepeat(gate: unknown, repeats: Repeats | undefined): unknown {
  if (repeats === undefined || typeof gate !== 'function') return gate;
  return (input: unknown, ...rest: unknown[]) =>
    (gate as Gate)(withoutRepeat(input, repeats), ...rest);
}

/**
 * The fields a repeatable tool's copy gets: the `inputSchema` with the repeat argument, and the
 * tool's callbacks of the input (Mastra hands them the model's input) without it.
 */
export function repeatableFields(
  tool: {
    inputSchema?: unknown;
    strict?: unknown;
    requireApproval?: unknown;
    needsApprovalFn?: unknown;
    onInputAvailable?: ((options: never) => unknown) | undefined;
  },
  toolName: string,
  repeats: Repeats,
  caller: string,
): Record<string, unknown> {
  const strict = tool.strict === true;
  const onInputAvailable = tool.onInputAvailable;
  return {
    inputSchema: withRepeatInput(tool.inputSchema, toolName, repeats, caller, strict),
    requireApproval: gateWithoutRepeat(tool.requireApproval, repeats),
    needsApprovalFn: gateWithoutRepeat(tool.needsApprovalFn, repeats),
    ...(onInputAvailable === undefined
      ? {}
      : {
          onInputAvailable: (options: { input: unknown }) =>
            onInputAvailable({ ...options, input: withoutRepeat(options.input, repeats) } as never),
        }),
  };
}
