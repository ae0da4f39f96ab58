#!/usr/bin/env node
// @ts-check
/**
 * The adapter kit's surface is documented name by name: every name exported by
 * `packages/core/src/adapter-kit/index.ts` has a row of its own in the table of
 * docs/design.md's "### The adapter kit, name by name", and the table names nothing the kit
 * does not export. A new kit export without a line of documentation fails `pnpm lint`.
 *
 * Exit code 1 with one line per name missing from either side.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const indexPath = join(root, 'packages/core/src/adapter-kit/index.ts');
const source = ts.createSourceFile(
  indexPath,
  readFileSync(indexPath, 'utf8'),
  ts.ScriptTarget.Latest,
);
const exported = new Set();
for (const statement of source.statements) {
  if (!ts.isExportDeclaration(statement)) continue;
  const clause = statement.exportClause;
  if (clause === undefined || !ts.isNamedExports(clause)) {
    console.error('check-kit-docs: adapter-kit/index.ts exports with `export *`: name each export');
    process.exit(1);
  }
  for (const element of clause.elements) exported.add(element.name.text);
}

const heading = '### The adapter kit, name by name';
const design = readFileSync(join(root, 'docs/design.md'), 'utf8');
const start = design.indexOf(`\n${heading}\n`);
if (start === -1) {
  console.error(`check-kit-docs: docs/design.md has no "${heading}" section`);
  process.exit(1);
}
const rest = design.slice(start + heading.length + 2);
const end = rest.search(/\n#{1,3} /);
const documented = new Set();
for (const line of (end === -1 ? rest : rest.slice(0, end)).split('\n')) {
  const cell = /^\| *`([A-Za-z_$][\w$]*)`/.exec(line);
  if (cell) documented.add(cell[1]);
}

const problems = [];
for (const name of exported) {
  if (!documented.has(name))
    problems.push(`${name}: exported by the kit, no row in docs/design.md`);
}
for (const name of documented) {
  if (!exported.has(name))
    problems.push(`${name}: a row in docs/design.md, not exported by the kit`);
}
if (problems.length > 0) {
  for (const problem of problems) console.error(`check-kit-docs: ${problem}`);
  process.exit(1);
}
console.log(
  `check-kit-docs: the ${exported.size} exports of the adapter kit each have a line in docs/design.md.`,
);
