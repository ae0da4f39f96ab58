// The `@idempotent-tools/testing/openai` entry: the scripted OpenAI server and the ticket app
// of the OpenAI adapters' turn identity drivers.
export * from './servers/openai.js';
export {
  CRASH_PROMPT,
  expectResumedTicket,
  openaiClientOptions,
  scriptedServers,
  sendModel,
  ticketModel,
} from './servers/openai-tickets.js';
export {
  type App as TicketTurnApp,
  cacheLast,
  isDeveloperError,
  type Marking,
  openaiTurnDriver,
  type Say,
  type Shape as TurnShape,
  type Turn as TicketTurn,
  userMessage,
} from './servers/openai-turns.js';
