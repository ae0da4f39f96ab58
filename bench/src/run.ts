import { runCanonicalBench } from './canonical.ts';

const started = performance.now();
runCanonicalBench();
console.log(`\nDone in ${((performance.now() - started) / 1000).toFixed(1)} s.`);
