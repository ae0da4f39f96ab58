import { describe, expect, it } from 'vitest';
import { createEscapes, markContent } from './calls.js';

describe('markContent: the replay mark inside the content, the number of blocks kept', () => {
  it('the last text block: JSON objects get the field, other text a line', () => {
    const image = { type: 'image', data: 'AAAA', mimeType: 'image/png' };
    expect(markContent([{ type: 'text', text: '{"id":"T-1"}' }, image], true)).toEqual([
      { type: 'text', text: '{"id":"T-1","replayed":true}' },
      image,
    ]);
    expect(
      markContent(
        [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
        true,
      ),
    ).toEqual([
      { type: 'text', text: 'a' },
      { type: 'text', text: 'b\n\n{"replayed":true}' },
    ]);
    // JSON that already has a replayed field, or is not an object: the line.
    expect(markContent([{ type: 'text', text: '{"replayed":"no"}' }], true)[0]?.text).toBe(
      '{"replayed":"no"}\n\n{"replayed":true}',
    );
    expect(markContent([{ type: 'text', text: '[1]' }], false)[0]?.text).toBe(
      '[1]\n\n{"replayed":false}',
    );
    expect(markContent([{ type: 'text', text: '' }], true)[0]?.text).toBe('{"replayed":true}');
  });

  it('no text block: a text block is added', () => {
    const image = { type: 'image', data: 'AAAA', mimeType: 'image/png' };
    expect(markContent([image], true)).toEqual([
      image,
      { type: 'text', text: '{"replayed":true}' },
    ]);
    expect(markContent([], true)).toEqual([{ type: 'text', text: '{"replayed":true}' }]);
  });
});

describe('createEscapes: a developer error through toModelOutput', () => {
  it('an escape, even copied, rethrows its error once; other outputs pass', () => {
    const escapes = createEscapes();
    const error = new Error('no turn');
    const escaped = escapes.escape(error);
    expect(escaped).toMatchObject({ error: 'not_run', message: /configuration error/ });
    expect(() => escapes.rethrow(structuredClone(escaped))).toThrow(error);
    expect(() => escapes.rethrow(escaped)).not.toThrow(); // thrown once: forgotten
    expect(() => escapes.rethrow({ ...escaped, idempotentToolsEscape: 'x' })).not.toThrow();
    expect(() => createEscapes().rethrow(escapes.escape(error))).not.toThrow(); // another's
    for (const output of [null, undefined, 'text', { ok: true }]) escapes.rethrow(output);
  });
});
