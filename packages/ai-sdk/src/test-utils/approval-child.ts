/**
 * Another process handles the request that carries the approval response (a new server process,
 * the same SQLite file). Driven by approval.test.ts; prints what the SDK produced as JSON (or
 * the error generateText rejected with).
 */
import { readFileSync } from 'node:fs';
import { billingRequest } from './approval-app.js';

const { APPROVAL_BASE_URL, APPROVAL_DB, APPROVAL_REFUNDS, APPROVAL_LOOKUPS, APPROVAL_MESSAGES } =
  process.env;
try {
  const result = await billingRequest({
    baseURL: APPROVAL_BASE_URL as string,
    files: {
      db: APPROVAL_DB as string,
      refunds: APPROVAL_REFUNDS as string,
      lookups: APPROVAL_LOOKUPS as string,
    },
    messages: JSON.parse(readFileSync(APPROVAL_MESSAGES as string, 'utf8')),
  });
  console.log(JSON.stringify({ text: result.text, outputs: result.outputs }));
} catch (error) {
  // What the route would log: the error generateText rejected with.
  const { name, message, code, field } = error as Record<string, unknown>;
  console.log(JSON.stringify({ error: { name, message, code, field } }));
}
