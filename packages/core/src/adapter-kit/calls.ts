/**
 * The parts of running one wrapped call that every adapter needs: who an error is for, the
 * model's error text, merged abort signals, draining a streaming tool, the registry that lets a
 * tool find its idempotency context from the options its framework handed it, replay marks on
 * content blocks.
 */

import { ConfigurationError, InvalidInputError } from '../errors/index.js';
import type { ExecutionContext } from '../executor.js';
import { errorForModel, markReplayed } from '../model-output.js';
import { randomUUID } from '../runtime/index.js';

/** Fields of an `InvalidInputError` that the model's arguments caused (it can fix them). */
const MODEL_FIELDS = new Set(['args', 'arguments', 'businessKey', 'name']);

/**
 * Whether an error of a call is for the model (it can act on it: wait, check, change the
 * arguments) rather than for the developer (a `ConfigurationError`, an invalid turn id or
 * scope from the developer's resolver). The tool's own errors are neither: undefined.
 */
export function audienceOf(error: unknown): 'model' | 'developer' | undefined {
  if (ConfigurationError.isInstance(error)) return 'developer';
  if (InvalidInputError.isInstance(error)) {
    return MODEL_FIELDS.has(error.field) ? 'model' : 'developer';
  }
  return errorForModel(error) === undefined ? undefined : 'model';
}

/**
 * The text the model reads for an idempotency error (the JSON of `errorForModel`: `error`,
 * `message`, `next`), or undefined for any other error.
 */
export function errorText(error: unknown): string | undefined {
  const shown = errorForModel(error);
  return shown === undefined ? undefined : JSON.stringify(shown);
}

/** The text of an `InvalidInputError` about the model's arguments (nothing ran). */
export function invalidArgumentsText(message: string): string {
  return errorText(new InvalidInputError({ field: 'arguments', message })) as string;
}

/** One signal that aborts when any of the given ones does (undefined ones are left out). */
export function mergeSignals(...signals: (AbortSignal | undefined | null)[]): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => s != null);
  if (present.length === 1) return present[0] as AbortSignal;
  return AbortSignal.any(present);
}

/** True for an async iterable (a streaming tool's output). */
export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value != null &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

/**
 * The final value of a streaming tool: an async iterable is read to its end (each part handed
 * to `onPart`); its last part, or a generator's return value when it has one, is the result.
 * Anything else is returned as it is.
 */
export async function drain(
  value: unknown,
  onPart?: (part: unknown) => void | Promise<void>,
  result: 'last' | 'return' = 'last',
): Promise<unknown> {
  if (!isAsyncIterable(value)) return value;
  const iterator = value[Symbol.asyncIterator]();
  let last: unknown;
  for (;;) {
    const step = await iterator.next();
    if (step.done) return result === 'return' ? step.value : last;
    last = step.value;
    await onPart?.(step.value);
  }
}

/**
 * Where a tool finds its idempotency context (key, signal) from the object its framework hands
 * it (the options / config / extra of the call). Weakly held: the context goes with the object.
 */
export interface ContextRegistry {
  set(carrier: object, context: ExecutionContext): void;
  get(carrier: object): ExecutionContext | undefined;
}

export function createContextRegistry(): ContextRegistry {
  const contexts = new WeakMap<object, ExecutionContext>();
  return {
    set: (carrier, context) => void contexts.set(carrier, context),
    get: (carrier) => contexts.get(carrier),
  };
}

/** The text block that marks a list of content blocks: `{"replayed":true}`. */
export function replayMarkBlock(replayed: boolean): { type: 'text'; text: string } {
  return { type: 'text', text: JSON.stringify({ replayed }) };
}

/** True for a list of content blocks (`[{ type: 'text', ... }, { type: 'image', ... }]`). */
export function isContentBlocks(value: unknown): value is { type: string }[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((block) => block !== null && typeof block === 'object' && 'type' in block)
  );
}

/**
 * Content blocks with the replay mark inside them, so that a client that reads one text block
 * (LangChain's MCP adapter keeps `structuredContent` only on a single text block; many clients
 * show only the first) still sees it: the last text block gets `"replayed": true` merged in when
 * its text is a JSON object, else `{"replayed":true}` on a line of its own after the text. Only
 * when there is no text block at all is a text block `{"replayed":true}` added.
 */
