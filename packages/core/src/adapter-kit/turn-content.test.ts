import { describe, expect, test } from 'vitest';
import { userContent } from './turn-content.js';
import { deriveTurnId } from './turn-identity.js';

const turn = (content: unknown) => deriveTurnId('chat', [{ role: 'user', content }]);
const WORDS = 'Cancel my subscription.';

describe('userContent: the same words in any shape are one content', () => {
  const shapes: [string, unknown][] = [
    ['a string', WORDS],
    ['AI SDK / OpenAI Chat / Anthropic text part', [{ type: 'text', text: WORDS }]],
    ['Responses input_text', [{ type: 'input_text', text: WORDS }]],
    ['Gemini part', [{ text: WORDS }]],
    ['Mastra stored { parts }', { format: 2, parts: [{ type: 'text', text: WORDS }] }],
    [
      'AI SDK part with providerOptions',
      [
        {
          type: 'text',
          text: WORDS,
          providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } },
        },
      ],
    ],
    [
      'Anthropic block with a cache breakpoint',
      [{ type: 'text', text: WORDS, cache_control: { type: 'ephemeral' } }],
    ],
    ['a LangChain block with an id', [{ type: 'text', text: WORDS, id: 'lc_run-1' }]],
  ];
  for (const [name, shape] of shapes) {
    test(name, () => {
      expect(userContent(shape)).toBe(WORDS);
      expect(turn(shape)).toBe(turn(WORDS));
    });
  }

  test('other words, another content; order of parts counts', () => {
    expect(turn('Cancel my plan.')).not.toBe(turn(WORDS));
    expect(
      turn([
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ]),
    ).not.toBe(
      turn([
        { type: 'text', text: 'b' },
        { type: 'text', text: 'a' },
      ]),
    );
  });

  test('binary parts count by their bytes, whatever holds them', () => {
    const bytes = new Uint8Array([137, 80, 78, 71]);
    const b64 = Buffer.from(bytes).toString('base64');
    const same = [
      [{ type: 'image', image: bytes, mediaType: 'image/png' }],
      [{ type: 'image', image: bytes.buffer }],
      [{ type: 'image', image: b64 }],
      [{ type: 'file', data: { type: 'data', data: bytes }, mediaType: 'image/png' }],
      [{ type: 'image_url', image_url: { url: `data:image/png;base64,${b64}`, detail: 'high' } }],
      [{ type: 'input_image', image_url: `data:image/png;base64,${b64}` }],
      [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: b64 } }],
      [{ inlineData: { mimeType: 'image/png', data: b64 } }],
      [{ type: 'image', source_type: 'base64', data: b64, mime_type: 'image/png' }],
    ];
    for (const shape of same) expect(userContent(shape)).toEqual([{ data: b64 }]);
    expect(turn([{ type: 'image', image: new Uint8Array([1]) }])).not.toBe(turn(same[0]));
  });

  test('a URL or a file id counts as itself; a text file is not the same as typed text', () => {
    const url = 'https://example.com/receipt.pdf';
    expect(
      userContent([{ type: 'file', data: new URL(url), mediaType: 'application/pdf' }]),
    ).toEqual([{ url }]);
    expect(userContent([{ type: 'input_file', file_url: url }])).toEqual([{ url }]);
    expect(userContent([{ fileData: { fileUri: url, mimeType: 'application/pdf' } }])).toEqual([
      { url },
    ]);
    expect(userContent([{ type: 'input_file', file_id: 'file-1' }])).toEqual([{ file: 'file-1' }]);
    expect(
      turn([{ type: 'file', data: { type: 'text', text: WORDS }, mediaType: 'text/plain' }]),
    ).not.toBe(turn(WORDS));
  });

  test("OpenAI's prompt cache breakpoints and the Agents SDK's providerData never count", () => {
    const breakpoint = { mode: 'explicit' };
    // The Agents SDK's audio part: no payload field this normaliser reads, so it is stripped.
    const audio = { type: 'audio', audio: 'UklGRg==', format: 'wav' };
    expect(turn([{ ...audio, providerData: { prompt_cache_breakpoint: breakpoint } }])).toBe(
      turn([audio]),
    );
    expect(turn([{ ...audio, prompt_cache_breakpoint: breakpoint }])).toBe(turn([audio]));
    expect(turn([{ type: 'audio', audio: 'AAAA', format: 'wav' }])).not.toBe(turn([audio]));
    const text = { type: 'input_text', text: WORDS };
    expect(turn([{ ...text, prompt_cache_breakpoint: breakpoint }])).toBe(turn(WORDS));
    expect(turn([{ ...text, providerData: { prompt_cache_breakpoint: breakpoint } }])).toBe(
      turn(WORDS),
    );
  });

  test('a part of an unknown shape counts without its volatile fields', () => {
    const a = [{ type: 'custom', value: 1, providerOptions: { x: 1 } }];
    const b = [{ type: 'custom', value: 1 }];
    expect(turn(a)).toBe(turn(b));
    expect(turn([{ type: 'custom', value: 2 }])).not.toBe(turn(b));
  });
});
