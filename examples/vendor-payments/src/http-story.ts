/**
 * PayCo's side of `Idempotency-Key`: its API is served with `idempotentHandler`
 * (`@idempotent-tools/core/http`). The agent's tool charges through
 * `idempotentFetch({ headerFormat: 'sf-string' })`; a client resending that exact request (an
 * SDK's retry after a timeout, a proxy) gets a 409 while the first is running, the stored
 * response once it is done (`Idempotent-Replayed: true`), and a 422 when the body differs.
 */
import { createIdempotency, createMemoryStore, idempotentFetch } from '@idempotent-tools/core';
import { json } from './checkout.js';
import { type Charge, PAYCO_API_KEY, type PayCo, startPayCo } from './vendors.js';

/** One request as it went over the wire. */
interface Sent {
  url: string;
  headers: Headers;
  body: string;
}

export interface HttpStoryResult {
  /** The header the tool sent (an RFC 8941 String: `"v1_..."`). */
  header: string;
  /** The status of each resend of the tool's request, in order. */
  resends: Array<{
    what: 'in-flight' | 'after' | 'raw-form' | 'other-body';
    status: number;
    replayed: boolean;
    retryAfter: string | null;
    code: string | undefined;
    charge: string | undefined;
  }>;
  /** The charge the tool got. */
  charge: string;
  /** Charges PayCo made in all (1). */
  charges: number;
  transcript: string[];
}

export async function httpStory(
  options: { print?: (line: string) => void } = {},
): Promise<HttpStoryResult> {
  const transcript: string[] = [];
  const say = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  let payco: PayCo | undefined;
  try {
    payco = await startPayCo({ log: (line) => say(`      ${line}`) });
    const url = `${payco.url}/v1/charges`;
    const { policy } = payco;
    say(
      `PayCo's API is served with idempotentHandler: ${policy.header} on ${policy.methods.join(', ')}, keys kept ${policy.ttl / 3_600_000} h per API key, replays marked ${policy.replayHeader}.`,
    );

    // The agent's side: the executor (in memory here) and the tool's fetch, recording the wire.
    const wire: Sent[] = [];
    const recording: typeof fetch = async (input, init) => {
      wire.push({
        url: String(input),
        headers: new Headers(init?.headers),
        body: String(init?.body ?? ''),
      });
      return fetch(input, init);
    };
    const pay = idempotentFetch({ headerFormat: 'sf-string', fetch: recording });
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const args = { order: 'order-http', amount: 2500 };

    const held = payco.hold(); // PayCo takes its time with the tool's charge
    say(`  the agent's charge tool: 25.00 eur for ${args.order} (PayCo holds it mid-way)`);
    const running = idempotency.run({ toolName: 'charge', turnId: 'turn-http', args }, () =>
      pay(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PAYCO_API_KEY}` },
        body: JSON.stringify({
          amount: args.amount,
          currency: 'eur',
          customer: 'cus_ada',
          description: `order ${args.order}`,
        }),
      }).then((response) => json<Charge>('PayCo', response)),
    );
    await held.arrived;
    const [sent] = wire;
    if (sent === undefined) throw new Error('the tool sent nothing');
    const header = sent.headers.get('idempotency-key') ?? '';
    say(`      the tool sent Idempotency-Key: ${header.slice(0, 16)}…" (headerFormat 'sf-string')`);

    const resends: HttpStoryResult['resends'] = [];
    const resend = async (what: HttpStoryResult['resends'][number]['what'], change = {}) => {
      const headers = new Headers(sent.headers);
      if (what === 'raw-form') headers.set('idempotency-key', header.slice(1, -1));
      const body =
        Object.keys(change).length === 0
          ? sent.body
          : JSON.stringify({ ...JSON.parse(sent.body), ...change });
      const response = await fetch(sent.url, { method: 'POST', headers, body });
      const payload = (await response.json()) as { id?: string; code?: string };
      resends.push({
        what,
        status: response.status,
        replayed: response.headers.get(policy.replayHeader) === 'true',
        retryAfter: response.headers.get('retry-after'),
        code: payload.code,
        charge: payload.id,
      });
    };

    say('  a client resends the same request while PayCo is still on it:');
    await resend('in-flight');
    held.release();
    const { value: charge } = await running;
    say(`      the tool's charge completes: ${charge.id}`);
    say('  the same request again, now that it is done; then with the key unquoted (raw form):');
    await resend('after');
    await resend('raw-form');
    say('  the same key with another amount:');
    await resend('other-body', { amount: 2600 });
    const result: HttpStoryResult = {
      header,
      resends,
      charge: charge.id,
      charges: payco.charges.length,
      transcript,
    };
    say(
      `PayCo charged ${result.charges} time for 1 tool call and ${resends.length} resends: ${resends.map((r) => r.status).join(', ')}.`,
    );
    return result;
  } finally {
    await payco?.close();
  }
}
