/**
 * Against the real Restate server (the `@restatedev/restate-server` binary) on 127.0.0.1 and a
 * service deployment in a child process that is killed with SIGKILL at the crash point: Restate
 * retries the invocation in the service started again, and the vendor's charges are counted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIdempotency, createMemoryStore } from '@idempotent-tools/core';
import type { Context } from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKey } from './index.js';
import {
  type RestateServer,
  type ServiceProcess,
  serviceProcess,
  startRestateServer,
} from './test-utils/restate-server.js';
import { startVendor } from './test-utils/vendor.js';

const shopModule = fileURLToPath(new URL('./test-utils/shop-service.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));

let server: RestateServer;
beforeAll(async () => {
  server = await startRestateServer();
});
afterAll(async () => {
  await server?.stop();
});

interface Case {
  crash?: 'after-effect' | 'after-persist';
  plain?: boolean;
  reconcile?: boolean;
  reexecute?: boolean;
  amounts?: number[];
  dedupes?: boolean;
}

/**
 * Start the service (crashing once at `crash`), invoke `shop.checkout`, and when the process died
 * start it again so Restate retries the invocation there; the ingress answer and the vendor.
 */
async function checkout(c: Case) {
  const dir = mkdtempSync(join(tmpdir(), 'restate-shop-'));
  const vendor = await startVendor({ dedupes: c.dedupes ?? false });
  const service: ServiceProcess = await serviceProcess(shopModule, packageDir, {
    DB: join(dir, 'idempotency.db'),
    MARK: join(dir, 'crashed'),
    VENDOR: vendor.url,
    CRASH: c.crash ?? '',
    PLAIN: c.plain ? '1' : '',
    RECONCILE: c.reconcile ? '1' : '',
    REEXECUTE: c.reexecute ? '1' : '',
  });
  try {
    await service.start();
    await server.register(service.uri);
    const answer = fetch(`${server.ingress}/shop/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amounts: c.amounts ?? [500] }),
    }).then(async (res) => ({
      status: res.status,
      body: await res.text(),
      invocation: res.headers.get('x-restate-id'),
    }));
    let killed: unknown = null;
    if (c.crash !== undefined) {
      killed = await service.exited();
      await service.start();
    }
    const { status, body, invocation } = await answer;
    return { status, body, invocation, killed, vendor };
  } finally {
    await service.stop();
    await vendor.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a plain ctx.run (the control)', () => {
  it('charges twice when the process dies after the charge and before Restate records it', async () => {
    const { status, killed, vendor } = await checkout({ crash: 'after-effect', plain: true });
    expect(killed).toBe('SIGKILL');
    expect(status).toBe(200);
    expect(vendor.charges).toHaveLength(2);
  });
});

describe('idempotentRun', () => {
  it('runs once and returns the charge when nothing crashes', async () => {
    const { status, body, invocation, vendor } = await checkout({});
    expect(status).toBe(200);
    expect(vendor.charges).toHaveLength(1);
    expect(JSON.parse(body)).toEqual([vendor.charges[0]]);
    // The vendor's Idempotency-Key is the run's key: Restate's invocation id, 'charge', 1st run.
    const ctx = { request: () => ({ id: invocation }) } as unknown as Context;
    const idempotency = createIdempotency({ store: createMemoryStore() });
    expect(invocation).toMatch(/^inv_/);
    expect(vendor.requests).toEqual([runKey(ctx, idempotency, 'charge')]);
  });

  it('replays the stored outcome when the process died after it was stored, before Restate recorded the run', async () => {
    const { status, body, killed, vendor } = await checkout({ crash: 'after-persist' });
    expect(killed).toBe('SIGKILL');
    expect(status).toBe(200);
    expect(vendor.charges).toHaveLength(1);
    expect(JSON.parse(body)).toEqual([vendor.charges[0]]);
  });

  it('reconciles a run that died mid-way (after the charge, before anything recorded it)', async () => {
    const { status, body, killed, vendor } = await checkout({
      crash: 'after-effect',
      reconcile: true,
    });
    expect(killed).toBe('SIGKILL');
    expect(status).toBe(200);
    expect(vendor.charges).toHaveLength(1);
    expect(JSON.parse(body)).toEqual([vendor.charges[0]]);
  });

  it('fails the invocation with a terminal OutcomeUnknownError for a run that died mid-way, with no reconcile', async () => {
    const { status, body, killed, vendor } = await checkout({ crash: 'after-effect' });
    expect(killed).toBe('SIGKILL');
    expect(status).toBe(500);
    expect(body).toContain('outcome_unknown');
    expect(vendor.charges).toHaveLength(1);
  });

  it('sends the retried run the same Idempotency-Key (onStale: reexecute with a vendor that dedupes)', async () => {
    const { status, body, vendor } = await checkout({
      crash: 'after-effect',
      reexecute: true,
      dedupes: true,
    });
    expect(status).toBe(200);
    expect(vendor.requests).toHaveLength(2);
    expect(vendor.requests[1]).toBe(vendor.requests[0]);
    expect(vendor.charges).toHaveLength(1);
    expect(JSON.parse(body)).toEqual([vendor.charges[0]]);
  });

  it('tells apart two runs of one name in an invocation (their occurrence), across the crash', async () => {
    const { status, body, vendor } = await checkout({
      crash: 'after-persist',
      amounts: [500, 700],
    });
    expect(status).toBe(200);
    expect(vendor.charges.map((c) => c.amount)).toEqual([500, 700]);
    expect(new Set(vendor.requests).size).toBe(2);
    expect(JSON.parse(body)).toEqual(vendor.charges);
  });
});
