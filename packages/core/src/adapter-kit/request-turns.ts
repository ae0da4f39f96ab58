/**
 * The turn of a request an adapter sees before the calls it makes run (a model request it
 * observes, the request a dispatcher is handed), carried to those calls through the call ids of
 * the response (`TurnLinks`): a later step, which holds only tool outputs, or a run resumed in
 * another process finds its turn. An adapter that sees its model's responses also records the
 * calls the model emitted, so that an approval its framework reports authorises only a call the
 * model asked for, with exactly those arguments (docs/design.md, "Approvals").
 */
import { type Approvals, createApprovals } from '../approvals/approvals.js';
import type { ExecutionContext, Idempotency } from '../executor.js';
import type { Adapter } from './adapter.js';
import { errorOutcome } from './outcomes.js';
import { type CallOutcome, type PreparedCall, prepareCall, runPrepared } from './pipeline.js';
import { deriveTurnId, type TranscriptEntry, type TurnSources } from './turn-identity.js';
import { createTurnLinks, type TurnLinks } from './turn-links.js';

/**
 * The turn of a request: `turn` (an id: from the response it continues, or a link), `said` (the
 * user's words and their place, derived again with the conversation identity), or `refuse` (why
 * it is unknown, completing "`caller`: ...").
 */
export type TurnAnchor = { turn: string } | { said: string } | { refuse: string };

/** The `turn`, `refusal` and `transcript` sources of an adapter whose calls carry an anchor. */
export function anchorSources<Info>(
  anchorOf: (call: Info) => TurnAnchor | undefined,
): Required<Pick<TurnSources<Info>, 'turn' | 'refusal' | 'transcript'>> {
  const field = (call: Info, name: 'turn' | 'said' | 'refuse') => {
    const anchor = anchorOf(call) as Record<string, string> | undefined;
    return anchor?.[name];
  };
  return {
    turn: (call) => field(call, 'turn'),
    refusal: (call) => field(call, 'refuse'),
    transcript: (call) => {
      const said = field(call, 'said');
      return said === undefined ? undefined : [{ role: 'user', content: said }];
    },
  };
}

/** What a request says of its turn, as the adapter read it (see `RequestTurns.anchor`). */
export interface RequestTurn {
  /** The conversation the request carries (`readTranscript`). */
  transcript: TranscriptEntry[] | undefined;
  /**
   * Why the user's words it carries cannot be counted, when they cannot (it refers to items it
   * does not carry: each may be a user message or an answer). @default they can
   */
  hidden?: string | undefined;
  /** The id of the response the request continues: one user turn follows a response. */
  continues?: string | undefined;
  /**
   * Why a turn it adds to a conversation the server keeps (whose earlier turns it does not
   * carry) cannot be told from an earlier one with the same words, when it adds to one.
   */
  serverHistory?: string | undefined;
  /** The ids of the calls whose outputs it carries (a later step of a turn). */
  answers: readonly string[];
}

/** A call the model emitted, as its response holds it. */
export interface EmittedCall {
  /** The framework's id of the call. */
  id: string;
  toolName: string;
  /** The arguments as the model emitted them (their JSON text, or the value the framework parsed). */
  args: unknown;
}

/** What an adapter that sees its model's responses records of the calls the model emitted. */
export interface EmittedCalls {
  /**
   * Record that the model emitted this call (before its run stops to ask a human). The first
   * arguments stay: a resume that announces the call again with edited ones records nothing.
   */
  record(call: EmittedCall): Promise<void>;
  /**
   * A call its framework reports approved, bound to the exact call (`approveCall`, by `by`) only
   * if the model emitted it (`record`) with these arguments: undefined when bound, else the
   * outcome that refuses it (the model's text: other arguments, or never emitted; nothing ran).
   */
  approve(
    prepared: PreparedCall<unknown>,
    emitted: EmittedCall,
    by: string,
  ): Promise<CallOutcome | undefined>;
}

