#!/usr/bin/env node
// No import cycles inside a package's source (tests and test helpers included: a cycle there
// breaks module initialisation just the same). Reads every `packages/*/src/**/*.ts`, follows
// relative imports and re-exports (type-only ones too: they are design cycles all the same),
// and prints each cycle once. Run by `pnpm lint`; exit code 1 when there is one.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = new URL('..', import.meta.url).pathname;

function* sources(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts')) yield path;
  }
}

/** The file a relative specifier names (`./x.js` is `./x.ts`), or undefined. */
function resolveImport(from, specifier) {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  for (const candidate of [
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.mjs$/, '.mts'),
    `${base}.ts`,
    join(base, 'index.ts'),
  ]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

function importsOf(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found = [];
  for (const statement of source.statements) {
    const specifier =
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier !== undefined &&
      ts.isStringLiteral(statement.moduleSpecifier)
        ? statement.moduleSpecifier.text
        : undefined;
    const target = specifier === undefined ? undefined : resolveImport(file, specifier);
    if (target !== undefined) found.push(target);
  }
  return found;
}

const cycles = new Map();
for (const pkg of readdirSync(join(ROOT, 'packages'))) {
  const src = join(ROOT, 'packages', pkg, 'src');
  if (!existsSync(src)) continue;
  const graph = new Map();
  for (const file of sources(src)) graph.set(file, importsOf(file));
  // Tarjan's strongly connected components: each component of more than one file is a cycle.
  let index = 0;
  const stack = [];
  const state = new Map();
  const strongConnect = (v) => {
    state.set(v, { index, low: index, onStack: true });
    index++;
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!state.has(w)) {
        strongConnect(w);
        state.get(v).low = Math.min(state.get(v).low, state.get(w).low);
      } else if (state.get(w).onStack) {
        state.get(v).low = Math.min(state.get(v).low, state.get(w).index);
      }
    }
    if (state.get(v).low === state.get(v).index) {
      const component = [];
      for (;;) {
        const w = stack.pop();
        state.get(w).onStack = false;
        component.push(w);
        if (w === v) break;
      }
      const selfLoop = (graph.get(v) ?? []).includes(v);
      if (component.length > 1 || selfLoop) {
        const names = component.map((f) => relative(ROOT, f)).sort();
        cycles.set(names.join(' '), names);
      }
    }
  };
  for (const v of graph.keys()) if (!state.has(v)) strongConnect(v);
}

if (cycles.size > 0) {
  console.error(`check-import-cycles: ${cycles.size} import cycle(s):`);
  for (const names of cycles.values()) console.error(`  ${names.join(' <-> ')}`);
  process.exit(1);
}
console.log('check-import-cycles: no import cycle in any package.');
