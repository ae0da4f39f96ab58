/**
 * The `@modelcontextprotocol/server` / `@modelcontextprotocol/client` 2.x side of the tests: the
 * 2026-07-28 HTTP server and client, and the helpdesk on a 2.x McpServer (plus a multi
 * round-trip tool). Kept apart so the 1.x suites run against older 1.x SDKs without 2.x.
 */
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  createMcpHandler,
  inputRequired,
  McpServer as ModernMcpServer,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { IdempotentServerOptions } from '../index.js';
import { createHelpdesk, type Runs } from './helpdesk.js';
import { type HttpServerOptions, listen } from './http.js';

/**
 * The helpdesk on a 2.x McpServer, with one more tool: `deploy` (2026-07-28 multi round-trip)
 * asks the user to confirm, and deploys on the retry that carries the answer.
 */
export function createModernHelpdesk(runs: Runs, options: IdempotentServerOptions): McpServer {
  const bare = new ModernMcpServer({ name: 'helpdesk', version: '1.0.0' }) as unknown as McpServer;
  const server = createHelpdesk(runs, options, bare) as unknown as ModernMcpServer;
  const ran = (tool: string) => {
    runs[tool] = (runs[tool] ?? 0) + 1;
    return runs[tool];
  };
  server.registerTool(
    'deploy',
    { description: 'Deploy a service.', inputSchema: z.object({ env: z.string() }) },
    async ({ env }, ctx) => {
      ran('deploy:round');
      const answer = ctx.mcpReq.inputResponses?.confirm as { action?: string } | undefined;
      if (answer?.action !== 'accept') {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: `Deploy to ${env}?`,
              requestedSchema: { type: 'object', properties: { yes: { type: 'boolean' } } },
            }),
          },
        });
      }
      return { content: [{ type: 'text', text: `deployed to ${env} #${ran('deploy')}` }] };
    },
  );
  return server as unknown as McpServer;
}

/**
 * `@modelcontextprotocol/server` 2.x: `createMcpHandler` (2026-07-28, stateless; 2025 traffic on
 * its stateless legacy leg) on node:http on 127.0.0.1, with the same fault.
 */
export async function startModernServer(options: Omit<HttpServerOptions, 'stateless'>) {
  const handler = createMcpHandler(() => options.createServer(), {
    responseMode: options.json ? 'json' : 'auto',
  });
  return listen(
    async (req, res, body) => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string') headers.set(name, value);
      }
      const request = new Request(`http://127.0.0.1${req.url}`, {
        method: req.method ?? 'POST',
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body !== null) for await (const chunk of response.body) res.write(chunk);
      res.end();
    },
    () => handler.close(),
  );
}

/** A real 2.x `Client` speaking 2026-07-28 (per-request `_meta`, no session) over HTTP. */
export async function connectModern(url: URL, name = 'modern-client') {
  const client = new ModernClient(
    { name, version: '1.0.0' },
    { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  // The user accepts every elicitation (a multi round-trip tool's question).
  client.setRequestHandler('elicitation/create', async () => ({
    action: 'accept',
    content: { yes: true },
  }));
  await client.connect(new ModernTransport(url));
  return client;
}
