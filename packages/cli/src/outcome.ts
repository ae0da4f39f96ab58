/**
 * `inspect --show-outcome`: the outcome a call returned, read from the stored text. The executor
 * stores `{"v": value}` (a value) or `{"e": {name, message, code}}` (a terminal error), or, with
 * `encryption`, an `enc:v1:<keyId>:...` envelope that only an executor holding the key can open:
 * the CLI has no keys, so it says which key sealed it and shows nothing else.
 */

/** What `--show-outcome` shows (`--json`: the `outcome` field of `inspect`). */
export type ShownOutcome =
  /** The value the call returned, as every replay gets it. */
  | { kind: 'value'; value: unknown }
  /** The call returned `undefined` (stored as `{}`): a replay returns `undefined` too. */
  | { kind: 'undefined' }
  /** A terminal error, replayed as `ReplayedFailureError` with these fields. */
  | { kind: 'error'; error: { name: string; message: string; code?: string } }
  /** Sealed by an executor with `encryption`; `keyId` names the key (the CLI has none). */
  | { kind: 'encrypted'; keyId: string | null }
  /** Not an outcome this library wrote (a corrupt record, or written by hand): the raw text. */
  | { kind: 'unreadable'; raw: string };

const ENVELOPE = /^enc:v1:([A-Za-z0-9_-]{1,32}):/;

/** The outcome stored as `text`. */
export function readOutcome(text: string): ShownOutcome {
  if (text.startsWith('enc:'))
    return { kind: 'encrypted', keyId: ENVELOPE.exec(text)?.[1] ?? null };
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch {
    return { kind: 'unreadable', raw: text };
  }
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) {
    return { kind: 'unreadable', raw: text };
  }
  const { v, e } = stored as { v?: unknown; e?: unknown };
  if (e !== undefined) {
    const error = e as { name?: unknown; message?: unknown; code?: unknown };
    if (e === null || typeof e !== 'object' || typeof error.message !== 'string') {
      return { kind: 'unreadable', raw: text };
    }
    return {
      kind: 'error',
      error: {
        name: typeof error.name === 'string' ? error.name : 'Error',
        message: error.message,
        ...(typeof error.code === 'string' ? { code: error.code } : {}),
      },
    };
  }
  if ('v' in stored) return { kind: 'value', value: v };
  return Object.keys(stored).length === 0
    ? { kind: 'undefined' }
    : { kind: 'unreadable', raw: text };
}

/** One line for people. */
export function outcomeText(outcome: ShownOutcome): string {
  switch (outcome.kind) {
    case 'value':
      return JSON.stringify(outcome.value);
    case 'undefined':
      return 'undefined (the call returned no value)';
    case 'error': {
      const { name, message, code } = outcome.error;
      return `terminal error ${name}: ${message}${code === undefined ? '' : ` (code ${code})`} (replayed as ReplayedFailureError)`;
    }
    case 'encrypted':
      return `encrypted${outcome.keyId === null ? '' : ` with key ${outcome.keyId}`}: the CLI has no keys and does not decrypt it (read it from your code, on an executor with the same encryption)`;
    default:
      return `not an outcome this library wrote (shown as stored): ${outcome.raw}`;
  }
}
