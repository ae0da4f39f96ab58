import { runCanonicalBench } from './canonical.ts';
import { runCloudflareBench } from './cloudflare.ts';
import { runLocalCacheBench } from './local-cache.ts';
import { runOverheadBench } from './overhead.ts';
import { runPlot } from './plot.ts';
import { runScaleBench } from './scale.ts';
import { runStoresBench } from './stores.ts';
import { runStormBench } from './storm.ts';
import { runUpstashBench } from './upstash.ts';

/** The benches by name: `node src/run.ts [name...]` runs the named ones, no name runs all. */
const benches: Record<string, () => unknown> = {
  canonical: runCanonicalBench,
  overhead: runOverheadBench,
  stores: runStoresBench,
  storm: runStormBench,
  scale: runScaleBench,
  plot: runPlot,
  'local-cache': runLocalCacheBench,
  upstash: runUpstashBench,
  cloudflare: runCloudflareBench,
};

const names = process.argv.slice(2);
const unknown = names.filter((name) => !(name in benches));
if (unknown.length > 0) {
  console.error(`Unknown bench ${unknown.join(', ')}; known: ${Object.keys(benches).join(', ')}.`);
  process.exit(2);
}

const started = performance.now();
for (const [name, run] of Object.entries(benches)) {
  if (names.length > 0 && !names.includes(name)) continue;
  await run();
  console.log();
}
console.log(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`);