/** The calls the model emitted, recorded on the approvals' store (`recordAsked` / `checkAsked`). */
export function createEmittedCalls(approvals: Approvals): EmittedCalls {
  // Keyed by the call's id, in no turn (a resume in another process may not know it yet).
  const asked = ({ toolName, args }: EmittedCall) => ({ toolName, turnId: 'emitted', args });
  return {
    record: (call) => approvals.recordAsked(asked(call), call.id),
    approve({ call, policy }, emitted, by) {
      const ref = emitted.id;
      return approvals
        .checkAsked(asked(emitted), ref)
        .then(() => approvals.approveCall(call, { policy, ref, by }))
        .then(() => undefined, errorOutcome);
    },
  };
}

/** A call of a model's response, and whether it may wait for a human's approval. */
export type ModelCall = EmittedCall & { asks: boolean };

/** One request method of a model client, as `RequestTurns.observe` watches it. */
export interface ObservedMethod {
  /** What the request (the method's argument) says of its turn. */
  turnOf(request: never): RequestTurn;
  /** The calls of the response (`stream`: of one of its events), undefined when it holds none. */
  callsOf(response: never): Promise<readonly ModelCall[]> | undefined;
  /** The method returns an async iterable of events. @default false */
  stream?: boolean;
}

/** One call of a tool its framework hands the model's arguments with the call's id (`runLinked`). */
export interface LinkedCall<Info> {
  toolName: string;
  /** The framework's id of the call: the call's turn is the one linked to it. */
  callId: string | undefined;
  /** The model's arguments: JSON text, as `prepareCall` takes them. */
  input: unknown;
  /** Whether links are read from the store too (the adapter sees the model's responses). */
  durable: boolean;
  /** The turn of a call no link names: a refusal saying what to set. */
  unlinked: TurnAnchor;
  /** The adapter's call info of the call's turn and the tool's own args. */
  info: (anchor: TurnAnchor, args: unknown) => Info;
  /**
   * Who approved the call, when its framework reports it approved (a resumed run): the approval
   * is bound to the call the model emitted first (`EmittedCalls.approve`). @default never approved
   */
  approvedBy?: (() => Promise<string | undefined>) | undefined;
}

export interface RequestTurns {
  /** The links of call ids to the turn of the request that made them. */
  readonly links: TurnLinks<TurnAnchor>;
  readonly emittedCalls: EmittedCalls;
  /**
   * The turn of a request: with the user's words, from the response it continues (named by its
   * id and the words), else the words themselves, unless they cannot be counted (`hidden`) or
   * the server keeps the conversation (`serverHistory`); with only tool outputs, the turn linked
   * to the calls they answer; else a refusal naming `turnId`.
   */
  anchor(request: RequestTurn): Promise<TurnAnchor>;
  /**
   * The calls of a response, linked to the turn of its request (in the store too when one may
   * wait for an approval, so that a resume in another process finds it), those that may wait
   * (`asks`) recorded as emitted.
   */
  emitted(anchor: TurnAnchor, calls: readonly ModelCall[]): Promise<void>;
  /**
   * For a dispatcher's `beforeRun`: the turn its calls resolve to, linked in the store to the
   * first of their ids, so that a next request that continues this response and carries only
   * the outputs finds it, in any process (also after the first turn of a conversation).
   */
  linkTurn(ids: readonly string[]): (turnId: string) => Promise<void>;
  /**
   * A proxy of a model client whose request `methods` are observed: the turn of each request
   * (`anchor`) read before it is sent, the calls of its response linked to it (`emitted`) when it
   * arrives (a stream's before the event that holds them is passed on). The client's other
   * members are its own, bound to it.
   */
  observe<M extends object>(model: M, methods: Readonly<Record<string, ObservedMethod>>): M;
  /**
   * One call through the pipeline with the turn linked to its call id: prepared, an approval
   * its framework reports bound to the emitted call, run (`execute` gets the prepared call), one
   * outcome.
   */
  runLinked<Info>(
    adapter: Adapter<Info>,
    call: LinkedCall<Info>,
    execute: (prepared: PreparedCall<Info>, context: ExecutionContext) => unknown,
    mark?: (value: unknown, replayed: boolean) => unknown,
  ): Promise<CallOutcome>;
}

