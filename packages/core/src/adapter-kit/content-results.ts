/**
 * Results made of content blocks with an error flag, optional structured content and metadata
 * (MCP's `CallToolResult`): a tool's error result kept out of the store, the replay mark in every
 * part a client may read, and one call's outcome as such a result.
 */
import { markReplayed } from '../model-output.js';
import { errorText, markContent } from './calls.js';
import type { CallOutcome } from './pipeline.js';
import { schemaHasProperty } from './repeats.js';

/** A result of content blocks, as far as the kit reads it. */
export interface ContentResult {
  content?: Array<{ type: string; [field: string]: unknown }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [field: string]: unknown;
}

/**
 * An `isError: true` result of a tool: not stored (the claim is released, so a retry runs
 * again), unless `isTerminalError` says so; `isTerminalError` receives this error.
 */
export class ToolResultError extends Error {
  readonly result: ContentResult;
  constructor(result: ContentResult) {
    const text = (result.content ?? []).flatMap((part) =>
      part.type === 'text' && typeof part.text === 'string' ? [part.text] : [],
    );
    super(text.join('\n') || 'The tool returned an error result.');
    this.name = 'ToolResultError';
    this.result = result;
  }
}

/** A tool's result as its outcome: an error result thrown as a `ToolResultError`. */
export function contentOutcome<R extends ContentResult>(result: R): R {
  if (result?.isError === true) throw new ToolResultError(result);
  return result;
}

/** How `markContentResult` marks a result. */
export interface ContentMark {
  /** Also mark a fresh result (`replayed: false`). */
  markFresh: boolean;
  /** The `_meta` field of the mark. */
  metaField: string;
  /** Whether the output schema has a `replayed` property (undefined: there is no schema). */
  declared: boolean | undefined;
}

/**
 * `ContentMark.declared` of a tool's output schema (zod 3 or 4, a Standard Schema with JSON
 * Schema): whether it has a `replayed` property; undefined when there is no schema.
 */
export function declaresReplayed(outputSchema: unknown): boolean | undefined {
  if (outputSchema === undefined) return undefined;
  return schemaHasProperty(outputSchema, 'replayed') === true;
}

/**
 * A result with its replay mark: in its content (`markContent`), in `_meta[metaField]`, and in
 * its structured content where the output schema lets it in (with no schema, unless the content
 * has its own `replayed`). A fresh result as it is unless `markFresh`.
 */
export function markContentResult<R extends ContentResult>(
  result: R,
  replayed: boolean,
  { markFresh, metaField, declared }: ContentMark,
): R {
  if (!replayed && !markFresh) return result;
  const content = markContent(result.content ?? [], replayed);
  const marked = { ...result, content, _meta: { ...result._meta, [metaField]: replayed } };
  const structured = result.structuredContent;
  if (structured === undefined || declared === false) return marked;
  if (declared === true) return { ...marked, structuredContent: { ...structured, replayed } };
  if (Object.hasOwn(structured, 'replayed')) return marked;
  return { ...marked, structuredContent: markReplayed(structured, replayed, { markFresh: true }) };
}

/**
 * A `CallOutcome` as a content result: the output as it is, a `ToolResultError`'s own result, an
 * error the model reads as an `isError` text result. The tool's own other errors are thrown (the
 * framework reports them as usual).
 */
export function contentReply(outcome: CallOutcome): ContentResult {
  if ('output' in outcome) return outcome.output as ContentResult;
  const error =
    'text' in outcome ? undefined : 'error' in outcome ? outcome.error : outcome.developer;
  if (error instanceof ToolResultError) return error.result;
  const text = 'text' in outcome ? outcome.text : errorText(error);
  if (text === undefined) throw error;
  return { content: [{ type: 'text', text }], isError: true };
}
