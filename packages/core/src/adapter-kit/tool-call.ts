/** One call of a wrapped tool that its framework runs itself (a tool runner, a tool's `run`). */
import type { ExecutionContext } from '../executor.js';
import type { Adapter } from './adapter.js';
import type { StandardSchema, ValidateFunction } from './arguments.js';
import type { CallOutcome } from './pipeline.js';
import { runPipeline } from './pipeline.js';

export interface ToolCall<Info> {
  toolName: string;
  /** The model's arguments (JSON text, or a value the provider already parsed). */
  arguments: unknown;
  schema?: StandardSchema | ValidateFunction | undefined;
  /** The adapter's call info, of the parsed arguments. */
  info: (args: unknown) => Info;
  execute: (args: unknown, context: ExecutionContext) => unknown;
  /** How the output is marked (default `markOutput`). */
  mark?: (value: unknown, replayed: boolean) => unknown;
}

/** `runPipeline` in the shape of a tool call: prepared, run, one outcome (see `pipeline.ts`). */
export function runToolCall<Info>(
  adapter: Adapter<Info>,
  call: ToolCall<Info>,
): Promise<CallOutcome> {
  return runPipeline(
    adapter,
    { toolName: call.toolName, input: call.arguments, schema: call.schema, info: call.info },
    (args, context) => call.execute(args, context),
    call.mark,
  );
}
