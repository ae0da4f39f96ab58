#!/usr/bin/env node
// @ts-check
/**
 * One list of examples: every list of them names exactly the folders of `examples/` (each with a
 * `package.json`).
 *
 * - README.md, the table of "## Examples": every example;
 * - examples/README.md, its table: every example;
 * - examples/demo/src/main.ts, the `examples` it runs: every example but the demo itself;
 * - examples/demo/README.md, the `[`name`](../name/)` links of what it runs: the same;
 * - each example's README says how to copy it out (`pnpm create-example <name> `);
 * - each example refuses a Node.js that is too old at `npm install`: `engines.node` is the
 *   repository's own and its `.npmrc` has `engine-strict=true`.
 *
 * Run by `pnpm lint`. Exit code 1 with one line per list that disagrees, naming what it lacks and
 * what it names that is not a folder of `examples/`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { exampleNames, repoRoot } from './local-packages.mjs';

const examples = exampleNames();
const rootEngines = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).engines.node;
const frameworkExamples = examples.filter((name) => name !== 'demo');
const read = (/** @type {string} */ path) => readFileSync(join(repoRoot, path), 'utf8');

/** The text of a markdown section, from its heading to the next heading of its level or above. */
function section(/** @type {string} */ text, /** @type {string} */ heading) {
  const start = text.indexOf(`\n${heading}\n`);
  if (start === -1) return undefined;
  const rest = text.slice(start + heading.length + 2);
  const level = /^#+/.exec(heading)?.[0].length ?? 2;
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return end === -1 ? rest : rest.slice(0, end);
}

/**
 * The names of a markdown table's rows whose first cell is a link ``[`name`](prefix + name/)``;
 * a row whose link points elsewhere is named `name (-> target)`, so it never matches.
 */
function tableNames(/** @type {string} */ text, /** @type {string} */ prefix) {
  return [...text.matchAll(/^\|\s*\[`([^`]+)`\]\(([^)]*)\)/gm)].map(([, name, target]) =>
    target === `${prefix}${name}/` ? String(name) : `${name} (-> ${target})`,
  );
}

/** @type {Array<{ list: string, names: string[] | undefined, expected: string[] }>} */
const lists = [];
{
  const examplesSection = section(read('README.md'), '## Examples');
  lists.push({
    list: 'README.md, the table of "## Examples"',
    names: examplesSection === undefined ? undefined : tableNames(examplesSection, 'examples/'),
    expected: examples,
  });
}
lists.push({
  list: 'examples/README.md, its table',
  names: tableNames(read('examples/README.md'), ''),
  expected: examples,
});
{
  const main = read('examples/demo/src/main.ts');
  const array = /const examples[^=]*=\s*\[([\s\S]*?)\n\];/.exec(main)?.[1];
  lists.push({
    list: 'examples/demo/src/main.ts, the examples the demo runs',
    names:
      array === undefined
        ? undefined
        : [...array.matchAll(/\[\s*'(?:[^'\\]|\\.)*',\s*'([^']+)'\s*\]/g)].map(([, name]) =>
            String(name),
          ),
    expected: frameworkExamples,
  });
}
lists.push({
  list: 'examples/demo/README.md, the examples the demo runs',
  names: [...read('examples/demo/README.md').matchAll(/\[`([^`]+)`\]\(\.\.\/([^)]*)\)/g)].map(
    ([, name, target]) =>
      target === name || target === `${name}/` ? String(name) : `${name} (-> ../${target})`,
  ),
  expected: frameworkExamples,
});

/** @type {string[]} */
const problems = [];
for (const { list, names, expected } of lists) {
  if (names === undefined || names.length === 0) {
    problems.push(`${list}: not found (no list of examples where this check looks for one)`);
    continue;
  }
  const missing = expected.filter((name) => !names.includes(name));
  const extra = names.filter((name) => !expected.includes(name));
  const twice = names.filter((name, index) => names.indexOf(name) !== index);
  const parts = [];
  if (missing.length > 0) parts.push(`lacks ${missing.join(', ')}`);
  if (extra.length > 0) parts.push(`names ${extra.join(', ')}, not a folder of examples/ here`);
  if (twice.length > 0) parts.push(`names ${[...new Set(twice)].join(', ')} twice`);
  if (parts.length > 0) problems.push(`${list}: ${parts.join('; ')}`);
}
for (const name of examples) {
  const readme = read(`examples/${name}/README.md`);
  if (!readme.includes(`pnpm create-example ${name} `)) {
    problems.push(
      `examples/${name}/README.md: does not say how to copy it out (\`pnpm create-example ${name} <folder>\`)`,
    );
  }
  const engines = JSON.parse(read(`examples/${name}/package.json`)).engines?.node;
  if (engines !== rootEngines) {
    problems.push(
      `examples/${name}/package.json: engines.node is ${JSON.stringify(engines)}, the repository's is "${rootEngines}"`,
    );
  }
  let npmrc = '';
  try {
    npmrc = read(`examples/${name}/.npmrc`);
  } catch {}
  if (!/^engine-strict=true$/m.test(npmrc)) {
    problems.push(
      `examples/${name}/.npmrc: no \`engine-strict=true\` (npm would install it on a Node.js that is too old)`,
    );
  }
}

if (problems.length > 0) {
  console.error(`check-examples: ${problems.length} finding(s) in the examples and their lists:`);
  for (const problem of problems) console.error(`  ${problem}`);
  console.error(
    `The examples (folders of examples/ with a package.json): ${examples.join(', ')}. Add or remove the entries above.`,
  );
  process.exit(1);
}
console.log(
  `check-examples: every list names the ${examples.length} examples of examples/ (the demo runs the ${frameworkExamples.length} others).`,
);
