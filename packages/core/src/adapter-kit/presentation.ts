/**
 * How a wrapped tool is presented to the model, for every adapter (docs/design.md, "Deliberate
 * repeats"): the description note (retry-safe; not safe to retry; how to repeat on purpose) and,
 * for a repeatable tool, the repeat argument in the schema the model sees, in whichever schema
 * the framework holds (JSON Schema, a Standard Schema with JSON Schema, a zod 3 or 4 object),
 * and taken out of the input before the tool's own callbacks see it. One object per tool
 * (`presentTool`): adapters never choose the note or touch the repeat argument themselves.
 */
import { ConfigurationError } from '../errors/index.js';
import { withRetryNote } from '../model-output.js';
import { builtinModule } from '../runtime/index.js';
import type { Adapter, ToolTreatment } from './adapter.js';
import {
  type Repeats,
  repeatClash,
  repeatProperty,
  schemaHasProperty,
  withRepeatNote,
  withRepeatProperty,
} from './repeats.js';

type Json = Record<string, unknown>;
type Issues = ReadonlyArray<{ message: string; path?: ReadonlyArray<PropertyKey> }>;
type StandardResult = { value: unknown; issues?: undefined } | { issues: Issues };
type JsonOptions = { target: string; libraryOptions?: Record<string, unknown> };

/** A Standard Schema with JSON Schema (https://standardschema.dev), as frameworks take one. */
export interface StandardJsonSchema {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    validate(value: unknown): StandardResult | Promise<StandardResult>;
    readonly jsonSchema: {
      input(options: JsonOptions): Json;
      output(options: JsonOptions): Json;
    };
  };
}

/** What a tool's presentation needs to extend a Standard Schema. */
export interface StandardSchemaOptions {
  /** A provider's strict mode (every property required): the argument is required and nullable. */
  strict?: boolean;
  /**
   * How the input without the repeat argument is validated (a framework's own validation, with
   * its repairs of model input). @default the given schema's `~standard.validate`
   */
  validate?: (value: unknown) => StandardResult | Promise<StandardResult>;
}

/** One wrapped tool, as the model sees it (see the module's comment). */
export interface ToolPresentation {
  readonly toolName: string;
  readonly treatment: ToolTreatment;
  /** How the tool takes a deliberate repeat, or undefined: it does not. */
  readonly repeats: Repeats | undefined;
  /**
   * The description the model reads: an excluded tool's as it is; the retry note (for an
   * unsafe tool the "not safe to retry" note), and for a repeatable tool how to repeat it.
   */
  describe(own: string | undefined): string | undefined;
  /** A JSON schema (or none: no parameters) with the repeat argument; as it is when not repeatable. */
  jsonSchema<S>(schema: S, strict?: boolean): S;
  /**
   * A Standard Schema with JSON Schema (or none) that takes the repeat argument: the model sees
   * the tool's JSON schema with it; the input without it is validated as the tool's schema says,
   * the argument (checked by the pipeline, `prepareCall`) put back for the wrapper. As it is when
   * not repeatable.
   */
  standardSchema<S>(schema: S, options?: StandardSchemaOptions): S | StandardJsonSchema;
  /**
   * A zod object (zod 3.25+ or 4; or none: no parameters) extended with the repeat argument,
   * with zod of the same major version loaded by `load` (the adapter's `require`: zod is its
   * framework's dependency). As it is when not repeatable.
   */
  zodSchema<S>(schema: S, load: (specifier: string) => unknown): S;
  /**
   * An OpenAPI-style object schema (or none), as Gemini's `parameters` (types in capitals:
   * `type: 'OBJECT'`), with the repeat argument (`type: 'INTEGER'`). As it is when not repeatable.
   */
  openApiSchema<S>(schema: S): S;
  /** The model's input without the repeat argument (for the tool's own callbacks and gates). */
  strip<I>(input: I): I;
  /**
   * A callback of the tool's own (a gate such as `needsApproval`) given the model's input, its
   * argument at `at`, without the repeat argument; a value that is no function as it is.
   */
  stripped<F>(callback: F, at?: number): F;
}

const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

function refuse(toolName: string, caller: string, why: string) {
  return new ConfigurationError({
    option: `policies.${toolName}.repeatable`,
    message: `${caller}: repeatable needs the schema of ${toolName} to ${why}.`,
  });
}

const DESCRIPTION = repeatProperty().description as string;

/**
 * The presentation of one tool of an adapter.
 * @throws ConfigurationError (from the schema methods) when a repeatable tool's schema has its own
 *   property of the repeat argument's name, or is not an object schema
 */
