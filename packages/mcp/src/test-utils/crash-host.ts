import { appendFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { idempotentServer, TURN_ID_META } from '../index.js';
import { callTool, connectInMemory } from './helpdesk.js';

export type Crash = 'after-effect' | 'after-persist' | undefined;

/**
 * An MCP host: an idempotent server (SQLite store) and a client in one process, calling
 * `charge_card` once (side effect: a line in `effectsFile`). `crash` SIGKILLs the process right
 * after the side effect, or once the outcome is stored (before the reply is sent).
 */
export async function runHost(options: {
  dbPath: string;
  effectsFile: string;
  crash: Crash;
  turnId?: string | undefined;
}) {
  const store = openSqliteStore(options.dbPath);
  const server = idempotentServer(new McpServer({ name: 'payments', version: '1.0.0' }), {
    store,
    lease: 1_000,
    onEvent: (event) => {
      if (options.crash === 'after-persist' && event.outcome === 'executed') {
        process.kill(process.pid, 'SIGKILL');
      }
    },
  });
  server.registerTool(
    'charge_card',
    { description: 'Charge a card.', inputSchema: { amount: z.number(), currency: z.string() } },
    async ({ amount, currency }) => {
      appendFileSync(options.effectsFile, `${amount} ${currency} pid=${process.pid}\n`);
      if (options.crash === 'after-effect') process.kill(process.pid, 'SIGKILL');
      return {
        content: [{ type: 'text', text: `charged ${amount} ${currency}` }],
        structuredContent: { chargeId: `ch_${process.pid}`, amount },
      };
    },
  );
  const client = await connectInMemory(server);
  try {
    return await callTool(
      client,
      'charge_card',
      { amount: 1999, currency: 'usd' },
      options.turnId === undefined ? undefined : { [TURN_ID_META]: options.turnId },
    );
  } finally {
    await client.close();
    store.close();
  }
}
