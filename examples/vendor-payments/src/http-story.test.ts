import { expect, test } from 'vitest';
import { httpStory } from './http-story.js';

test("PayCo over idempotentHandler: the tool's request resent in flight, after, unquoted, changed", async () => {
  const result = await httpStory();
  // idempotentFetch({ headerFormat: 'sf-string' }) sent the key as an RFC 8941 String.
  expect(result.header).toMatch(/^"v1_[A-Za-z0-9_.-]+"$/);
  expect(
    result.resends.map((r) => [r.what, r.status, r.replayed, r.retryAfter, r.code ?? r.charge]),
  ).toEqual([
    ['in-flight', 409, false, '1', 'request_in_progress'],
    ['after', 200, true, null, result.charge],
    ['raw-form', 200, true, null, result.charge], // Stripe's unquoted form: the same key
    ['other-body', 422, false, null, 'idempotency_key_reused'],
  ]);
  expect(result.charges).toBe(1);
});
