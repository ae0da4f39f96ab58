import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RETRY_SAFE_NOTE } from '@idempotent-tools/langchain';
import { afterEach, expect, test } from 'vitest';
import { main } from './agent.js';

const dataDir = () => mkdtempSync(join(tmpdir(), 'langchain-agent-'));
const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});

test('offline: the lost reply, the later retry, the duplicate email and the restart are replays', async () => {
  delete process.env.OPENAI_API_KEY;
  const result = await main({ dataDir: dataDir() });
  expect(result.tickets).toBe(1);
  expect(result.emails).toBe(1);
  expect(result.sideEffects).toBe(2);
  // The retried lost reply, the ticket opened again, the second email, and both after restart.
  expect(result.replayed).toBe(5);
  expect(result.transcript.join('\n')).toMatch(/"replayed":true\} {2}\[call_2, REPLAYED\]/);
});

test('offline, the same run without the middleware: the duplicates it prevents', async () => {
  delete process.env.OPENAI_API_KEY;
  const result = await main({ dataDir: dataDir(), idempotent: false });
  expect([result.tickets, result.emails]).toEqual([4, 3]);
});

test('the OPENAI_API_KEY path (ChatOpenAI) against a local scripted OpenAI server', async () => {
  const requests: Array<{
    messages: Array<{ role: string; content: string | null }>;
    tools?: Array<{ function: { name: string; description: string } }>;
  }> = [];
  const toolCall = (name: string, args: object) => ({
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: `call_${requests.length}`,
        type: 'function',
        function: { name, arguments: JSON.stringify(args) },
      },
    ],
  });
  const ticket = { customerId: 'cus_42', title: 'Login broken' };
  const script = [
    () => toolCall('lookup_customer', { email: 'ada@example.com' }),
    () => toolCall('create_ticket', ticket),
    () => toolCall('send_email', { to: 'ada@example.com', subject: 'Your ticket T-0001' }),
    () => ({ role: 'assistant', content: 'Ticket T-0001 is open.' }),
    // After the restart the model, unsure, opens the ticket again.
    () => toolCall('create_ticket', ticket),
    () => ({ role: 'assistant', content: 'Ticket T-0001 is open.' }),
  ];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      requests.push(JSON.parse(body));
      const message = script[requests.length - 1]?.() ?? { role: 'assistant', content: 'Done.' };
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          id: `chatcmpl-${requests.length}`,
          object: 'chat.completion',
          created: 0,
          model: 'gpt-4o-mini',
          choices: [{ index: 0, message, finish_reason: message.content ? 'stop' : 'tool_calls' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    process.env.OPENAI_API_KEY = 'sk-test';
    process.env.OPENAI_BASE_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    const result = await main({ dataDir: dataDir() });

    expect([result.tickets, result.emails]).toEqual([1, 1]);
    const descriptions = Object.fromEntries(
      (requests[0]?.tools ?? []).map((t) => [t.function.name, t.function.description]),
    );
    expect(descriptions).toEqual({
      lookup_customer: 'Find a customer by email.',
      create_ticket: `Open a support ticket for a customer.\n\n${RETRY_SAFE_NOTE}`,
      send_email: `Email a customer.\n\n${RETRY_SAFE_NOTE}`,
    });
    // The model read the replayed ticket (the lost reply's retry, and the one after restart).
    const toolReplies = (i: number) =>
      requests[i]?.messages.filter((m) => m.role === 'tool').map((m) => m.content) ?? [];
    expect(toolReplies(2)[1]).toMatch(/"ticketId":"T-0001".*"replayed":true/);
    expect(toolReplies(5).at(-1)).toMatch(/"ticketId":"T-0001".*"replayed":true/);
  } finally {
    server.close();
  }
});
