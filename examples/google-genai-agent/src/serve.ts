/**
 * The scripted Gemini API server alone, for your own code: point `@google/genai` at the URL it
 * prints (`httpOptions: { baseUrl }`, any API key). Its model asks for create_ticket with the
 * user's words, then answers. Ctrl-C stops it.
 */
import { startScriptedServer } from '@idempotent-tools/testing/gemini';

const server = await startScriptedServer({
  respond: (turn) =>
    turn.functionResponses.length === 0
      ? { functionCalls: [{ name: 'create_ticket', args: { title: turn.userText } }] }
      : { text: `Done: ${JSON.stringify(turn.functionResponses[0]?.response)}` },
});
console.log(`Scripted Gemini API on ${server.baseUrl}`);
console.log(`new GoogleGenAI({ apiKey: 'test', httpOptions: { baseUrl: '${server.baseUrl}' } })`);
process.on('SIGINT', () => void server.close().then(() => process.exit(0)));
