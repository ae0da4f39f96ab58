/**
 * The Worker the `cloudflare` bench runs in workerd: `POST /run` makes one call through the
 * executor on the Durable Objects store (fresh, or a replay when the turn was run before),
 * `POST /noop` answers at once (the cost of the request itself, subtracted in the tables).
 */
import {
  createDurableObjectStore,
  createIdempotency,
  IdempotencyObject,
} from '@idempotent-tools/store-cloudflare';
import { ORDER, ORDER_RESULT } from './payloads.ts';

export { IdempotencyObject };

export default {
  async fetch(request: Request, env: { IDEMPOTENCY: never }): Promise<Response> {
    if (new URL(request.url).pathname === '/noop') return new Response('{}');
    const { turnId } = (await request.json()) as { turnId: string };
    const idempotency = createIdempotency({ store: createDurableObjectStore(env.IDEMPOTENCY) });
    const result = await idempotency.run(
      { toolName: 'place_order', turnId, args: ORDER },
      async () => ORDER_RESULT,
    );
    return Response.json({ outcome: result.outcome });
  },
};
