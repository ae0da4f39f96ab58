import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RETRY_SAFE_NOTE } from '@idempotent-tools/langchain';
import { afterEach, expect, test } from 'vitest';
import { main, problems } from './agent.js';

const dataDir = () => mkdtempSync(join(tmpdir(), 'langchain-agent-'));
const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
});

test('offline: the lost reply, the later retry, the duplicate email and the restart are replays; Bob gets his own ticket', async () => {
  delete process.env.OPENAI_API_KEY;
  const result = await main({ dataDir: dataDir() });
  expect(result.ticketsBy).toEqual({ cus_ada: 1, cus_bob: 1 });
  expect(result.emailsTo).toEqual({ 'ada@example.com': 1, 'bob@example.com': 1 });
  expect(result.sideEffects).toBe(4);
  expect(problems(result)).toEqual([]); // what npm start checks
  // The sentence about the run without the middleware is that run's own count.
  expect(result.withoutMiddleware).toEqual({
    ticketsBy: { cus_ada: 4, cus_bob: 1 },
    emailsTo: { 'ada@example.com': 3, 'bob@example.com': 1 },
    sideEffects: 9,
  });
  expect(result.transcript.at(-1)).toBe(
    'The same run without the middleware: 5 ticket(s) {"cus_ada":4,"cus_bob":1}, 4 email(s) {"ada@example.com":3,"bob@example.com":1}: 5 duplicate side effect(s) prevented.',
  );
  // The retried lost reply, the ticket opened again, the second email, and both after restart.
  expect(result.replayed).toBe(5);
  const transcript = result.transcript.join('\n');
  expect(transcript).toMatch(/"replayed":true\} {2}\[call_2, REPLAYED\]/);
  // Bob typed the same words and the model made the same call: his own ticket, not Ada's.
  expect(transcript).toMatch(/"ticketId":"T-0002","customerId":"cus_bob".*\[call_8, ran\]/);
});

test('offline, the same run without the middleware: the duplicates it prevents', async () => {
  delete process.env.OPENAI_API_KEY;
  const result = await main({ dataDir: dataDir(), idempotent: false });
  expect(result.ticketsBy).toEqual({ cus_ada: 4, cus_bob: 1 });
  expect(result.emailsTo).toEqual({ 'ada@example.com': 3, 'bob@example.com': 1 });
  expect(result.withoutMiddleware).toBeUndefined();
  // npm start's check sees the duplicates.
  expect(problems(result)).toEqual([
    'ticket for cus_ada: 4, expected 1',
    'email for ada@example.com: 3, expected 1',
  ]);
});

test("npm start's check fails on an effect that went missing or went to another user", () => {
  const emailsTo = { 'ada@example.com': 1, 'bob@example.com': 1 };
  // Bob handed Ada's ticket, replayed: he has none of his own.
  expect(problems({ ticketsBy: { cus_ada: 1 }, emailsTo })).toEqual([
    "ticket for cus_bob is missing (or was replayed from another user's)",
  ]);
  expect(problems({ ticketsBy: { cus_ada: 1, cus_bob: 1, cus_eve: 1 }, emailsTo })).toEqual([
    'ticket for cus_eve: 1, expected 0',
  ]);
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
  const ticket = { title: 'Login broken' };
  const script = [
    () => toolCall('lookup_customer', {}),
    () => toolCall('create_ticket', ticket),
    () => toolCall('send_email', { subject: 'Your ticket T-0001' }),
    () => ({ role: 'assistant', content: 'Ticket T-0001 is open.' }),
    // After the restart the model, unsure, opens the ticket again.
    () => toolCall('create_ticket', ticket),
    () => ({ role: 'assistant', content: 'Ticket T-0001 is open.' }),
    // Bob, in his own chat, with the same words: the same call.
    () => toolCall('create_ticket', ticket),
    () => toolCall('send_email', { subject: 'Your ticket T-0002' }),
    () => ({ role: 'assistant', content: 'Ticket T-0002 is open.' }),
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

    expect(result.ticketsBy).toEqual({ cus_ada: 1, cus_bob: 1 });
    expect(result.emailsTo).toEqual({ 'ada@example.com': 1, 'bob@example.com': 1 });
    const descriptions = Object.fromEntries(
      (requests[0]?.tools ?? []).map((t) => [t.function.name, t.function.description]),
    );
    expect(descriptions).toEqual({
      lookup_customer: 'The signed-in customer.',
      create_ticket: `Open a support ticket for the signed-in customer.\n\n${RETRY_SAFE_NOTE}`,
      send_email: `Email the signed-in customer.\n\n${RETRY_SAFE_NOTE}`,
    });
    // The model read the replayed ticket (the lost reply's retry, and the one after restart).
    const toolReplies = (i: number) =>
      requests[i]?.messages.filter((m) => m.role === 'tool').map((m) => m.content) ?? [];
    expect(toolReplies(2)[1]).toMatch(/"ticketId":"T-0001".*"replayed":true/);
    expect(toolReplies(5).at(-1)).toMatch(/"ticketId":"T-0001".*"replayed":true/);
    // Bob's ticket ran for him.
    expect(toolReplies(7).at(-1)).toMatch(/"ticketId":"T-0002","customerId":"cus_bob"/);
    expect(toolReplies(7).at(-1)).not.toMatch(/replayed/);
  } finally {
    server.close();
  }
});
