/** Text output for people: aligned tables, times, durations. */

/** An aligned table with a header row; cells are trimmed to one line. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const clean = (cell: string) => cell.replace(/\s+/g, ' ');
  const all = [header, ...rows].map((row) => row.map(clean));
  const widths = header.map((_, i) => Math.max(...all.map((row) => row[i]?.length ?? 0)));
  return all
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `label  value` lines, labels aligned. */
export function fields(entries: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...entries.map(([label]) => label.length));
  return entries.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
}

/** An ISO time without milliseconds. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A duration such as `3d 4h`, `12m 5s`, `850ms`. */
export function duration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)}ms`;
  const units: Array<[string, number]> = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  const parts: string[] = [];
  let rest = abs;
  for (const [unit, size] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    } else if (parts.length > 0) break;
  }
  return parts.join(' ');
}

/** `in 5m` or `5m ago`, relative to `now`. */
export function relative(ms: number, now: number): string {
  return ms >= now ? `in ${duration(ms - now)}` : `${duration(now - ms)} ago`;
}

/** An ISO time with its distance to now: `2025-01-01T10:00:00Z (in 23h 59m)`. */
export function when(ms: number, now: number): string {
  return `${isoTime(ms)} (${relative(ms, now)})`;
}

/** A share as a percentage with one decimal. */
export function percent(share: number): string {
  return `${(share * 100).toFixed(1)}%`;
}

/**
 * Parse a duration such as `90s`, `15m`, `24h`, `7d`, `500ms` (a bare number is ms). Returns
 * undefined when it does not parse.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (match === null) return undefined;
  const value = Number(match[1]);
  const unit = match[2] ?? 'ms';
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[unit] ?? 1;
  const ms = Math.round(value * factor);
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}
