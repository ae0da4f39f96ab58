/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter, with the Agents SDK's OpenAI models on
 * the real `openai` client against the scripted server, JSON or streamed. The ticket app and the
 * turn bookkeeping are `openaiTurnDriver` of @idempotent-tools/testing/openai.
 */
import {
  cacheLast,
  isDeveloperError,
  openaiTurnDriver,
  userMessage,
} from '@idempotent-tools/testing/openai';
import {
  Agent,
  type AgentInputItem,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import { wrapAgentTools } from '../agents.js';
import { ticketArgs } from './app.js';

export { isDeveloperError };

/** The apps' client: no retries of its own (the cases retry the turn). */
const driver = (conversation: Parameters<typeof openaiTurnDriver<OpenAI>>[1]) =>
  openaiTurnDriver(
    (baseURL) => new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 }),
    conversation,
  );
/** The Agents SDK: `run(agent, ...)` with the conversation id in the app's context. */
export const agentsDriver = (options: {
  model: 'responses' | 'chat';
  stream: boolean;
  history: 'input' | 'previousResponseId';
}) =>
  driver((app, conversationId, { wrapTwice }) => {
    const ticket = tool({
      name: 'create_ticket',
      description: 'Open a support ticket.',
      parameters: ticketArgs,
      execute: (args) => app.system.create(args),
    });
    const model =
      options.model === 'responses'
        ? new OpenAIResponsesModel(app.openai, 'm')
        : new OpenAIChatCompletionsModel(app.openai, 'm');
    const chained = options.history === 'previousResponseId';
    type State = { history: AgentInputItem[]; id?: string | undefined; pending: AgentInputItem[] };
    let last: State = { history: [], pending: [] };
    let before = last;
    const context = conversationId === undefined ? {} : { conversationId };
    return async (turn) => {
      // The app builds its agent per request, with the instructions of the moment.
      const own = new Agent({
        name: 'support',
        instructions: turn.system,
        tools: [ticket],
        model,
        // The turn ends with the tool's result: the app shows it, the model says nothing more.
        ...(turn.mode === 'tool' ? { toolUseBehavior: 'stop_on_first_tool' as const } : {}),
      });
      const wrapped = wrapAgentTools(app.idempotency, own);
      const agent = wrapTwice ? wrapAgentTools(app.idempotency, wrapped) : wrapped;
      if (!turn.resend) before = last;
      const user: AgentInputItem = userMessage(turn, 'input_text', 'providerData');
      const earlier = chained ? before.pending : before.history;
      const plain = turn.shape === 'string' && !turn.cache && earlier.length === 0;
      const input: string | AgentInputItem[] = plain ? turn.text : [...earlier, user];
      const runOptions = {
        context,
        ...(chained && before.id !== undefined ? { previousResponseId: before.id } : {}),
        ...(turn.cacheEachStep
          ? {
              callModelInputFilter: ({
                modelData,
              }: {
                modelData: { input: AgentInputItem[] };
              }) => ({
                ...modelData,
                input: cacheLast(modelData.input, 'input_text', 'providerData'),
              }),
            }
          : {}),
      };
      const result = options.stream
        ? await run(agent, input, { ...runOptions, stream: true })
        : await run(agent, input, runOptions);
      if (options.stream) await (result as { completed: Promise<void> }).completed;
      // A run stopped on the tool's result leaves it for the next request of a chained app.
      const results = result.newItems
        .map((item) => item.rawItem as AgentInputItem)
        .filter((item) => (item as { type?: string }).type === 'function_call_result');
      last = {
        history: result.history,
        id: result.lastResponseId,
        pending: turn.mode === 'tool' ? results : [],
      };
    };
  });

/** What the Agents SDK surfaces support besides the five core cases. */
export const agentsSupports = {
  shapes: ['string', 'parts', 'items'],
  providerOptions: true,
  wrapTwice: true,
  methods: ['sayRepeatingCall', 'sayAnsweredByTool'],
} as const;
