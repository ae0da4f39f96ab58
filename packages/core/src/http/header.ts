/**
 * The `Idempotency-Key` field value: an RFC 8941 Item whose bare item is a String (the IETF
 * HTTPAPI draft, draft-ietf-httpapi-idempotency-key-header, section 2.1), or the raw form most
 * vendors take today (Stripe: `Idempotency-Key: 8e03978e-...`).
 */

/** Why a field value is not a key. */
export type KeyParseError = { ok: false; reason: string };

/** A key read from the field, or why it is not one. */
export type KeyParseResult = { ok: true; key: string; form: 'sf-string' | 'raw' } | KeyParseError;

// RFC 8941 section 3.3.3: unescaped = %x20-21 / %x23-5B / %x5D-7E.
const isStringChar = (c: number) => c >= 0x20 && c <= 0x7e;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isLcAlpha = (c: number) => c >= 0x61 && c <= 0x7a;
const isAlpha = (c: number) => isLcAlpha(c) || (c >= 0x41 && c <= 0x5a);
// tchar (RFC 9110 section 5.6.2) plus ":" and "/" (sf-token).
const TOKEN_CHARS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z:/]$/;
/**
 * The raw form: printable ASCII without spaces, double quotes, backslashes, commas (two fields
 * joined by a proxy or by `Headers`) or semicolons (RFC 8941 parameters).
 */
const RAW = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;

class Parser {
  pos = 0;
  constructor(readonly input: string) {}

  fail(reason: string): never {
    throw new SyntaxError(reason);
  }

  peek(): number {
    return this.input.charCodeAt(this.pos);
  }

  done(): boolean {
    return this.pos >= this.input.length;
  }

  skipSpaces(): void {
    while (!this.done() && this.peek() === 0x20) this.pos++;
  }

  /** RFC 8941 section 4.2.5. */
  string(): string {
    this.pos++; // the opening DQUOTE
    let out = '';
    while (!this.done()) {
      const c = this.peek();
      this.pos++;
      if (c === 0x5c) {
        if (this.done()) this.fail('it ends in a backslash');
        const next = this.peek();
        this.pos++;
        if (next !== 0x22 && next !== 0x5c) {
          this.fail('a backslash escapes only a double quote or a backslash');
        }
        out += String.fromCharCode(next);
      } else if (c === 0x22) {
        return out;
      } else if (!isStringChar(c)) {
        this.fail('it holds a character outside printable ASCII');
      } else {
        out += String.fromCharCode(c);
      }
    }
    return this.fail('the closing double quote is missing');
  }

  /** A bare item of a parameter value (section 4.2.3.1); only its extent matters here. */
  bareItem(): void {
    const c = this.peek();
    if (c === 0x22) {
      this.string();
    } else if (c === 0x2d || isDigit(c)) {
      const start = this.pos;
      this.pos++;
      while (!this.done() && (isDigit(this.peek()) || this.peek() === 0x2e)) this.pos++;
      if (!/^-?\d{1,15}(\.\d{1,3})?$/.test(this.input.slice(start, this.pos))) {
        this.fail('a parameter holds a malformed number');
      }
    } else if (c === 0x3a) {
      const end = this.input.indexOf(':', this.pos + 1);
      if (end < 0 || !/^[A-Za-z0-9+/=]*$/.test(this.input.slice(this.pos + 1, end))) {
        this.fail('a parameter holds a malformed byte sequence');
      }
      this.pos = end + 1;
    } else if (c === 0x3f) {
      const value = this.input.charAt(this.pos + 1);
      if (value !== '0' && value !== '1') this.fail('a parameter holds a malformed boolean');
      this.pos += 2;
    } else if (isAlpha(c) || c === 0x2a) {
      this.pos++;
      while (!this.done() && TOKEN_CHARS.test(this.input.charAt(this.pos))) this.pos++;
    } else {
      this.fail('a parameter holds a malformed value');
    }
  }

  /** Parameters (section 4.2.3.2): parsed to be skipped; the key is the bare item. */
  parameters(): void {
    while (!this.done() && this.peek() === 0x3b) {
      this.pos++;
      this.skipSpaces();
      const start = this.pos;
      const first = this.peek();
      if (!(isLcAlpha(first) || first === 0x2a)) this.fail('a parameter has a malformed name');
      while (!this.done() && /^[a-z0-9_\-.*]$/.test(this.input.charAt(this.pos))) this.pos++;
      if (this.pos === start) this.fail('a parameter has no name');
      if (!this.done() && this.peek() === 0x3d) {
        this.pos++;
        this.bareItem();
      }
    }
  }
}

/**
 * Read an idempotency key from the field value: an RFC 8941 sf-string (`"abc"`, escapes
 * `\"` and `\\`, parameters allowed and ignored), or the raw form (`abc`: printable ASCII
 * without spaces, `"`, `\`, `,` or `;`). Both give the same key: `"abc"` and `abc` are one key.
 *
 * @param maxLength the longest key accepted, in characters (after unescaping)
 */
export function parseIdempotencyKey(value: string, maxLength: number): KeyParseResult {
  // Fetch's Headers already strip leading and trailing whitespace; an Item allows leading SP.
  const input = value.trim();
  let key: string;
  let form: 'sf-string' | 'raw';
  if (input.startsWith('"')) {
    const parser = new Parser(input);
    try {
      key = parser.string();
      parser.parameters();
      parser.skipSpaces();
      if (!parser.done()) {
        return {
          ok: false,
          reason:
            'it has more after the quoted string (send one Idempotency-Key field holding one string)',
        };
      }
    } catch (error) {
      return { ok: false, reason: `it is not an RFC 8941 String: ${(error as Error).message}` };
    }
    form = 'sf-string';
  } else {
    if (!RAW.test(input)) {
      return {
        ok: false,
        reason:
          input === ''
            ? 'it is empty'
            : 'it is neither an RFC 8941 String ("...") nor a raw key (printable ASCII without spaces, quotes, backslashes, commas or semicolons)',
      };
    }
    key = input;
    form = 'raw';
  }
  if (key.length === 0) return { ok: false, reason: 'it is empty' };
  if (key.length > maxLength) {
    return { ok: false, reason: `it is ${key.length} characters long; the limit is ${maxLength}` };
  }
  return { ok: true, key, form };
}

/**
 * An RFC 8941 sf-string of `key`: `"` + the key with `\` and `"` escaped + `"`.
 * @throws TypeError when the key holds a character outside printable ASCII (%x20-7E)
 */
export function serializeSfString(key: string): string {
  let out = '"';
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (!isStringChar(c)) {
      throw new TypeError(
        `An RFC 8941 String holds printable ASCII only; the key has character code ${c} at ${i}.`,
      );
    }
    out += c === 0x22 || c === 0x5c ? `\\${key.charAt(i)}` : key.charAt(i);
  }
  return `${out}"`;
}
