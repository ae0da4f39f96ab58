import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { TURN_ID_META } from '../index.js';
import { type Answer, asker, connectAsking, createPayments } from './approval-app.js';
import { callTool } from './helpdesk.js';

/** Where the host SIGKILLs itself: while the user is asked, after the refund, after it is stored. */
export type ApprovalCrash = 'while-asking' | 'after-effect' | 'after-persist' | undefined;

/**
 * An MCP host: the payments server (SQLite store) and a client in one process, calling `refund`
 * once in turn `turnId`; the user answers `answers` (a refund is a line in `effectsFile`).
 * @returns the result, and how many times the user was asked
 */
export async function runApprovalHost(options: {
  dbPath: string;
  effectsFile: string;
  turnId: string;
  answers: Answer[];
  crash?: ApprovalCrash;
}) {
  const store = openSqliteStore(options.dbPath);
  const { crash } = options;
  const server = createPayments(
    {},
    {
      store,
      lease: 1_000,
      onEvent: (event) => {
        if (crash === 'after-persist' && event.outcome === 'executed') {
          process.kill(process.pid, 'SIGKILL');
        }
      },
    },
    new McpServer({ name: 'payments', version: '1.0.0' }),
    {
      effects: options.effectsFile,
      afterEffect: () => {
        if (crash === 'after-effect') process.kill(process.pid, 'SIGKILL');
      },
    },
  );
  const user = asker(...options.answers);
  const asked = user.asked.push.bind(user.asked);
  user.asked.push = (...items) => {
    if (crash === 'while-asking') process.kill(process.pid, 'SIGKILL');
    return asked(...items);
  };
  const client = await connectAsking(server, user);
  try {
    const result = await callTool(
      client,
      'refund',
      { order: 'A-42', amount: 30 },
      { [TURN_ID_META]: options.turnId },
    );
    return { result, asked: user.asked.length };
  } finally {
    await client.close();
    store.close();
  }
}
