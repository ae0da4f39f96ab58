/**
 * One call pipeline for every adapter (docs/design.md, "Adapters"): an adapter translates its
 * framework's call into `prepareCall`'s input, runs the prepared call with `runPrepared`, and
 * translates the one `CallOutcome` back (its output for the model, the model's error text, an
 * error for the developer, the tool's own error). Nothing else of the per-call sequence (the
 * repeat argument, the key's args, the turn, the run, the mark, who an error is for) is the
 * adapter's.
 *
 * ```ts
 * const prepared = await prepareCall(adapter, { toolName, input, info: (args) => ({ ...call, args }) });
 * if ('prepared' in prepared) return translate(await runPrepared(adapter, prepared.prepared, execute));
 * return translate(prepared); // the model's text, or a developer error: nothing ran
 * ```
 */

import { InvalidInputError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import type { Call, ExecutionContext, ToolPolicy } from '../executor.js';
import type { Adapter } from './adapter.js';
import { parseArguments, type StandardSchema, type ValidateFunction } from './arguments.js';
import { audienceOf, errorText, markOutput } from './calls.js';
import { keyArgs, takeRepeat } from './repeats.js';
import type { ResolvedTurn } from './turn-identity.js';

/**
 * The outcome of one wrapped call, told apart: its output (marked, or a `NotAnOutcome`'s value),
 * the model's error text (bad input, an idempotency error), an error for the developer (nothing
 * ran), or the tool's own error (its claim released, so a retry runs again).
 */
export type CallOutcome =
  | { output: unknown }
  | { text: string }
  | { developer: unknown }
  | { error: unknown };

/** `runCall` with its outcome told apart (see `CallOutcome`). */
export async function settleCall(
  adapter: Adapter<never>,
  call: Parameters<typeof runCall>[1],
  fn: (args: unknown, context: ExecutionContext) => unknown,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<CallOutcome> {
  const policy = adapter.policy(call.toolName) as ToolPolicy<unknown, unknown> | undefined;
  const settled = await settleRun(adapter, () => adapter.executor.run(call, fn, policy), mark);
  return 'text' in settled ? { text: settled.text } : settled;
}

/** `settleRun`'s answer: a `CallOutcome` whose model text keeps the error it tells of (`cause`). */
export type SettledRun = Exclude<CallOutcome, { text: string }> | { text: string; cause: unknown };

/**
 * The outcome of a run of a prepared call that is not the executor's own (core approvals' guarded
 * `run`, which checks the approval first), told apart as `settleCall` tells it; the model's text
 * keeps its error (`cause`), for a framework that hands the model an error object.
 */
export async function settleRun(
  adapter: Adapter<never>,
  run: () => Promise<{ value: unknown; replayed: boolean }>,
  mark: (value: unknown, replayed: boolean) => unknown = (value, replayed) =>
    markOutput(value, replayed, adapter.markFresh),
): Promise<SettledRun> {
  try {
    const { value, replayed } = await run();
    return { output: mark(value, replayed) };
  } catch (error) {
    if (NotAnOutcome.isInstance(error)) return { output: error.value };
    const audience = audienceOf(error);
    if (audience === 'model') return { text: errorText(error) as string, cause: error };
    return audience === 'developer' ? { developer: error } : { error };
  }
}

/**
 * One wrapped call: `executor.run`, the value marked (`mark`, default `markOutput`), a value
 * handed back as `NotAnOutcome` passed on, idempotency errors for the model as their text.
 * Developer errors and the tool's own come back as `{ error }` for the adapter to throw as its
 * framework does.
 */
export async function runCall(
  adapter: Adapter<never>,
  call: {
    toolName: string;
    turnId?: string | undefined;
    scope?: string | undefined;
    args: unknown;
  },
  fn: (args: unknown, context: ExecutionContext) => unknown,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<{ output: unknown } | { error: unknown; developer: boolean }> {
  const settled = await settleCall(adapter, call, fn, mark);
  if ('text' in settled) return { output: settled.text };
  if ('developer' in settled) return { error: settled.developer, developer: true };
  if ('error' in settled) return { error: settled.error, developer: false };
  return settled;
}

/** What an adapter hands the pipeline of one call. */
export interface CallInput<Info> {
  toolName: string;
  /**
   * The model's arguments: JSON text, or a value the provider or framework already parsed (and
   * validated: then give no `schema`). A repeatable tool's repeat argument is still in it.
   */
  input: unknown;
  /** The tool's schema, to check the arguments before anything runs. @default none */
  schema?: StandardSchema | ValidateFunction | undefined;
  /**
   * The input is the framework's own value, parsed and validated by the tool's schema already:
   * the args as they are (no JSON round trip, no `schema`), only the repeat argument taken out.
   * @default false
   */
  parsed?: boolean | undefined;
  /** The adapter's call info (what `turnId`, `conversationId` and `scope` functions get) of the tool's own args. */
  info: (args: unknown) => Info;
  /**
   * This call's own policy, from the tool's and the resolved turn (an MCP client's idempotency
   * key as its business key, a shorter ttl for a turn only a session gives): the key and the run
   * (`runPrepared`, or the adapter's with `prepared.policy`) use it. @default the tool's policy
   */
  policy?:
    | ((info: Info, turn: ResolvedTurn | undefined, policy: ToolPolicy | undefined) => ToolPolicy)
    | undefined;
  /**
   * The turn id the key is made of, from the resolved turn (undefined: none identifies it), for
   * a framework that runs one turn's function many times (a LangGraph task: its place in the run).
   * It may refuse (throw a `ConfigurationError`: nothing runs). @default the resolved turn's id
   */
  turnOf?:
    | ((
        turn: ResolvedTurn | undefined,
        info: Info,
      ) => string | undefined | Promise<string | undefined>)
    | undefined;
}

/** A call ready to run: checked, identified, its key's args built. */
export interface PreparedCall<Info> {
  readonly toolName: string;
  /** The tool's own arguments: the repeat argument taken out. */
  readonly args: unknown;
  /** The deliberate repeat asked for (1: the first call, or not repeatable). */
  readonly repeat: number;
  /** The executor's call: turn, scope and the key's args (with the repeat from 2 up). */
  readonly call: Call;
  readonly policy: ToolPolicy | undefined;
  readonly info: Info;
}

/**
 * `prepareCall`'s answer: the prepared call, or why nothing may run (`CallOutcome`'s text or
 * developer); the model's text keeps the error it tells of, if any (`cause`).
 */
export type Prepared<Info> =
  | { prepared: PreparedCall<Info> }
  | { text: string; cause?: unknown }
  | { developer: unknown };

/**
 * Prepare one call: parse and check the model's arguments (`parseArguments`: the model's error
 * text when they are bad), take out the repeat argument, identify the turn and scope, build the
 * key's args and the call's policy (`given.policy`), and check the key (as `callOf`: a developer
 * error when nothing identifies the turn, the model's text for arguments that are not JSON).
 * Nothing runs and nothing is stored.
 */
export async function prepareCall<Info>(
  adapter: Adapter<Info>,
  given: CallInput<Info>,
): Promise<Prepared<Info>> {
  const { toolName } = given;
  const repeats = adapter.repeats(toolName);
  const parsed =
    given.parsed !== true
      ? await parseArguments(toolName, given.input, given.schema, repeats)
      : repeats === undefined
        ? { args: given.input }
        : takeRepeat(given.input, toolName, repeats);
  if ('error' in parsed) return { text: parsed.error };
  const { args, repeat = 1 } = parsed;
  const info = given.info(args);
  try {
    const key = repeats === undefined ? args : keyArgs(args, repeat, repeats);
    const { turnId, scope, turn } = adapter.identify(info, toolName);
    const own = adapter.policy(toolName) as ToolPolicy | undefined;
    const policy = given.policy === undefined ? own : given.policy(info, turn, own);
    const call: Call = {
      toolName,
      turnId: given.turnOf === undefined ? turnId : await given.turnOf(turn, info),
      scope,
      args: key,
    };
    adapter.executor.keyOf(call, policy);
    return { prepared: { toolName, args, repeat, call, policy, info } };
  } catch (error) {
    if (audienceOf(error) === 'developer') return { developer: error };
    return { text: errorText(error) ?? String(error), cause: error };
  }
}

/**
 * Run a prepared call: the lookup first, the tool (`execute`, given the tool's own args) only when
 * no outcome is stored, the output marked (`mark`, default `markOutput`), and the outcome told
 * apart (`CallOutcome`). The call's policy is the prepared one.
 */
export async function runPrepared<Info>(
  adapter: Adapter<Info>,
  prepared: PreparedCall<Info>,
  execute: (args: unknown, context: ExecutionContext) => unknown,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<CallOutcome> {
  const { args, call, policy } = prepared;
  const fn = (_key: unknown, context: ExecutionContext) => execute(args, context);
  const run = () => adapter.executor.run(call, fn, policy as ToolPolicy<unknown, unknown>);
  const settled = await settleRun(adapter as Adapter<never>, run, mark);
  return 'text' in settled ? { text: settled.text } : settled;
}

/** `prepareCall` then `runPrepared`: the whole pipeline of one call, one outcome. */
export async function runPipeline<Info>(
  adapter: Adapter<Info>,
  given: CallInput<Info>,
  execute: (args: unknown, context: ExecutionContext, prepared: PreparedCall<Info>) => unknown,
  mark?: (value: unknown, replayed: boolean) => unknown,
): Promise<CallOutcome> {
  const prepared = await prepareCall(adapter, given);
  if ('text' in prepared) return { text: prepared.text };
  if (!('prepared' in prepared)) return prepared;
  const call = prepared.prepared;
  return runPrepared(adapter, call, (args, context) => execute(args, context, call), mark);
}

/**
 * The output of an outcome (or the call `prepareCall` prepared), else its error thrown: the
 * developer's, the tool's own, the error the model's text tells of (its `cause`; a text without
 * one as an `InvalidInputError` of the arguments). For a framework where every error is thrown
 * (a workflow's task).
 */
export function orThrow<Info>(outcome: Prepared<Info>): PreparedCall<Info>;
export function orThrow(outcome: CallOutcome | SettledRun): unknown;
export function orThrow(outcome: CallOutcome | SettledRun | Prepared<unknown>): unknown {
  if ('prepared' in outcome) return outcome.prepared;
  if ('output' in outcome) return outcome.output;
  if ('developer' in outcome) throw outcome.developer;
  if ('error' in outcome) throw outcome.error;
  const { cause } = outcome as { cause?: unknown };
  throw cause ?? new InvalidInputError({ field: 'arguments', message: outcome.text });
}
