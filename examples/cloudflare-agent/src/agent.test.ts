import { expect, test } from 'vitest';
import { main, problems } from './agent.js';

test('in workerd: a retried request and a double click each open one ticket, the repeat replayed', async () => {
  const result = await main();
  expect(problems(result)).toEqual([]);
  expect(result.tickets.map((t) => t.chatId).sort()).toEqual(['chat-ada', 'chat-bob']);
  // The retry across two requests: the second answer is the first ticket, replayed.
  expect(result.ada.map((r) => r.tools[0]?.output)).toEqual([
    { ticketId: 'T-0001' },
    { ticketId: 'T-0001', replayed: true },
  ]);
});
