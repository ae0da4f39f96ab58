import { describe, expect, it } from 'vitest';
import { markContent } from './calls.js';

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