export function presentTool(
  adapter: Adapter<never>,
  toolName: string,
  caller: string,
): ToolPresentation {
  const treatment = adapter.treatment(toolName);
  const repeats = treatment === 'wrap' ? adapter.repeats(toolName) : undefined;
  const clash = (schema: unknown) => {
    if (repeats !== undefined && schemaHasProperty(schema, repeats.argument) === true) {
      throw repeatClash(toolName, repeats, caller);
    }
  };
  const strip = <I>(input: I): I => {
    if (repeats === undefined || !isObject(input) || !Object.hasOwn(input, repeats.argument)) {
      return input;
    }
    const { [repeats.argument]: _, ...rest } = input;
    return rest as I;
  };
  return {
    toolName,
    treatment,
    repeats,
    describe(own) {
      if (treatment === 'exclude') return own;
      if (treatment === 'unsafe') return withRetryNote(own, false);
      return repeats === undefined ? withRetryNote(own, true) : withRepeatNote(own, repeats);
    },
    jsonSchema(schema, strict = false) {
      if (repeats === undefined) return schema;
      return withRepeatProperty(schema, toolName, repeats, caller, strict) as typeof schema;
    },
    standardSchema(schema, options = {}) {
      if (repeats === undefined) return schema;
      clash(schema);
      const own = schema as unknown as Partial<StandardJsonSchema> | undefined;
      const standard = own?.['~standard'];
      if (own != null && typeof standard?.jsonSchema?.input !== 'function') {
        throw refuse(toolName, caller, 'be a Standard Schema with JSON Schema (zod 4.2+, ...)');
      }
      const extend = (json: unknown) =>
        withRepeatProperty(json, toolName, repeats, caller, options.strict === true);
      // At wrap time: a clash with the schema's own property, or a schema that is no object.
      extend(standard?.jsonSchema.input({ target: 'draft-2020-12' }));
      const check =
        options.validate ??
        ((value: unknown): StandardResult | Promise<StandardResult> =>
          standard === undefined ? { value } : standard.validate(value));
      const { argument } = repeats;
      return {
        '~standard': {
          version: 1,
          vendor: 'idempotent-tools',
          validate(value) {
            if (!isObject(value) || !Object.hasOwn(value, argument)) return check(value);
            const { [argument]: repeat, ...rest } = value;
            const put = (result: StandardResult): StandardResult =>
              result.issues !== undefined || !isObject(result.value)
                ? result
                : { value: { ...result.value, [argument]: repeat } };
            const result = check(rest);
            return result instanceof Promise ? result.then(put) : put(result);
          },
          jsonSchema: {
            input: (o) => extend(standard?.jsonSchema.input(o)),
            output: (o) => extend(standard?.jsonSchema.output(o)),
          },
        },
      } satisfies StandardJsonSchema;
    },
    zodSchema(schema, load) {
      if (repeats === undefined) return schema;
      clash(schema);
      const s = schema as
        | { _zod?: { def?: { type?: string } }; _def?: { typeName?: string }; extend?: unknown }
        | undefined;
      const v4 = schema == null || s?._zod !== undefined;
      let z: Record<string, (...a: unknown[]) => unknown>;
      try {
        z = load(v4 ? 'zod/v4-mini' : 'zod/v3') as typeof z;
      } catch (error) {
        if (ConfigurationError.isInstance(error)) throw error; // no `require` on this runtime
        throw refuse(toolName, caller, 'be a zod object, with zod 3.25+ or 4 installed');
      }
      // biome-ignore lint/suspicious/noExplicitAny: zod's API, loaded at run time
      const zod = z as any;
      if (v4) {
        const repeat = zod.optional(zod.int().check(zod.minimum(1), zod.describe(DESCRIPTION)));
        if (schema == null) return zod.object({ [repeats.argument]: repeat });
        if (s?._zod?.def?.type !== 'object') throw refuse(toolName, caller, 'be a zod object');
        return zod.extend(schema, { [repeats.argument]: repeat });
      }
      if (s?._def?.typeName !== 'ZodObject' || typeof s.extend !== 'function') {
        throw refuse(toolName, caller, 'be a zod object');
      }
      const repeat = zod.number().int().min(1).optional().describe(DESCRIPTION);
      return (s.extend as (shape: object) => typeof schema)({ [repeats.argument]: repeat });
    },
    openApiSchema(schema) {
      if (repeats === undefined) return schema;
      const given = (schema ?? { type: 'OBJECT' }) as Json;
      const properties = isObject(given.properties) ? given.properties : {};
      if (Object.hasOwn(properties, repeats.argument)) throw repeatClash(toolName, repeats, caller);
      const repeat = { type: 'INTEGER', minimum: 1, description: DESCRIPTION };
      return {
        ...given,
        properties: { ...properties, [repeats.argument]: repeat },
      } as typeof schema;
    },
    strip,
    stripped(callback, at = 0) {
      if (typeof callback !== 'function' || repeats === undefined) return callback;
      const called = (...given: unknown[]) =>
        callback(...given.map((value, i) => (i === at ? strip(value) : value)));
      // As many parameters as the callback's: frameworks tell a policy by its `length`.
      return Object.defineProperty(called, 'length', { value: callback.length }) as typeof callback;
    },
  };
}

/**
 * The `load` of `zodSchema` for an adapter: `require` from the adapter's module (`url`: its
 * `import.meta.url`), so zod is its framework's copy. `node:module` is taken when first used, not
 * imported, so the adapter loads on runtimes without it (Workers without `nodejs_compat`); there
 * a repeatable tool with a zod schema is a `ConfigurationError` saying so.
 */
export function requireNear(url: string): (specifier: string) => unknown {
  let load: ((specifier: string) => unknown) | undefined;
  return (specifier) => {
    if (load === undefined) {
      const found = builtinModule<typeof import('node:module')>('node:module');
      if (typeof found?.createRequire !== 'function') {
        throw new ConfigurationError({
          option: 'policies',
          message:
            "A repeatable tool with a zod schema needs node:module to load its framework's zod, which this runtime does not have: on Cloudflare Workers enable the nodejs_compat compatibility flag, or give the tool a JSON schema.",
        });
      }
      load = found.createRequire(url);
    }
    return load(specifier);
  };
}
