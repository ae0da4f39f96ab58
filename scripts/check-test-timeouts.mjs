#!/usr/bin/env node
// No test has a wall-clock budget that a loaded machine can miss (CI is a shared, noisy 2-core
// machine): timeouts are hang detectors of at least 600 s. This check parses every test file and
// vitest config of the repository and refuses
// - a `test` / `it` / `describe` / hook (`beforeAll`, ...) given a timeout under 600 s, as a last
//   numeric argument or `{ timeout }`;
// - a vitest config with a `testTimeout` / `hookTimeout` under 600 s, or none at all (vitest's
//   default is 5 s).
// Run by `pnpm lint`. Exit code 1 with one line per finding. `--fix [paths...]` removes the short
// timeouts of tests and hooks (not configs) in the files under the given paths (default: all).
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const ROOT = new URL('..', import.meta.url).pathname;
const MIN_MS = 600_000;
const CALLEES = new Set([
  'test',
  'it',
  'describe',
  'beforeAll',
  'afterAll',
  'beforeEach',
  'afterEach',
  'realTest',
]);
const SKIP = new Set(['node_modules', 'dist', '.git', '.turbo', '.demo-data', 'coverage']);

function* files(dir) {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else yield path;
  }
}

/** The name a call is made through: `test`, `test.each(...)`, `test.skipIf(...)`, `it.concurrent`. */
function calleeName(expression) {
  let e = expression;
  for (;;) {
    if (ts.isCallExpression(e)) e = e.expression;
    else if (ts.isPropertyAccessExpression(e)) e = e.expression;
    else break;
  }
  return ts.isIdentifier(e) ? e.text : undefined;
}

function numberOf(node) {
  if (ts.isNumericLiteral(node)) return Number(node.text.replaceAll('_', ''));
  return undefined;
}

const fix = process.argv[2] === '--fix';
const fixUnder = fix ? process.argv.slice(3).map((p) => join(process.cwd(), p)) : [];
/** Text ranges to delete, per file. */
const edits = new Map();
const edit = (file, start, end) => {
  if (!fix || (fixUnder.length > 0 && !fixUnder.some((p) => file.startsWith(p)))) return false;
  const list = edits.get(file) ?? [];
  list.push([start, end]);
  edits.set(file, list);
  return true;
};

const findings = [];
const where = (file, source, node) => {
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
  return `${relative(ROOT, file)}:${line + 1}`;
};

for (const file of files(ROOT)) {
  if (file.endsWith('package.json')) {
    const scripts = JSON.parse(readFileSync(file, 'utf8')).scripts ?? {};
    for (const [name, command] of Object.entries(scripts)) {
      const match = /--(testTimeout|hookTimeout)[= ]([0-9_]+)/.exec(String(command));
      if (match !== null && Number(match[2].replaceAll('_', '')) < MIN_MS) {
        findings.push(`${relative(ROOT, file)}: script "${name}" sets --${match[1]}=${match[2]}`);
      }
    }
    continue;
  }
  const isTest = /\.test\.(ts|mts|mjs|js)$/.test(file);
  const isConfig = /vitest\.config\.(ts|mts|js|mjs)$/.test(file);
  if (!isTest && !isConfig) continue;
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  if (isConfig) {
    const shared = /sharedTest/.test(text);
    for (const field of ['testTimeout', 'hookTimeout']) {
      const match = new RegExp(`${field}:\\s*([0-9_]+)`).exec(text);
      if (match === null && !shared)
        findings.push(`${relative(ROOT, file)}: no ${field} (vitest's default is 5 s)`);
      else if (match !== null && Number(match[1].replaceAll('_', '')) < MIN_MS) {
        findings.push(`${relative(ROOT, file)}: ${field} ${match[1]} under ${MIN_MS}`);
      }
    }
    continue;
  }
  const visit = (node) => {
    const callee = ts.isCallExpression(node) ? (calleeName(node.expression) ?? '') : '';
    if (ts.isCallExpression(node) && (CALLEES.has(callee) || /Test$/.test(callee))) {
      const last = node.arguments.at(-1);
      if (last !== undefined && node.arguments.length >= 2) {
        const ms = numberOf(last);
        if (ms !== undefined && ms < MIN_MS) {
          const before = node.arguments.at(-2);
          if (!edit(file, before.getEnd(), last.getEnd())) {
            findings.push(
              `${where(file, source, last)}: a timeout of ${ms} ms (use none: the config's hang detector)`,
            );
          }
        }
        for (const arg of node.arguments) {
          if (!ts.isObjectLiteralExpression(arg)) continue;
          for (const prop of arg.properties) {
            if (
              ts.isPropertyAssignment(prop) &&
              ts.isIdentifier(prop.name) &&
              prop.name.text === 'timeout'
            ) {
              const value = numberOf(prop.initializer);
              if (value !== undefined && value < MIN_MS) {
                const only = arg.properties.length === 1;
                const i = node.arguments.indexOf(arg);
                const range = only
                  ? [node.arguments[i - 1]?.getEnd() ?? arg.getStart(source), arg.getEnd()]
                  : [prop.getStart(source), prop.getEnd() + (text[prop.getEnd()] === ',' ? 1 : 0)];
                if (!edit(file, range[0], range[1])) {
                  findings.push(
                    `${where(file, source, prop)}: { timeout: ${value} } (use none: the config's hang detector)`,
                  );
                }
              }
            }
          }
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

for (const [file, ranges] of edits) {
  let text = readFileSync(file, 'utf8');
  for (const [start, end] of ranges.sort((a, b) => b[0] - a[0])) {
    text = text.slice(0, start) + text.slice(end);
  }
  writeFileSync(file, text);
  console.log(`fixed ${relative(ROOT, file)} (${ranges.length})`);
}

if (findings.length > 0) {
  console.error(
    `check-test-timeouts: ${findings.length} wall-clock budgets a loaded machine can miss:`,
  );
  for (const finding of findings) console.error(`  ${finding}`);
  process.exit(1);
}
console.log('check-test-timeouts: every timeout is a hang detector (>= 600 s).');
