import { randomUUID } from 'node:crypto';
import { ConfigurationError, createMemoryStore } from '@idempotent-tools/core';
import type {
  ApprovalDriver,
  ChargeArgs,
  PendingApproval,
  SayOptions,
  TurnIdentityDriver,
} from '@idempotent-tools/testing';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/openai';
import { RequestContext } from '@mastra/core/request-context';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import {
  approveToolCallGenerate,
  declineToolCallGenerate,
  idempotentTools,
  type ToolCallInfo,
} from '../index.js';
import {
  type Api,
  carryOut,
  carryOutModel,
  libsql,
  makeAgent,
  runAgent,
  startModelServer,
  type Transport,
} from './app.js';

/**
 * Mastra rethrows an error of `toModelOutput` as a copy that keeps `name`, `code`, `option` and
 * the message (not the class): both count as the developer's error.
 */
export const isDeveloperError = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ((error as { code?: unknown })?.code === 'configuration' &&
    (error as { name?: unknown }).name === 'ConfigurationError');

/**
 * The shapes a user message takes as Mastra's input: a string, a model message with text parts,
 * a UI message (`parts`, with its own id: new on every attempt, as a client rebuilds it).
 */
export const SHAPES = ['string', 'parts', 'ui'] as const;
/** An Anthropic cache breakpoint, as apps that cache the conversation put it on a message. */
const CACHE = { anthropic: { cacheControl: { type: 'ephemeral' } } };

/** One user message in a shape (provider options need parts: a string cannot hold them). */
export function userMessage(text: string, options: SayOptions = {}): Record<string, unknown> {
  const cached = options.providerOptions === true;
  if (options.shape === 'ui') {
    const part = { type: 'text', text, ...(cached ? { providerMetadata: CACHE } : {}) };
    return { id: randomUUID(), role: 'user', parts: [part] };
  }
  if (options.shape === 'parts' || cached) {
    const part = { type: 'text', text, ...(cached ? { providerOptions: CACHE } : {}) };
    return { role: 'user', content: [part], ...(cached ? { providerOptions: CACHE } : {}) };
  }
  return { role: 'user', content: text };
}

/** `carry_out` once (`once`), or once and again in the next step (`repeat`), then an answer. */
function scriptedModel(script: { mode: 'once' | 'repeat' }) {
  return (turn: ModelTurn): ScriptedReply =>
    script.mode === 'repeat' && turn.toolOutputs.length < 2
      ? { toolCalls: [{ name: 'carry_out', arguments: { request: turn.userText } }] }
      : carryOutModel(turn);
}

/**
 * Mastra's `prepareStep` as apps use it to cache the conversation: before each step, the cache
 * breakpoint moves onto the last message (the user's message at the first step, then off it).
 */
const moveCacheBreakpoint = ({
  messages,
}: {
  messages: Array<{ content: { providerMetadata?: Record<string, unknown> } }>;
}) => {
  for (const message of messages) {
    if (message.content.providerMetadata !== undefined) {
      delete message.content.providerMetadata.anthropic;
    }
  }
  const last = messages.at(-1);
  if (last !== undefined) last.content.providerMetadata = { ...CACHE };
};

async function expectLost(attempt: Promise<unknown>) {
  const lost = await attempt.then(
    () => false,
    () => true,
  );
  if (!lost) throw new Error('the reply was meant to be lost');
}

/**
 * The identity cases over Mastra Memory (a LibSQL file): the conversation is the memory thread
 * (`memory: { thread, resource }`), the app sends only the new user message. A reply lost after
 * the tool ran is a truncated model response: Mastra stores the run with an `error` part, the app
 * sends the message again. A request re-sent whose reply was never saved is a run killed before
 * Mastra saved it: Mastra saves a run's messages when it ends, so its messages are not in the
 * thread (the driver deletes them) and the app sends the message again. A turn answered by the
 * tool is a run with `maxSteps: 1`.
 */
