/** One call of a wrapped tool that its framework runs itself (a tool runner, a tool's `run`). */
import type { ExecutionContext, ToolPolicy } from '../executor.js';
import { type Adapter, callOf } from './adapter.js';
import { parseArguments, type StandardSchema, type ValidateFunction } from './arguments.js';
import { audienceOf, type CallOutcome, errorText, settleCall } from './calls.js';
import { keyArgs } from './repeats.js';

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

/**
 * The model's arguments checked (`parseArguments`), the call identified (`callOf`) and run
 * (`settleCall`): bad input and an identity error for the model come back as the model's text,
 * an identity error for the developer as `developer` (nothing ran in either case). For a
 * repeatable tool the repeat argument is taken out first: part of the key, never of the args
 * `execute` and `info` get.
 */
export async function runToolCall<Info>(
  adapter: Adapter<Info>,
  call: ToolCall<Info>,
): Promise<CallOutcome> {
  const { toolName } = call;
  const repeats = adapter.repeats(toolName);
  const parsed = await parseArguments(toolName, call.arguments, call.schema, repeats);
  if ('error' in parsed) return { text: parsed.error };
  const { args, repeat = 1 } = parsed;
  const key = repeats === undefined ? args : keyArgs(args, repeat, repeats);
  let identified: ReturnType<typeof callOf>;
  try {
    const policy = adapter.policy(toolName) as ToolPolicy | undefined;
    identified = callOf(adapter, call.info(args), toolName, key, policy);
  } catch (error) {
    if (audienceOf(error) === 'developer') return { developer: error };
    return { text: errorText(error) ?? String(error) };
  }
  const execute =
    repeats === undefined
      ? call.execute
      : (_: unknown, ctx: ExecutionContext) => call.execute(args, ctx);
  return settleCall(adapter as Adapter<never>, identified, execute, call.mark);
}