/**
 * The turns of the requests an adapter sees (see the module's comment), on the executor's
 * store. `namespace`: the adapter's, for a turn derived from the words alone.
 */
export function createRequestTurns(executor: Idempotency, namespace: string): RequestTurns {
  const links = createTurnLinks<TurnAnchor>(executor);
  const emittedCalls = createEmittedCalls(createApprovals(executor));
  const refuse = (reason: string): TurnAnchor => ({ refuse: reason });
  async function anchor(request: RequestTurn): Promise<TurnAnchor> {
    const { transcript, hidden, continues, serverHistory, answers } = request;
    if (transcript?.some((entry) => entry.role === 'user')) {
      if (hidden !== undefined) return refuse(hidden);
      // A response is followed by one user turn (a second request from it is a retry or a
      // regenerate): with the user's words it names the turn, in every conversation.
      if (continues !== undefined && continues !== '') {
        return { turn: deriveTurnId(`response:${continues}`, transcript) as string };
      }
      if (serverHistory !== undefined) return refuse(serverHistory);
      return { said: deriveTurnId(namespace, transcript) as string };
    }
    const linked = await links.find(answers);
    if (linked !== undefined) return linked;
    return refuse(
      answers.length > 0
        ? 'the request holds only tool outputs (a later step of a turn) and the step that started the turn was not run through this store, so the turn is unknown. Nothing ran. Run every step of the turn through the same store (its first step links the turn to its calls), or pass turnId.'
        : 'the request has no user message, so the turn is unknown. Nothing ran. Pass turnId.',
    );
  }
  async function emitted(turn: TurnAnchor, calls: readonly ModelCall[]): Promise<void> {
    const asking = calls.filter((call) => call.asks);
    await Promise.all(asking.map((call) => emittedCalls.record(call)));
    await links.remember(
      calls.map((call) => call.id),
      turn,
      asking.length > 0,
    );
  }
  /** A request method, observed (see `observe`). */
  const watched = (send: (request: unknown) => unknown, method: ObservedMethod) => {
    const link = async (turn: TurnAnchor, answer: unknown) => {
      const calls = method.callsOf(answer as never);
      if (calls !== undefined) await emitted(turn, await calls);
    };
    if (method.stream === true) {
      return async function* (request: unknown) {
        const turn = await anchor(method.turnOf(request as never));
        for await (const event of send(request) as AsyncIterable<unknown>) {
          await link(turn, event);
          yield event;
        }
      };
    }
    return async (request: unknown) => {
      const turn = await anchor(method.turnOf(request as never));
      const response = await send(request);
      await link(turn, response);
      return response;
    };
  };
  return {
    links,
    emittedCalls,
    anchor,
    emitted,
    linkTurn: (ids) => (turnId) => links.remember(ids.slice(0, 1), { turn: turnId }, true),
    observe(model, methods) {
      const watching = new Map<PropertyKey, unknown>();
      for (const [name, method] of Object.entries(methods)) {
        const send = (request: unknown) =>
          (Reflect.get(model, name, model) as (request: unknown) => unknown).call(model, request);
        watching.set(name, watched(send, method));
      }
      return new Proxy(model, {
        get(target, property) {
          if (watching.has(property)) return watching.get(property);
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
    async runLinked(adapter, call, execute, mark) {
      const { toolName, callId } = call;
      const linked = callId ? await links.find([callId], call.durable) : undefined;
      const turn = linked ?? call.unlinked;
      const info = (args: unknown) => call.info(turn, args);
      const prepared = await prepareCall(adapter, { toolName, input: call.input, info });
      if (!('prepared' in prepared)) return 'text' in prepared ? { text: prepared.text } : prepared;
      const ready = prepared.prepared;
      const by = callId === undefined ? undefined : await call.approvedBy?.();
      const emitted = { id: callId as string, toolName, args: call.input };
      const refused = by && (await emittedCalls.approve(ready, emitted, by));
      if (refused) return refused;
      return runPrepared(adapter, ready, (_args, context) => execute(ready, context), mark);
    },
  };
}
