/**
 * The mutation table: known bugs planted without editing the product's source, to show that the
 * checker catches each one (and how long it takes).
 *
 * Executor mutations are textual patches of a copy of `packages/core/dist` in a temp dir; the
 * workers run with a module-resolution hook (`module.register`, core-hook.ts) that points
 * `@idempotent-tools/core` (and its subpaths, for the stores too) at the mutated copy. A patch
 * that no longer applies fails loudly: the table must never pass because a mutation did nothing.
 * Store mutations are wrapper stores (store-mutations.ts).
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MutationName } from './types.ts';

export interface Mutation {
  name: MutationName;
  /** The bug, in a few words (the table's row). */
  bug: string;
  /** Where it lives in the product. */
  where: string;
  /** Textual patches of core's dist: file, the exact text, what replaces it. */
  patches?: { file: string; find: string; replace: string }[];
  /** Or a wrapper store. */
  wrap?: 'live-as-stale' | 'other-key-replayed';
}

export const MUTATIONS: readonly Mutation[] = [
  {
    name: 'release-after-request',
    bug: "(a) the default `onToolError: 'auto'` releases an attempt that threw after a request was seen leaving (plain fetch)",
    where: 'core executor/run-tool.ts keepsAttempt',
    patches: [
      {
        file: 'executor/run-tool.js',
        find: 'return (sent.keyed > 0 || sent.requests > 0) && !vendorDedupes;',
        replace: 'return sent.keyed > 0 && !vendorDedupes;',
      },
    ],
  },
  {
    name: 'no-ownership-check',
    bug: '(b) no ownership check before the request (idempotentFetch sends for an attempt that lost its call)',
    where: 'core executor/context.ts assertOwned',
    patches: [
      {
        file: 'executor/context.js',
        find: "    context.signal.throwIfAborted();\n    if (context.stillOwned?.() === false) {\n        throw new PersistFailedError({ key: context.key, reason: 'lease_lost', lost: 'no-renewal' });\n    }",
        replace: '    // mutation: no ownership check',
      },
    ],
  },
  {
    name: 'live-as-stale',
    bug: '(c) a store that hands a live record out as stale (and lets it be taken over)',
    where: 'a wrapper store (store-mutations.ts)',
    wrap: 'live-as-stale',
  },
  {
    name: 'other-key-replayed',
    bug: "(d) another key's record replayed (a key collision in the store)",
    where: 'a wrapper store (store-mutations.ts)',
    wrap: 'other-key-replayed',
  },
  {
    name: 'takeover-on-store-clock',
    bug: '(e) a takeover on the store clock alone (no settle-window watch)',
    where: 'core executor/stale.ts staysStale',
    patches: [
      {
        file: 'executor/stale.js',
        find: "        if (!(await staysStale(run, record)))\n            return 'retry';",
        replace: '        // mutation: no settle-window watch',
      },
    ],
  },
];

export const mutationNamed = (name: string): Mutation | undefined =>
  MUTATIONS.find((m) => m.name === name);

const CORE = fileURLToPath(new URL('../../packages/core/', import.meta.url));

/**
 * A mutated copy of core's dist for `mutation` (undefined for a store mutation): the dir to give
 * the hook (CHAOS_CORE_DIR). Throws when a patch does not apply.
 */
export function mutatedCore(mutation: Mutation): { dir: string; remove(): void } | undefined {
  if (mutation.patches === undefined) return undefined;
  if (!existsSync(join(CORE, 'dist', 'index.js'))) {
    throw new Error('packages/core/dist is missing: run pnpm build first');
  }
  const dir = mkdtempSync(join(tmpdir(), `idt-chaos-core-${mutation.name}-`));
  cpSync(join(CORE, 'dist'), join(dir, 'dist'), { recursive: true });
  cpSync(join(CORE, 'package.json'), join(dir, 'package.json'));
  for (const patch of mutation.patches) {
    const file = join(dir, 'dist', patch.file);
    const text = readFileSync(file, 'utf8');
    const at = text.indexOf(patch.find);
    if (at < 0 || text.indexOf(patch.find, at + 1) >= 0) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(
        `mutation ${mutation.name}: the patch of dist/${patch.file} no longer applies (${at < 0 ? 'text not found' : 'text found twice'}): ${JSON.stringify(patch.find.slice(0, 80))}. Update chaos/src/mutations.ts to the code as it is now.`,
      );
    }
    writeFileSync(file, text.slice(0, at) + patch.replace + text.slice(at + patch.find.length));
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
