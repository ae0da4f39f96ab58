/** Values and helpers of the conformance suite that hold for every store and every test. */
import { createHash } from 'node:crypto';

/** A lease and a TTL long enough that no test of behaviour unrelated to time sees them run out. */
export const LONG_LEASE = 60_000;
export const LONG_TTL = 120_000;

export function fingerprint(label: string): string {
  return createHash('sha256').update(label).digest('base64url');
}

export const FP_A = fingerprint('a');
export const FP_B = fingerprint('b');

export function bigOutcome(): string {
  const lines: string[] = [];
  let length = 0;
  for (let i = 0; length < 100_000; i++) {
    const line = `{"line":${i},"text":"ü€𝄞 \\"q\\" \\\\ '"}\n`;
    lines.push(line);
    length += line.length;
  }
  return lines.join('');
}

/** Outcomes a store must keep byte-exact. */
export const AWKWARD_OUTCOMES: readonly string[] = [
  '{"ok":true}',
  'héllo wörld — “curly” "straight" \'single\' `back` \\ \\\\ \\n (escaped) ',
  'line 1\nline 2\r\nline 3\ttab\u2028ls\u2029ps\n\n',
  'emoji 👩🏽‍💻 🇪🇺, CJK 你好世界, RTL שלום مرحبا, combining e\u0301, astral 𝄞\u{1F600}',
  '{"nested":"{\\"json\\":\\"in json\\"}","escaped":"\\u00e9\\u0000","n":12345678901234567890}',
  '',
  ' leading and trailing spaces ',
  bigOutcome(),
];

/** What `promise` rejected with, or undefined when it resolved. */
export async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

type Settlement = 'pending' | 'resolved' | 'rejected';
export const SETTLED: readonly Settlement[] = ['resolved', 'rejected'];

/** Follow a promise's settlement without letting a rejection go unhandled. */
export function watch(promise: Promise<unknown>): {
  state(): Settlement;
  settle(withinMs: number): Promise<Settlement>;
} {
  let state: Settlement = 'pending';
  const settled = promise.then(
    () => {
      state = 'resolved';
    },
    () => {
      state = 'rejected';
    },
  );
  return {
    state: () => state,
    settle: async (withinMs) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, withinMs);
      });
      await Promise.race([settled, deadline]);
      clearTimeout(timer);
      return state;
    },
  };
}