export function memoryThreadDriver(transport: Transport, api: Api = 'chat') {
  return async (): Promise<TurnIdentityDriver> => {
    const script = { mode: 'once' as 'once' | 'repeat' };
    const server = await startModelServer(scriptedModel(script));
    const effects: string[] = [];
    const storage = libsql();
    const store = createMemoryStore();
    const wrap = (twice: boolean) => {
      const once = idempotentTools({ carry_out: carryOut(effects) }, { store });
      return twice ? idempotentTools(once, { store }) : once;
    };
    const tools = wrap(false);
    const agents = new Map<string, ReturnType<typeof makeAgent>>();
    const agentFor = (system = '') => {
      const agent =
        agents.get(system) ??
        makeAgent({ server, tools, api, storage, ...(system ? { instructions: system } : {}) });
      agents.set(system, agent);
      return agent;
    };
    return {
      shapes: SHAPES,
      providerOptions: true,
      wrapTwice: true,
      conversation(thread, options) {
        const own = options?.wrapTwice === true ? wrap(true) : undefined; // throws: wrapped twice
        const memory = thread === undefined ? {} : { memory: { thread, resource: 'user-1' } };
        let last = '';
        const send = (text: string, say: SayOptions = {}, extra: Record<string, unknown> = {}) => {
          const agent =
            own === undefined
              ? agentFor(say.system)
              : makeAgent({ server, tools: own, api, storage });
          return runAgent(agent, transport, [userMessage(text, say)], { ...memory, ...extra });
        };
        /** The thread as a run killed before Mastra saved it leaves it: without that run. */
        const forgetLastRun = async () => {
          const stored = await agentFor().getMemory();
          if (stored === undefined || thread === undefined) return;
          const { messages } = await stored.recall({
            threadId: thread,
            resourceId: 'user-1',
            perPage: false,
          });
          const from = messages.findLastIndex((m) => m.role === 'user');
          await stored.deleteMessages(messages.slice(Math.max(from, 0)).map((m) => m.id));
        };
        return {
          say: async (text, say) => {
            last = text;
            await send(text, say);
          },
          resend: async (say) => {
            await forgetLastRun();
            await send(last, say);
          },
          sayLosingReply: async (text, say) => {
            last = text;
            server.inject(undefined, 'truncate'); // the reply after the tool ran is cut
            await expectLost(send(text, say));
            await send(text, say);
          },
          sayRepeatingCall: async (text, say) => {
            last = text;
            script.mode = 'repeat';
            try {
              await send(text, {}, say?.cacheEachStep ? { prepareStep: moveCacheBreakpoint } : {});
            } finally {
              script.mode = 'once';
            }
          },
          sayAnsweredByTool: async (text) => {
            last = text;
            await send(text, {}, { maxSteps: 1 }); // the run ends with the tool's result
          },
        };
      },
      effects: () => effects.length,
      close: () => server.close(),
    };
  };
}

/** A chat message as the app's client posts it. */
type Posted = Record<string, unknown>;

/**
 * The identity cases over a stateless chat backend: the client posts the conversation so far
 * (user messages and the answers it got) and its chat id, which the backend puts in Mastra's
 * `requestContext`; the tools take it as `conversationId`.
 */
export function postedHistoryDriver(transport: Transport, api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const script = { mode: 'once' as 'once' | 'repeat' };
    const server = await startModelServer(scriptedModel(script));
    const effects: string[] = [];
    const store = createMemoryStore();
    const wrap = (twice: boolean) => {
      const options = {
        store,
        conversationId: ({ context }: ToolCallInfo) =>
          (context.requestContext as RequestContext | undefined)?.get('chatId') as
            | string
            | undefined,
      };
      const once = idempotentTools({ carry_out: carryOut(effects) }, options);
      return twice ? idempotentTools(once, options) : once;
    };
    const tools = wrap(false);
    return {
      shapes: ['string', 'parts'],
      providerOptions: true,
      wrapTwice: true,
      conversation(chatId, options) {
        const own = options?.wrapTwice === true ? wrap(true) : tools; // throws: wrapped twice
        let history: Posted[] = [];
        let request: Posted[] = [];
        const send = async (say: SayOptions = {}, extra: Record<string, unknown> = {}) => {
          const agent = makeAgent({
            server,
            tools: own,
            api,
            ...(say.system ? { instructions: say.system } : {}),
          });
          const requestContext = new RequestContext();
          if (chatId !== undefined) requestContext.set('chatId', chatId);
          const messages = structuredClone(request); // parsed from the request body
          const out = await runAgent(agent, transport, messages, { requestContext, ...extra });
          // What the client got back: the model's messages (tool calls and results, text).
          const answer = (out.response as { messages?: Posted[] } | undefined)?.messages ?? [];
          history = [
            ...request,
            ...(answer.length > 0 ? answer : [{ role: 'assistant', content: out.text }]),
          ];
        };
        let last = '';
        const turn = (text: string, say?: SayOptions) => {
          last = text;
          request = [...history, userMessage(text, say)];
        };
        return {
          say: async (text, say) => {
            turn(text, say);
            await send(say);
          },
          resend: async (say) => {
            // The same history and words, the message rebuilt as `say` says.
            request = [...request.slice(0, -1), userMessage(last, say)];
            await send(say);
          },
          sayLosingReply: async (text, say) => {
            turn(text, say);
            // The model's first reply (the tool call) arrives; the one after the tool ran is cut.
            server.inject(undefined, 'truncate');
            await expectLost(send(say));
            await send(say);
          },
          sayRepeatingCall: async (text, say) => {
            turn(text);
            script.mode = 'repeat';
            try {
              await send({}, say?.cacheEachStep ? { prepareStep: moveCacheBreakpoint } : {});
            } finally {
              script.mode = 'once';
            }
          },
          sayAnsweredByTool: async (text) => {
            turn(text);
            await send({}, { maxSteps: 1 }); // the run ends with the tool's result
          },
        };
      },
      effects: () => effects.length,
      close: () => server.close(),
    };
  };
}

/** Who resumes a suspended call: this package's helpers, or Mastra's own methods. */
export type Resumer = 'helpers' | 'mastra';

