import { type Tool, tool } from 'ai';
import { z } from 'zod';

/**
 * The "vendor" of the identity tests: every real cancellation is counted and gets a refund id.
 * `withContext`: the same tool taking a `toolsContext` entry `{ chatId? }`.
 */
type Input = { request: string };
type Output = { cancelled: boolean; refund: string };

export interface SupportDesk {
  tools: { cancel_subscription: Tool<Input, Output> };
  withContext: { cancel_subscription: Tool<Input, Output, { chatId?: string | undefined }> };
  cancellations: Array<{ request: string; refund: string }>;
}

export function supportDesk(): SupportDesk {
  const cancellations: Array<{ request: string; refund: string }> = [];
  const description = "Cancel the user's subscription and refund the rest of the month.";
  const inputSchema = z.object({ request: z.string() });
  const execute = async ({ request }: { request: string }) => {
    const refund = `re_${cancellations.length + 1}`;
    cancellations.push({ request, refund });
    return { cancelled: true, refund };
  };
  const contextSchema = z.object({ chatId: z.string().optional() });
  return {
    tools: { cancel_subscription: tool({ description, inputSchema, execute }) },
    withContext: {
      cancel_subscription: tool({ description, inputSchema, contextSchema, execute }),
    },
    cancellations,
  };
}
