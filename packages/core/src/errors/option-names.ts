/**
 * Misspelt options: every options object of the library is checked against the names it takes,
 * so that `onstale` is an error that names `onStale`, not a default silently applied.
 */

/** Edit distance of two short names (Levenshtein), case-insensitive. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let row = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const next = [i];
    for (let j = 1; j <= y.length; j++) {
      next[j] = Math.min(
        (row[j] as number) + 1,
        (next[j - 1] as number) + 1,
        (row[j - 1] as number) + (x[i - 1] === y[j - 1] ? 0 : 1),
      );
    }
    row = next;
  }
  return row[y.length] as number;
}

/** The known name closest to `name`, when it is close enough to be a typo. */
export function closestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = distance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(1, Math.floor(name.length / 4)) ? best : undefined;
}

/**
 * The first own property of `options` that is not one of `known`, with a sentence for the error
 * message ("unknown option "onstale"; did you mean "onStale"?"), or undefined.
 */
export function unknownOption(
  options: object,
  known: ReadonlySet<string> | readonly string[],
): { name: string; message: string } | undefined {
  const names = known instanceof Set ? known : new Set(known as readonly string[]);
  for (const name of Object.keys(options)) {
    if (names.has(name)) continue;
    const suggestion = closestName(name, [...names]);
    return {
      name,
      message: `unknown option "${name}"${suggestion === undefined ? '' : `; did you mean "${suggestion}"?`}`,
    };
  }
  return undefined;
}
