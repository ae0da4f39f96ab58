/**
 * A module-resolution hook (registered by core-hook-register.ts with `module.register`) that
 * resolves `@idempotent-tools/core` and its subpaths to the mutated copy in `data.coreDir`, for
 * the worker and every store package it loads. See mutations.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

let coreDir = '';
let exportsMap: Record<string, { default: string }> = {};

export function initialize(data: { coreDir: string }): void {
  coreDir = data.coreDir;
  const pkg = JSON.parse(readFileSync(join(coreDir, 'package.json'), 'utf8')) as {
    exports: Record<string, { default: string }>;
  };
  exportsMap = pkg.exports;
}

type Next = (specifier: string, context: unknown) => Promise<{ url: string }>;

export async function resolve(specifier: string, context: unknown, next: Next) {
  const name = '@idempotent-tools/core';
  if (specifier === name || specifier.startsWith(`${name}/`)) {
    const sub = specifier === name ? '.' : `.${specifier.slice(name.length)}`;
    const target = exportsMap[sub]?.default;
    if (target === undefined) throw new Error(`core-hook: no export ${sub} in the mutated core`);
    return { url: pathToFileURL(join(coreDir, target)).href, shortCircuit: true };
  }
  return next(specifier, context);
}
