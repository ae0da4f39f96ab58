import { randomUUID } from 'node:crypto';
import {
  type ExecutionContext,
  errorForModel,
  type Idempotency,
  InvalidInputError,
  markReplayed,
  type ToolPolicy,
} from '@idempotent-tools/core';

/** Options every wrapper of this package takes. */
export interface CommonOptions<Scope> {
  /**
   * Tenant / user: records of one scope are invisible to another. A string, or a function of the
   * call. @default undefined (one shared scope)
   */
  scope?: Scope;
  /** Per-tool policy (ttl, lease, businessKey, reconcile, onStale, ...), by tool name. @default {} */
  policies?: Record<string, ToolPolicy<never, unknown>>;
  /** Tools that run unwrapped (read-only tools): every call runs; descriptions unchanged. @default [] */
  exclude?: readonly string[];
  /** Tools not safe to retry: they run unwrapped and their descriptions get the unsafe note. @default [] */
  unsafe?: readonly string[];
  /** Also mark fresh outputs (`replayed: false`); by default only replays are marked. @default false */
  markFresh?: boolean;
}

export function checkNames(field: string, names: unknown, known?: readonly string[]): string[] {
  if (names === undefined) return [];
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) {
    throw new InvalidInputError({ field, message: `${field} must be an array of tool names.` });
  }
  const unknown = known === undefined ? [] : names.filter((n) => !known.includes(n));
  if (unknown.length > 0) {
    throw new InvalidInputError({
      field,
      message: `${field} names ${unknown.join(', ')}, but there is no such tool. Known tools: ${known?.join(', ')}.`,
    });
  }
  return names;
}

/** The model-visible text of an idempotency error: the JSON of core's `errorForModel`. */
export function modelErrorText(error: unknown): string | undefined {
  const forModel = errorForModel(error);
  return forModel === undefined ? undefined : JSON.stringify(forModel);
}

/** A context for tools that run unwrapped: a random key per call (every call is a new effect). */
export function unwrappedContext(
  toolName: string,
  turnId: string | undefined,
  scope: string | undefined,
): ExecutionContext {
  return {
    key: `u_${randomUUID()}`,
    toolName,
    turnId,
    scope,
    signal: new AbortController().signal,
  };
}

/** Thrown inside `run` to release the claim while handing a value back (a failure returned as output). */
export class FailedOutput {
  constructor(readonly output: unknown) {}
}

/**
 * One idempotent call: `idempotency.run` (core runs the tool inside its execution context), the
 * model-visible value marked, idempotency errors turned into the model's error text.
 */
export async function runCall(
  idempotency: Idempotency,
  call: { toolName: string; turnId: string; scope: string | undefined; args: unknown },
  execute: (args: unknown, context: ExecutionContext) => unknown,
  policy: ToolPolicy<never, unknown> | undefined,
  markFresh: boolean,
): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
  try {
    const { value, replayed } = await idempotency.run(
      call,
      // core runs the tool inside its execution context (idempotentFetch finds the key there)
      (args, context) => execute(args, context),
      policy as ToolPolicy<unknown, unknown>,
    );
    return { ok: true, value: markReplayed(value, replayed, { markFresh }) };
  } catch (error) {
    if (error instanceof FailedOutput) return { ok: true, value: error.output };
    const text = modelErrorText(error);
    return text === undefined ? { ok: false, error } : { ok: true, value: text };
  }
}
