/**
 * The identity a client gives a request itself, for protocols where the client, not the
 * conversation, names the call (MCP's `_meta`): its idempotency key for this one call, its id of
 * the user turn, a task the call belongs to, else only its session. Ids are scoped by who the
 * client is. A key is the call's business key (one call across turns); a turn only a session
 * gives is remembered for a window, not the ttl.
 */
import { InvalidInputError } from '../errors/index.js';
import type { ToolPolicy } from '../executor.js';
import type { ResolvedTurn } from './turn-identity.js';

/** Default `sessionWindow`: 5 minutes (the content-based deduplication window of SQS FIFO queues). */
export const DEFAULT_SESSION_WINDOW = 5 * 60_000;

/** The option of an adapter whose calls a client's session may identify. */
export type ClientTurnOptions = {
  /**
   * How long a call that only its session identifies (stateful HTTP, no turn id from the
   * client) is remembered, in ms: a repeat in the session within it is a retry (replayed), a
   * repeat after it a new action (runs). `false`: such calls are refused, like calls with no
   * identity at all (stateless HTTP, stdio without a turn id).
   * @default 300000 (5 minutes)
   */
  sessionWindow?: number | false;
};

/** The check of `sessionWindow` (for `AdapterSpec.optionChecks`): why it is wrong, if it is. */
export function checkSessionWindow(window: unknown): string | undefined {
  return window === false || (Number.isInteger(window) && (window as number) > 0)
    ? undefined
    : `sessionWindow must be a whole number of milliseconds (e.g. 300000) or false, got ${String(window)}.`;
}

/** Where a client's request says who it is (`Info`: the adapter's call info). */
export interface ClientTurnSpec<Info> {
  /** The request's metadata, where the client puts its key and its turn id. */
  meta(call: Info): Record<string, unknown> | undefined;
  /** The metadata field of the client's idempotency key for this one call. */
  keyField: string;
  /** The metadata field of the client's id of the user turn. */
  turnField: string;
  /** How a field is named to the client in an error. @default the field */
  label?: ((field: string) => string) | undefined;
  /** The id of the task the call belongs to, if any (a non-empty string counts). */
  task(call: Info): unknown;
  /** The session of the call, if any. */
  session(call: Info): string | undefined;
  /** Who the client is (its OAuth client id, its name...; undefined: not known). */
  who(call: Info): unknown[];
  /** How long a call only its session identifies is remembered, in ms; `false`: never. */
  window: number | false;
  /** The adapter's ttl, if it has one (a session turn is kept for the shorter). */
  ttl?: number | undefined;
}

/** The turn a client gave, and where from. */
export interface ClientTurn {
  turnId: string;
  kind: 'key' | 'client' | 'task' | 'session';
  /** A key's business key (the key's args). */
  key?: unknown[];
}

/** A client's identity of its calls: the turn for `AdapterSpec.turn`, the policy for `prepareCall`. */
export interface ClientTurns<Info> {
  /**
   * The turn the client gave: its key, its turn id, its task, else its session (within a window).
   * @throws InvalidInputError for a key or turn id that is not a non-empty string
   */
  of(call: Info): ClientTurn | undefined;
  /** `of(call)`'s turn id, for `AdapterSpec.turn`. */
  turn(call: Info): string | undefined;
  /** The call's policy (`CallInput.policy`): the tool's, with the client's key or the session window. */
  policy(call: Info, turn: ResolvedTurn | undefined, own?: ToolPolicy): ToolPolicy;
}

/** A client's identity of its calls (see the module's comment). */
export function createClientTurns<Info>(spec: ClientTurnSpec<Info>): ClientTurns<Info> {
  const { window, label = (field: string) => field } = spec;
  const read = (call: Info, field: string) => {
    const value = spec.meta(call)?.[field];
    if (value === undefined || (typeof value === 'string' && value !== '')) return value;
    throw new InvalidInputError({
      field,
      message: `${label(field)} must be a non-empty string, got ${JSON.stringify(value) ?? typeof value}. Send a unique id (e.g. a UUID), or leave the field out.`,
    });
  };
  const of = (call: Info): ClientTurn | undefined => {
    const known = spec.who(call);
    const who = known.every((part) => part === undefined) ? [] : known.map((part) => part ?? null);
    const scoped = (prefix: string, id: string) =>
      `${prefix}:${who.length === 0 ? id : JSON.stringify([...who, id])}`;
    const key = read(call, spec.keyField);
    if (key !== undefined) {
      return { kind: 'key', turnId: scoped('key', key), key: ['client-key', ...who, key] };
    }
    const turn = read(call, spec.turnField);
    if (turn !== undefined) return { kind: 'client', turnId: scoped('turn', turn) };
    const task = spec.task(call);
    if (typeof task === 'string' && task !== '') {
      return { kind: 'task', turnId: scoped('task', task) };
    }
    const session = spec.session(call);
    if (session === undefined || window === false) return undefined;
    return { kind: 'session', turnId: `session:${session}` };
  };
  return {
    of,
    turn: (call) => of(call)?.turnId,
    policy(call, turn, own) {
      const source = of(call);
      if (own?.businessKey !== undefined || source === undefined) return { ...own };
      if (source.kind === 'key') return { ...own, businessKey: () => source.key };
      // A turn only the session gives is remembered for the session window, not the ttl.
      if (source.kind !== 'session' || turn?.source !== 'framework' || window === false) {
        return { ...own };
      }
      return { ...own, ttl: Math.min(window, own?.ttl ?? spec.ttl ?? window) };
    },
  };
}
