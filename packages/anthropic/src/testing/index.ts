export {
  type Fault,
  type ModelTurn,
  type RecordedRequest,
  type ScriptedReply,
  type ScriptedServer,
  type ScriptedServerOptions,
  startScriptedServer,
} from './scripted-server.js';
