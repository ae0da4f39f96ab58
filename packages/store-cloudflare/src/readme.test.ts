/**
 * The README's setup, for real: its wrangler.jsonc and its Worker (the ```ts block that starts
 * with `import`), the Worker bundled as wrangler bundles it (workerd's export conditions, this
 * package resolved by its name through its `exports`, i.e. its built `dist/`) and run in workerd
 * with the bindings the config declares.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { expect, test } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The first fenced block of `lang` whose code matches `test`. */
function block(lang: string, matches: (code: string) => boolean): string {
  for (const [, code] of readme.matchAll(
    new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\``, 'gm'),
  )) {
    if (code !== undefined && matches(code)) return code;
  }
  throw new Error(`README.md has no \`\`\`${lang} block like that`);
}

interface WranglerConfig {
  compatibility_date: string;
  durable_objects: { bindings: Array<{ name: string; class_name: string }> };
  migrations: Array<{ new_sqlite_classes?: string[] }>;
}

test("the README's Worker runs in workerd with the README's wrangler.jsonc: a repeat replays", async () => {
  const config = JSON.parse(
    block('jsonc', (code) => code.includes('durable_objects')).replace(/^\s*\/\/.*$/gm, ''),
  ) as WranglerConfig;
  const worker = block('ts', (code) => /^(\/\/\/ <reference[^\n]*\n)*import\s/.test(code));
  const bundled = await build({
    stdin: { contents: worker, resolveDir: root, loader: 'ts', sourcefile: 'README.ts' },
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    target: 'es2022',
    logLevel: 'silent',
    metafile: true,
  });
  // Resolved through the package's `exports` to its workerd build.
  const inputs = Object.keys(bundled.metafile.inputs);
  expect(inputs.some((file) => file.endsWith('dist/index.js'))).toBe(true);
  expect(inputs.some((file) => file.endsWith('dist/elsewhere.js'))).toBe(false);

  const sqlite = new Set(config.migrations.flatMap((m) => m.new_sqlite_classes ?? []));
  const mf = new Miniflare({
    modules: true,
    script: bundled.outputFiles[0]?.text ?? '',
    compatibilityDate: config.compatibility_date,
    durableObjects: Object.fromEntries(
      config.durable_objects.bindings.map((b) => [
        b.name,
        { className: b.class_name, useSQLite: sqlite.has(b.class_name) },
      ]),
    ),
  });
  try {
    const turnId = `turn-${Date.now()}`;
    const call = () =>
      mf
        .dispatchFetch('http://agent.test/', {
          method: 'POST',
          body: JSON.stringify({ turnId, amount: 1999 }),
        })
        .then((response) => response.json() as Promise<{ chargeId: string; replayed: boolean }>);
    const first = await call();
    expect(first.replayed).toBe(false);
    expect(first.chargeId).toMatch(/^ch_/);
    const again = await call();
    expect(again).toEqual({ chargeId: first.chargeId, replayed: true });
  } finally {
    await mf.dispose();
  }
});