export function markContent<B extends { type: string }>(
  blocks: readonly B[],
  replayed: boolean,
): (B | { type: 'text'; text: string })[] {
  const last = blocks.findLastIndex(
    (block) => block.type === 'text' && typeof (block as { text?: unknown }).text === 'string',
  );
  if (last < 0) return [...blocks, replayMarkBlock(replayed)];
  const block = blocks[last] as B & { text: string };
  const marked: (B | { type: 'text'; text: string })[] = [...blocks];
  marked[last] = { ...block, text: markedText(block.text, replayed) };
  return marked;
}

function markedText(text: string, replayed: boolean): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    !Object.hasOwn(value, 'replayed')
  ) {
    return JSON.stringify(markReplayed(value, replayed, { markFresh: true }));
  }
  const mark = replayMarkBlock(replayed).text;
  return text === '' ? mark : `${text}\n\n${mark}`;
}

/**
 * A tool's output with its replay mark, whatever its shape: content blocks are marked by
 * `markContent`, anything else goes through core's `markReplayed`. A fresh output is returned
 * unchanged unless `markFresh`.
 */
export function markOutput(output: unknown, replayed: boolean, markFresh: boolean): unknown {
  if (!replayed && !markFresh) return output;
  if (isContentBlocks(output)) return markContent(output, replayed);
  return markReplayed(output, replayed, { markFresh });
}

/**
 * Stream the parts a running call emits while it runs, then settle as the call does: `run(emit)`
 * starts the call; the generator yields every part handed to `emit`, in order, as soon as it
 * comes, and returns what `run` resolved to (or throws what it threw). For a streaming tool whose
 * framework reads its progress from an async generator while the claim, the run and the persist
 * happen inside the executor.
 */
export async function* relay<T>(
  run: (emit: (part: unknown) => void) => Promise<T>,
): AsyncGenerator<unknown, T> {
  const parts: unknown[] = [];
  let wake: (() => void) | undefined;
  let settled = false;
  const running = run((part) => {
    parts.push(part);
    wake?.();
  }).finally(() => {
    settled = true;
    wake?.();
  });
  running.catch(() => {}); // awaited below
  for (;;) {
    while (parts.length > 0) yield parts.shift();
    if (settled) return await running;
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
  }
}

/** The context of a tool that runs unwrapped (excluded, unsafe): a new key per call. */
export const unwrappedContext = (
  toolName: string,
  turnId: string | undefined,
  scope: string | undefined,
): ExecutionContext => ({
  key: `u_${randomUUID()}`,
  toolName,
  turnId,
  scope,
  signal: new AbortController().signal,
  stillOwned: () => true, // a new key per call: nobody else can own it
});

/** The field of an escape that names its error (a string, so that it survives a copy). */
const ESCAPE = 'idempotentToolsEscape';

/**
 * A developer error out of a framework that turns whatever a tool's `execute` throws into text
 * for the model (AI SDK, Mastra), but not what its `toModelOutput` throws: `execute` returns
 * `escape(error)` (a `not_run` error object, nothing ran), and the wrapped `toModelOutput` calls
 * `rethrow(output)` first, which throws the error out of the framework's run.
 */
export interface Escapes {
  escape(error: unknown): { error: 'not_run'; message: string };
  /** Throws the error of an escape (once); does nothing for any other output. */
  rethrow(output: unknown): void;
}

export function createEscapes(): Escapes {
  const errors = new Map<string, unknown>();
  return {
    escape(error) {
      const id = randomUUID();
      errors.set(id, error);
      const message = 'Not run: a configuration error went to the developer.';
      return { error: 'not_run', message, [ESCAPE]: id };
    },
    rethrow(output) {
      const id = (output as { [ESCAPE]?: unknown } | null | undefined)?.[ESCAPE];
      if (typeof id !== 'string' || !errors.has(id)) return;
      const error = errors.get(id);
      errors.delete(id);
      throw error;
    },
  };
}
