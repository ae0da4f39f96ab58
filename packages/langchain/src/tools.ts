import { InvalidInputError, type ToolPolicy } from '@idempotent-tools/core';
import {
  checkTool,
  type ExecutorOptions,
  executorOf,
  type IdempotentToolOptions,
  type ToolArgs,
  type ToolLike,
  type WrapOptions,
  wrapTool,
} from './wrap-tool.js';

/** The tools of a list, by name. */
type ByName<T extends readonly ToolLike[]> = { [K in T[number] as K['name']]: K };

/** Options of `idempotentTools(tools, options)`: names and argument types come from the tools. */
export type IdempotentToolsOptions<T extends readonly ToolLike[] = readonly ToolLike[]> =
  ExecutorOptions &
    WrapOptions & {
      /**
       * Per-tool policy, by tool name: `ttl`, `lease`, `businessKey`, `reconcile`, `onStale`,
       * `isTerminalError`...
       * @default {} (the executor's defaults for every tool)
       */
      policies?: { [N in keyof ByName<T>]?: ToolPolicy<ToolArgs<ByName<T>[N]>> };
      /**
       * Tools left exactly as they are (read-only tools: look-ups), by name.
       * @default []
       */
      exclude?: ReadonlyArray<T[number]['name']>;
      /**
       * Tools not made idempotent, by name: every call runs again, and their description tells
       * the model they are not safe to retry.
       * @default []
       */
      unsafe?: ReadonlyArray<T[number]['name']>;
    };

/**
 * One tool, made idempotent: a tool of the same kind (same class, name and schema) whose
 * description carries the retry note and which runs once per turn + arguments; a repeat
 * returns the stored outcome marked `replayed: true`.
 *
 * ```ts
 * const createTicket = idempotentTool(tool(create, { name: 'create_ticket', schema }), { store });
 * ```
 */
export function idempotentTool<T extends ToolLike>(tool: T, options: IdempotentToolOptions<T>): T {
  const idempotency = executorOf(options, 'idempotentTool');
  const { policy, unsafe } = options;
  if (policy !== undefined && (policy === null || typeof policy !== 'object')) {
    throw new InvalidInputError({ field: 'policy', message: 'policy must be an object.' });
  }
  return wrapTool(tool, idempotency, options, {
    policy: policy as ToolPolicy<never> | undefined,
    unsafe: unsafe === true,
  });
}

/** Options of `idempotentToolsMiddleware(options)`: the tools are not known in advance. */
export type IdempotentToolsMiddlewareOptions = ExecutorOptions &
  WrapOptions & {
    /** Per-tool policy, by tool name (see `idempotentTools`). @default {} */
    policies?: Readonly<Record<string, ToolPolicy<Record<string, unknown>>>>;
    /** Tools left exactly as they are (read-only tools), by name. @default [] */
    exclude?: readonly string[];
    /** Tools not made idempotent, with the "not safe to retry" note, by name. @default [] */
    unsafe?: readonly string[];
  };

/** Validate the name lists and policies; returns how to treat a tool by its name. */
export function planOf(
  options: IdempotentToolsMiddlewareOptions,
  caller: string,
): (name: string) => 'exclude' | 'unsafe' | { policy: ToolPolicy<never> | undefined } {
  const names = (field: 'exclude' | 'unsafe'): Set<string> => {
    const list = options[field] ?? [];
    if (!Array.isArray(list) || list.some((n) => typeof n !== 'string')) {
      throw new InvalidInputError({
        field,
        message: `${caller}: ${field} must be an array of tool names, e.g. ['get_weather'].`,
      });
    }
    return new Set(list);
  };
  const exclude = names('exclude');
  const unsafe = names('unsafe');
  const both = [...exclude].filter((n) => unsafe.has(n));
  if (both.length > 0) {
    throw new InvalidInputError({
      field: 'unsafe',
      message: `${caller}: ${both.join(', ')} cannot be both excluded and unsafe. Pick one.`,
    });
  }
  const policies = options.policies ?? {};
  if (typeof policies !== 'object') {
    throw new InvalidInputError({
      field: 'policies',
      message: `${caller}: policies must be an object { [toolName]: policy }.`,
    });
  }
  return (name) => {
    if (exclude.has(name)) return 'exclude';
    if (unsafe.has(name)) return 'unsafe';
    return { policy: policies[name] as ToolPolicy<never> | undefined };
  };
}

/**
 * Several tools, made idempotent (see `idempotentTool`); `exclude`d tools are returned as they
 * are, `unsafe` ones only get the not-safe-to-retry note. Names in `policies`, `exclude` and
 * `unsafe` must be names of the given tools.
 */
export function idempotentTools<T extends readonly ToolLike[]>(
  tools: T,
  options: IdempotentToolsOptions<T>,
): T {
  const caller = 'idempotentTools';
  const idempotency = executorOf(options, caller);
  if (!Array.isArray(tools)) {
    throw new InvalidInputError({ field: 'tools', message: `${caller} takes an array of tools.` });
  }
  for (const tool of tools) checkTool(tool, caller);
  const plan = planOf(options as IdempotentToolsMiddlewareOptions, caller);
  const known = new Set(tools.map((t) => t.name));
  const named = [
    ...Object.keys(options.policies ?? {}),
    ...(options.exclude ?? []),
    ...(options.unsafe ?? []),
  ];
  const unknown = named.filter((n) => !known.has(n));
  if (unknown.length > 0) {
    throw new InvalidInputError({
      field: 'policies',
      message: `${caller}: no tool named ${unknown.join(', ')}; the tools are ${[...known].join(', ')}.`,
    });
  }
  return tools.map((tool) => {
    const how = plan(tool.name);
    if (how === 'exclude') return tool;
    return wrapTool(tool, idempotency, options, how === 'unsafe' ? { unsafe: true } : how);
  }) as unknown as T;
}
