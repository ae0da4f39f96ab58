/**
 * Core inside the runtimes agents are deployed on, for real: workerd (the Cloudflare Workers
 * runtime, through miniflare) with and without `nodejs_compat`, and the Vercel Edge runtime
 * (`@edge-runtime/vm`). Each gets core bundled as a Worker / edge function bundle is (esbuild, the
 * runtime's export conditions, no `node:*` import left to resolve) and runs
 * `test-utils/runtime-cases.ts`: the RFC 8785 vectors, the key vectors and the executor's core
 * answers. On Node the same cases run too, so every runtime is held to Node's answers.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EdgeVM } from '@edge-runtime/vm';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { afterAll, describe, expect, test } from 'vitest';
import { deriveKey } from '../keys/derive-key.js';
import {
  type RuntimeCaseInput,
  type RuntimeCaseResult,
  type RuntimeFacts,
  runRuntimeCases,
} from '../test-utils/runtime-cases.js';

const vectors = new URL('../../../../../shared/vectors/rfc8785/', import.meta.url);
const keyVectors = JSON.parse(
  readFileSync(new URL('../../vectors/keys.json', import.meta.url), 'utf8'),
) as { vectors: RuntimeCaseInput['keys'] };

const input: RuntimeCaseInput = {
  canonical: readdirSync(new URL('input/', vectors))
    .filter((file) => file.endsWith('.json'))
    .map((file) => ({
      name: file,
      input: readFileSync(new URL(`input/${file}`, vectors), 'utf8'),
      output: readFileSync(new URL(`output/${file}`, vectors), 'utf8').replace(/\n$/, ''),
    })),
  keys: [
    ...keyVectors.vectors,
    // Keyed derivation (argsHmacKey): Node's HMAC is the reference.
    ...(() => {
      const secret = new Uint8Array(32).map((_, i) => i * 7);
      const vector = { toolName: 'charge_card', turnId: 'turn-1', args: { amount: 1999 } };
      const derived = deriveKey(vector, { argsHmacKey: secret });
      return [
        {
          name: 'argsHmacKey',
          input: vector,
          ...derived,
          argsHmacKey: Buffer.from(secret).toString('base64'),
        },
      ];
    })(),
  ],
};

const entry = fileURLToPath(new URL('../test-utils/runtime-cases.ts', import.meta.url));

/** Core and the cases as one bundle, resolved with `conditions` as the runtime's bundler does. */
async function bundle(conditions: string[], format: 'esm' | 'iife', wrapper: string) {
  const result = await build({
    stdin: { contents: wrapper, resolveDir: fileURLToPath(new URL('.', import.meta.url)) },
    bundle: true,
    write: false,
    format,
    platform: 'neutral',
    conditions,
    mainFields: ['module', 'main'],
    target: 'es2022',
    logLevel: 'silent',
    ...(format === 'iife' ? { globalName: '__cases' } : {}),
  });
  const code = result.outputFiles[0]?.text ?? '';
  // The bundle imports nothing: every `node:*` module core uses is found at run time, if at all.
  expect(code).not.toMatch(/\bfrom\s*["']node:|\brequire\(["']node:/);
  return code;
}

type Report = { facts: RuntimeFacts; results: RuntimeCaseResult[] };

/** Every case passed (the failures, by name, in the message when not). */
function expectAllPassed(report: Report) {
  const failed = report.results.filter((r) => !r.ok);
  expect(failed).toEqual([]);
  expect(report.results.length).toBe(input.canonical.length + input.keys.length + 8);
}

const workers: Miniflare[] = [];
afterAll(async () => {
  await Promise.all(workers.map((mf) => mf.dispose()));
});

async function inWorkerd(flags: string[]): Promise<Report> {
  const script = await bundle(
    ['workerd', 'worker', 'browser'],
    'esm',
    `import { runRuntimeCases } from ${JSON.stringify(entry)};
     export default {
       async fetch(request) { return Response.json(await runRuntimeCases(await request.json())); },
     };`,
  );
  const mf = new Miniflare({
    modules: true,
    script,
    // The newest date this workerd knows (miniflare refuses later ones).
    compatibilityDate: '2026-07-30',
    compatibilityFlags: flags,
  });
  workers.push(mf);
  const response = await mf.dispatchFetch('http://worker.test/', {
    method: 'POST',
    body: JSON.stringify(input),
  });
  return (await response.json()) as Report;
}

describe('core in the runtimes agents are deployed on', () => {
  test('Node (the reference)', async () => {
    const report = await runRuntimeCases(input);
    expect(report.facts).toMatchObject({ isNode: true, hasAsyncContext: true, nodeCrypto: true });
    expectAllPassed(report);
  });

  test('Cloudflare Workers (workerd) without nodejs_compat', async () => {
    const report = await inWorkerd([]);
    expect(report.facts).toEqual({
      isNode: false,
      hasAsyncContext: false,
      nodeCrypto: false,
      userAgent: 'Cloudflare-Workers',
    });
    expectAllPassed(report);
  });

  test('Cloudflare Workers (workerd) with nodejs_compat', async () => {
    const report = await inWorkerd(['nodejs_compat']);
    expect(report.facts).toMatchObject({
      isNode: false,
      hasAsyncContext: true,
      nodeCrypto: true,
      userAgent: 'Cloudflare-Workers',
    });
    expectAllPassed(report);
  });

  test('the Vercel Edge runtime (@edge-runtime/vm)', async () => {
    const code = await bundle(
      ['edge-light', 'worker', 'browser'],
      'iife',
      `export { runRuntimeCases } from ${JSON.stringify(entry)};`,
    );
    const vm = new EdgeVM();
    vm.evaluate(code);
    const report = JSON.parse(
      await vm.evaluate(
        `__cases.runRuntimeCases(${JSON.stringify(input)}).then((report) => JSON.stringify(report))`,
      ),
    ) as Report;
    expect(report.facts).toMatchObject({ isNode: false, nodeCrypto: false });
    expectAllPassed(report);
  });
});
