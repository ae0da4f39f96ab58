/**
 * The scripted Messages server on its own, for poking at it with the real SDK or curl:
 * `pnpm serve`, then `ANTHROPIC_BASE_URL=<printed URL>` in another app. Ctrl-C stops it.
 */
import { startScriptedServer } from '@idempotent-tools/testing/anthropic';

const server = await startScriptedServer({
  respond: (turn) =>
    turn.toolResults.length === 0
      ? { toolUses: [{ name: 'create_ticket', input: { title: turn.userText || 'untitled' } }] }
      : { text: `Done: ${turn.toolResults.join(' | ')}` },
});
console.log(`Scripted Messages API on ${server.baseURL} (POST /v1/messages)`);
process.on('SIGINT', () => void server.close().then(() => process.exit(0)));
