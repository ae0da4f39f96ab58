/**
 * `pnpm serve`: the helpdesk MCP server on http://127.0.0.1:$PORT/mcp (default 3000), for a real
 * MCP host (an agent with a model) or the MCP Inspector. Records in .demo-data/serve.db.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createIdempotency } from '@idempotent-tools/mcp';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createHelpdeskServer, Helpdesk, listen } from './server.js';

const dataDir = fileURLToPath(new URL('../.demo-data/', import.meta.url));
mkdirSync(dataDir, { recursive: true });
const idempotency = createIdempotency({ store: openSqliteStore(`${dataDir}serve.db`) });
const helpdesk = new Helpdesk();
const server = await listen({
  createServer: () => createHelpdeskServer(helpdesk, idempotency, console.log),
  port: Number(process.env.PORT ?? 3000),
  log: console.log,
});
console.log(`helpdesk MCP server (Streamable HTTP) at ${server.url}; Ctrl-C to stop`);
