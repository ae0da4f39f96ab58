/**
 * `node src/run.ts plot`: an SVG per engine and payload of p50 latency against calls in flight
 * (1, 16, 64) for every contender (fresh solid, replay dashed) and the bare reads, from
 * `results/stores.json` (written by the store bench). Hand-written SVG, no dependency. Log scales
 * on both axes. The `small` payload keeps the file name of before payloads
 * (`stores-latency-<engine>.svg`), the others get a suffix (`stores-latency-<engine>-1kb.svg`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { EngineResult, ModeResult, SubjectResult } from './stores.ts';

const W = 780;
const H = 420;
const M = { left: 70, right: 360, top: 40, bottom: 50 };
const COLORS = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#9467bd',
  '#ff7f0e',
  '#8c564b',
  '#17becf',
  '#e377c2',
  '#bcbd22',
];

const esc = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/`/g, '');

interface Series {
  label: string;
  color: string;
  dashed: boolean;
  points: [number, number][];
}

function points(mode: ModeResult | undefined): [number, number][] {
  return Object.entries(mode?.p50UsByInFlight ?? {})
    .map(([n, us]) => [Number(n), us] as [number, number])
    .sort((a, b) => a[0] - b[0]);
}

/** Results written before payloads have none: they are `small`. */
const payloadOf = (s: SubjectResult) => s.payload ?? 'small';

function svg(engine: EngineResult, payload: string): string {
  const series: Series[] = [];
  engine.contenders
    .filter((c) => payloadOf(c) === payload)
    .forEach((c, i) => {
      const color = COLORS[i % COLORS.length]!;
      const label = c.ours === true ? c.label.replace(/^@idempotent-tools\//, '') : c.label;
      const short = label.length > 48 ? `${label.slice(0, 47)}…` : label;
      const name = c.ours === true ? `${short} (ours)` : short;
      series.push({ label: `${name}: fresh`, color, dashed: false, points: points(c.modes.fresh) });
      series.push({
        label: `${name}: replay`,
        color,
        dashed: true,
        points: points(c.modes.replay),
      });
    });
  for (const u of engine.units.filter((unit) => payloadOf(unit) === payload)) {
    series.push({ label: u.label, color: '#777', dashed: false, points: points(u.modes.read) });
  }
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return '';
  const xs = [1, 16, 64];
  const yMin = 10 ** Math.floor(Math.log10(Math.min(...all.map((p) => p[1]))));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(...all.map((p) => p[1]))));
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const x = (n: number) => M.left + (Math.log(n) / Math.log(64)) * pw;
  const y = (us: number) =>
    M.top + ph - ((Math.log10(us) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin))) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<title>${esc(engine.title)} (${esc(payload)} payload): p50 latency per call against calls in flight</title>`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${M.left}" y="22" font-size="14" font-weight="bold">${esc(engine.title)}, ${esc(payload)} payload: p50 latency per call vs calls in flight</text>`,
  ];
  for (let e = Math.log10(yMin); e <= Math.log10(yMax); e++) {
    const v = 10 ** e;
    out.push(
      `<line x1="${M.left}" x2="${M.left + pw}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${y(v) + 4}" text-anchor="end">${v >= 1000 ? `${v / 1000} ms` : `${v} µs`}</text>`,
    );
  }
  for (const n of xs) {
    out.push(
      `<line x1="${x(n)}" x2="${x(n)}" y1="${M.top}" y2="${M.top + ph}" stroke="#ddd"/>`,
      `<text x="${x(n)}" y="${M.top + ph + 16}" text-anchor="middle">${n}</text>`,
    );
  }
  out.push(
    `<text x="${M.left + pw / 2}" y="${H - 12}" text-anchor="middle">calls in flight (log)</text>`,
    `<rect x="${M.left}" y="${M.top}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`,
  );
  series.forEach((s, i) => {
    const dash = s.dashed ? ' stroke-dasharray="5,4"' : '';
    const path = s.points.map(([n, us]) => `${x(n).toFixed(1)},${y(us).toFixed(1)}`).join(' ');
    out.push(
      `<polyline points="${path}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`,
    );
    for (const [n, us] of s.points) {
      out.push(
        `<circle cx="${x(n).toFixed(1)}" cy="${y(us).toFixed(1)}" r="2.5" fill="${s.color}"><title>${esc(s.label)}: ${n} in flight, p50 ${us} µs</title></circle>`,
      );
    }
    const ly = M.top + 8 + i * 16;
    const lx = W - M.right + 14;
    out.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
      `<text x="${lx + 28}" y="${ly + 4}">${esc(s.label)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

export function runPlot(): string[] {
  const dir = new URL('../results/', import.meta.url);
  const data = JSON.parse(readFileSync(new URL('stores.json', dir), 'utf8')) as {
    engines: EngineResult[];
  };
  const files: string[] = [];
  for (const engine of data.engines) {
    const payloads = [...new Set(engine.contenders.map(payloadOf))];
    for (const payload of payloads) {
      const text = svg(engine, payload);
      if (text === '') continue;
      const name = `stores-latency-${engine.id}${payload === 'small' ? '' : `-${payload}`}.svg`;
      writeFileSync(new URL(name, dir), text);
      files.push(`results/${name}`);
    }
  }
  console.log(`Wrote ${files.join(', ')}`);
  return files;
}
