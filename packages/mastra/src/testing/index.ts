/**
 * A local scripted OpenAI-compatible server (Chat Completions and Responses, JSON and SSE, with
 * faults: dropped connections, broken streams, 5xx) for running a Mastra agent offline: point
 * the model at it with `{ id: 'openai/gpt-4o-mini', url: server.baseURL, apiKey: 'test' }`.
 */
export {
  type Fault,
  type ModelTurn,
  type RecordedRequest,
  type ScriptedReply,
  type ScriptedServer,
  type ScriptedServerOptions,
  startScriptedServer,
} from '@idempotent-tools/openai/testing';