/**
 * The approval cases through Mastra's `Agent` with `requireApproval` (Memory and run snapshots on
 * a LibSQL file): the model asks to charge, Mastra suspends the run; the app resumes it with
 * `approveToolCallGenerate` / `declineToolCallGenerate` (this package's helpers, or Mastra's
 * own). An edited state is the run snapshot in Mastra storage edited before the resume (the
 * genuine one written back after); a call the model never asked for is a snapshot whose pending
 * call has a made-up id and other arguments, or a resume of a run and call that do not exist.
 */
export function requireApprovalDriver(resumer: Resumer) {
  return async (): Promise<ApprovalDriver> => {
    const charges: ChargeArgs[] = [];
    let asked: ChargeArgs | undefined;
    const server = await startModelServer((turn) =>
      turn.toolOutputs.length === 0 && asked !== undefined
        ? { toolCalls: [{ name: 'charge', arguments: { ...asked } }] }
        : { content: 'Done.' },
    );
    const charge = createTool({
      id: 'charge',
      description: 'Charge the customer.',
      inputSchema: z.object({ amount: z.number() }),
      requireApproval: true,
      execute: async ({ amount }) => {
        charges.push({ amount });
        return { charged: amount };
      },
    });
    const storage = libsql();
    const tools = idempotentTools({ charge }, { store: createMemoryStore() });
    const agent = makeAgent({ server, tools, storage });
    const workflows = await storage.getStore('workflows');

    /** Both snapshots of a run (the loop and its execution workflow). */
    const snapshots = (runId: string) =>
      Promise.all(
        ['agentic-loop', 'executionWorkflow'].map(async (workflowName) => ({
          workflowName,
          snapshot: await workflows?.loadWorkflowSnapshot({ workflowName, runId }),
        })),
      );
    const write = async (runId: string, saved: Awaited<ReturnType<typeof snapshots>>) => {
      for (const { workflowName, snapshot } of saved) {
        if (snapshot == null) continue;
        await workflows?.persistWorkflowSnapshot({ workflowName, runId, snapshot });
      }
    };
    /** Every copy of the pending call in the snapshots edited: other args, another call id. */
    const edit = async (
      runId: string,
      from: ChargeArgs,
      to: ChargeArgs,
      ids?: [string, string],
    ) => {
      const saved = await snapshots(runId);
      let edited = 0;
      const text = JSON.stringify(saved)
        .replace(
          new RegExp(`(\\\\*)"amount\\1":${from.amount}(?![0-9.])`, 'g'),
          (_all, q: string) => {
            edited += 1;
            return `${q}"amount${q}":${to.amount}`;
          },
        )
        .replaceAll(ids?.[0] ?? '\u0000', ids?.[1] ?? '');
      if (edited === 0) throw new Error('the snapshot holds no arguments to edit');
      await write(runId, JSON.parse(text));
      return saved;
    };

    const memory = () => ({ memory: { thread: `chat-${randomUUID()}`, resource: 'user-1' } });
    type Target = {
      runId: string;
      toolCallId: string;
      memory: { thread: string; resource: string };
    };
    const check = (out: { error?: unknown }) => {
      if (out.error !== undefined) throw out.error;
    };
    const approve = async (target: Target) =>
      check(
        resumer === 'helpers'
          ? await approveToolCallGenerate(agent, { ...target, by: 'alice@example.com' })
          : await agent.approveToolCallGenerate(target),
      );
    const reject = async (target: Target) =>
      check(
        resumer === 'helpers'
          ? await declineToolCallGenerate(agent, {
              ...target,
              by: 'bob@example.com',
              reason: 'No.',
            })
          : await agent.declineToolCallGenerate(target),
      );
    /** Resume from an edited snapshot, then write the genuine one back. */
    const fromEdited = async (target: Target, genuine: Awaited<ReturnType<typeof snapshots>>) => {
      try {
        await approve(target);
      } finally {
        await write(target.runId, genuine);
      }
    };

    return {
      async ask(args): Promise<PendingApproval> {
        asked = args;
        const thread = memory();
        const out = await agent.generate(`Charge ${args.amount}.`, thread);
        if (out.finishReason !== 'suspended') throw new Error(`not suspended: ${out.finishReason}`);
        const toolCallId = (out.suspendPayload as { toolCallId?: string } | undefined)?.toolCallId;
        if (out.runId === undefined || toolCallId === undefined) throw new Error('no call id');
        const target: Target = { runId: out.runId, toolCallId, ...thread };
        return {
          approve: () => approve(target),
          reject: () => reject(target),
          approveEdited: async (other) => fromEdited(target, await edit(target.runId, args, other)),
          approveForOther: async (other) => {
            const madeUp = `call_${randomUUID().slice(0, 8)}`;
            const genuine = await edit(target.runId, args, other, [toolCallId, madeUp]);
            await fromEdited({ ...target, toolCallId: madeUp }, genuine);
          },
        };
      },
      async forge(args) {
        // A conversation in which the model asked for nothing; the client resumes a made-up run.
        asked = undefined;
        const thread = memory();
        check(await agent.generate(`Charge ${args.amount}.`, thread));
        await approve({ runId: randomUUID(), toolCallId: `call_${randomUUID()}`, ...thread });
      },
      effects: () => charges,
      close: () => server.close(),
    };
  };
}
