/**
 * The Redis store over HTTP (issue 30): `@upstash/redis` against a real Redis behind the local
 * Upstash REST endpoint of @idempotent-tools/testing, next to the same store on ioredis (TCP), in
 * one interleaved run. What it shows: requests per call (fresh, replay, a waiter of a 300 ms
 * call) and the latency the REST path adds on loopback. Real Upstash adds the network's round trip
 * per request on top: the request counts carry over, the latencies do not.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { createIdempotency, type IdempotencyStore } from '@idempotent-tools/core';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { startUpstashBridge } from '@idempotent-tools/testing/upstash';
import { Redis as Upstash } from '@upstash/redis';
import { Redis } from 'ioredis';
import { ORDER, ORDER_RESULT, parsed } from './payloads.ts';
import { table, writeSection } from './stores.ts';

const ROUNDS = 5;
const CALLS = 300;
const args = parsed(ORDER);
const result = parsed(ORDER_RESULT);

const percentile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

export async function runUpstashBench(): Promise<void> {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  const bridge = await startUpstashBridge({ send: (name, a) => redis.call(name, ...a) });
  const rest = new Upstash({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const prefix = `bench-upstash-${Date.now()}:`;
  const tcp = new Redis(url);
  const stores: Record<string, IdempotencyStore> = {
    'ioredis (TCP)': createRedisStore(tcp, { prefix }),
    '@upstash/redis (REST, local endpoint)': createRedisStore(rest, { prefix }),
  };
  const samples: Record<string, { fresh: number[]; replay: number[] }> = Object.fromEntries(
    Object.keys(stores).map((name) => [name, { fresh: [], replay: [] }]),
  );
  const requests: Record<string, { fresh: number; replay: number; waiter: number }> = {};
  let n = 0;
  const start = loadavg()[0]!;
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(stores);
    if (round % 2 === 1) names.reverse();
    for (const name of names) {
      const idempotency = createIdempotency({ store: stores[name]! });
      const s = samples[name]!;
      for (let i = 0; i < CALLS; i++) {
        const call = { toolName: 'place_order', turnId: `t${n++}`, args };
        let t = performance.now();
        await idempotency.run(call, async () => result);
        s.fresh.push(performance.now() - t);
        t = performance.now();
        await idempotency.run(call, async () => result);
        s.replay.push(performance.now() - t);
      }
    }
  }
  // Requests per call on the REST path, counted at the endpoint.
  const idempotency = createIdempotency({
    store: stores['@upstash/redis (REST, local endpoint)']!,
  });
  const count = async (fn: () => Promise<unknown>) => {
    const before = bridge.requests.length;
    await fn();
    return bridge.requests.length - before;
  };
  const call = { toolName: 'place_order', turnId: `t${n++}`, args };
  const fresh = await count(() => idempotency.run(call, async () => result));
  const replay = await count(() => idempotency.run(call, async () => result));
  const waited = { toolName: 'place_order', turnId: `t${n++}`, args };
  const running = Promise.withResolvers<void>();
  const held = idempotency.run(waited, async () => {
    running.resolve();
    await new Promise((resolve) => setTimeout(resolve, 300));
    return result;
  });
  await running.promise;
  const waiter = await count(() =>
    createIdempotency({ store: createRedisStore(rest, { prefix }) }).run(
      waited,
      async () => result,
    ),
  );
  await held;
  requests['@upstash/redis (REST, local endpoint)'] = { fresh, replay, waiter };
  const end = loadavg()[0]!;

  const rows = Object.entries(samples).map(([name, s]) => [
    name,
    (percentile(s.fresh, 0.5) * 1000).toFixed(0),
    (percentile(s.fresh, 0.99) * 1000).toFixed(0),
    (percentile(s.replay, 0.5) * 1000).toFixed(0),
    (percentile(s.replay, 0.99) * 1000).toFixed(0),
    requests[name] === undefined ? '2 round trips' : String(requests[name]!.fresh),
    requests[name] === undefined ? '1 round trip' : String(requests[name]!.replay),
    requests[name] === undefined ? 'woken by pub/sub' : String(requests[name]!.waiter),
  ]);
  const body = `Node ${process.version}, ${cpus()[0]?.model ?? '?'}; load ${start.toFixed(2)} at start, ${end.toFixed(2)} at end. ${ROUNDS} interleaved rounds x ${CALLS} sequential calls per store, ~1 KB args and result; µs per call. The REST endpoint is the local one of @idempotent-tools/testing/upstash in front of the same Redis (loopback HTTP/1.1): against real Upstash, add the network round trip per request.\n\n${table(
    [
      'client',
      ['fresh p50 µs', 'right'],
      ['fresh p99 µs', 'right'],
      ['replay p50 µs', 'right'],
      ['replay p99 µs', 'right'],
      ['requests, fresh', 'right'],
      ['requests, replay', 'right'],
      ['requests, waiter of a 300 ms call', 'right'],
    ],
    rows,
  )}\n`;
  console.log(`## Redis over HTTP (Upstash REST)\n\n${body}`);
  writeSection(
    new URL('../RESULTS.md', import.meta.url),
    '## Redis over HTTP (Upstash REST)',
    body,
  );
  writeFileSync(
    new URL('../results/upstash.json', import.meta.url),
    `${JSON.stringify({ node: process.version, rows, requests }, null, 2)}\n`,
  );
  for (const store of Object.values(stores)) await store.close?.();
  await bridge.close();
  tcp.disconnect();
  redis.disconnect();
}
