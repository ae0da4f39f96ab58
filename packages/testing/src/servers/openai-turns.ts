/**
 * The ticket app of the OpenAI adapters' turn identity cases (`runTurnIdentityCases`): the
 * scripted server, the counted ticket vendor, the turn bookkeeping (fresh, resent, lost reply,
 * repeated call, answered by the tool). Each adapter gives its client and how one of its surfaces
 * runs a turn (`openaiTurnDriver(client, conversation)`).
 */
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type Idempotency,
} from '@idempotent-tools/core';
import { losingTicketSystem, retryTurn, type TicketSystem } from '../tickets.js';
import type {
  SayOptions,
  TurnIdentityConversation,
  TurnIdentityDriver,
} from '../turn-identity-cases.js';
import { type ModelTurn, type ScriptedServer, startScriptedServer } from './openai.js';

/** The developer's error as the framework surfaces it (the Agents SDK wraps it in a ToolCallError). */
export const isDeveloperError = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ConfigurationError.isInstance((error as { error?: unknown } | undefined)?.error);

/** How the user's message is sent: a string, text parts, or a `type: 'message'` item. */
export type Shape = 'string' | 'parts' | 'items';

/** One attempt of a user turn, as a surface sends it. */
export interface Turn {
  text: string;
  system: string;
  shape: Shape;
  /** The user message carries a prompt cache breakpoint. */
  cache: boolean;
  /** The same turn sent again (the history before it, without the first attempt's answer). */
  resend: boolean;
  /**
   * `answer`: the model calls the tool, then answers; `repeat`: it repeats its call in the next
   * step, then answers; `tool`: the app stops after the tool outputs (no answer from the model).
   */
  mode: 'answer' | 'repeat' | 'tool';
  /** Move the cache breakpoint onto the last message before every step. */
  cacheEachStep: boolean;
}

export type Say = (turn: Turn) => Promise<void>;

/** One driver's app: `openai` is the adapter's client on the scripted server. */
export interface App<C> {
  server: ScriptedServer;
  openai: C;
  idempotency: Idempotency;
  system: TicketSystem;
  /** The scripted model repeats its call once in the next step. */
  repeat: boolean;
  /** How many function calls the scripted model emitted. */
  emitted: number;
  /** Cut the reply of the request after the next effect (a broken stream, a cut body). */
  loseNextReply(): void;
}

/** OpenAI's prompt cache breakpoint on a content part (Chat and Responses). */
const BREAKPOINT = { prompt_cache_breakpoint: { mode: 'explicit' } } as const;

type Part = Record<string, unknown>;
export type Marking = 'field' | 'providerData';
const mark = (part: Part, how: Marking): Part =>
  how === 'field' ? { ...part, ...BREAKPOINT } : { ...part, providerData: BREAKPOINT };
const unmark = (part: Part): Part => {
  const { prompt_cache_breakpoint: _, providerData: __, ...rest } = part;
  return rest;
};

/**
 * The messages with the cache breakpoint moved onto the last one (its content, or the output of
 * a function call output), taken off every other (the AI SDK's `prepareStep` pattern).
 */
export function cacheLast<T>(items: readonly T[], textType: string, how: Marking): T[] {
  return items.map((item, index) => {
    const entry = item as Part;
    const last = index === items.length - 1;
    const field =
      entry.content != null
        ? 'content'
        : typeof entry.output === 'string' && how === 'field'
          ? 'output'
          : undefined;
    if (field === undefined) return item;
    const value = entry[field];
    let parts: Part[] | undefined =
      typeof value === 'string'
        ? last
          ? [{ type: textType, text: value }]
          : undefined
        : Array.isArray(value)
          ? (value as Part[]).map(unmark)
          : undefined;
    if (parts === undefined) return item;
    if (last && parts.length > 0) {
      parts = [...parts.slice(0, -1), mark(parts.at(-1) as Part, how)];
    }
    return { ...entry, [field]: parts } as T;
  });
}

/** A user message: a string content, text parts, or a `type: 'message'` item (of any API). */
export function userMessage(turn: Turn, textType: string, how: Marking): never {
  const parts = [
    turn.cache
      ? mark({ type: textType, text: turn.text }, how)
      : { type: textType, text: turn.text },
  ];
  if (turn.shape === 'items') return { type: 'message', role: 'user', content: parts } as never;
  if (turn.shape === 'parts' || turn.cache) return { role: 'user', content: parts } as never;
  return { role: 'user', content: turn.text } as never;
}

/**
 * A driver whose conversations are made by `conversation(app, id, options)`, its client made by
 * `client(baseURL)` (no retries of its own: the cases retry).
 */
export function openaiTurnDriver<C>(
  client: (baseURL: string) => C,
  conversation: (app: App<C>, id: string | undefined, options: { wrapTwice?: boolean }) => Say,
) {
  return async (): Promise<TurnIdentityDriver> => {
    const app = { repeat: false, emitted: 0 } as App<C>;
    const server = await startScriptedServer({
      // Opens a ticket titled with the user's words once per turn (twice when it repeats the
      // call), then answers.
      respond: (turn: ModelTurn) => {
        if (turn.toolOutputs.length >= (app.repeat ? 2 : 1)) {
          return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
        }
        app.emitted++;
        return { toolCalls: [{ name: 'create_ticket', arguments: { title: turn.userText } }] };
      },
    });
    const vendor = losingTicketSystem(() => server.inject('truncate'));
    Object.assign(app, {
      server,
      openai: client(server.baseURL),
      idempotency: createIdempotency({ store: createMemoryStore() }),
      system: vendor.system,
      loseNextReply: vendor.loseNextReply,
    });
    return {
      conversation(id, options = {}): TurnIdentityConversation {
        const say = conversation(app, id, options);
        const fresh = (text: string, o: SayOptions | undefined, mode: Turn['mode']): Turn => ({
          text,
          system: o?.system ?? 'You open tickets.',
          shape: (o?.shape ?? 'string') as Shape,
          cache: o?.providerOptions === true,
          resend: false,
          mode,
          cacheEachStep: false,
        });
        let last = fresh('', undefined, 'answer');
        const turn = async (attempt: Turn, lose = false) => {
          last = attempt;
          if (lose) app.loseNextReply();
          app.repeat = attempt.mode === 'repeat';
          const emitted = app.emitted;
          try {
            await retryTurn(
              (round) => say({ ...attempt, resend: attempt.resend || round > 0 }),
              isDeveloperError,
            );
            // The case is what it says: the model did repeat its call.
            if (attempt.mode === 'repeat' && app.emitted - emitted < 2) {
              throw new Error('the scripted model did not repeat its call');
            }
          } finally {
            app.repeat = false;
          }
        };
        return {
          say: (text, o) => turn(fresh(text, o, 'answer')),
          resend: (o) =>
            turn({
              ...fresh(last.text, o, last.mode),
              system: o?.system ?? last.system,
              resend: true,
            }),
          sayLosingReply: (text, o) => turn(fresh(text, o, 'answer'), true),
          sayRepeatingCall: (text, o) =>
            turn({ ...fresh(text, undefined, 'repeat'), cacheEachStep: o?.cacheEachStep === true }),
          sayAnsweredByTool: (text) => turn(fresh(text, undefined, 'tool')),
        };
      },
      effects: () => vendor.tickets.length,
      close: () => server.close(),
    };
  };
}
