import { describe, expect, test } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import {
  type ContentResult,
  contentOutcome,
  contentReply,
  declaresReplayed,
  markContentResult,
  ToolResultError,
} from './content-results.js';

const text = (value: string) => ({ type: 'text', text: value });

describe('content results', () => {
  test('declaresReplayed: whether an output schema has `replayed`, undefined without one', () => {
    expect(declaresReplayed(undefined)).toBeUndefined();
    expect(declaresReplayed({ shape: { replayed: {}, id: {} } })).toBe(true);
    expect(declaresReplayed({ _zod: { def: { shape: { id: {} } } } })).toBe(false);
    // A schema whose properties cannot be known: it declares nothing.
    expect(declaresReplayed({})).toBe(false);
  });

  test('ToolResultError: the result kept, its text parts as the message', () => {
    const result = { content: [text('no stock'), { type: 'image' }, text('sorry')], isError: true };
    const error = new ToolResultError(result);
    expect(error.message).toBe('no stock\nsorry');
    expect(error.name).toBe('ToolResultError');
    expect(error.result).toBe(result);
    expect(new ToolResultError({ isError: true }).message).toBe(
      'The tool returned an error result.',
    );
  });

  test('contentOutcome: an error result thrown, any other returned', () => {
    const ok = { content: [text('done')] };
    expect(contentOutcome(ok)).toBe(ok);
    expect(() => contentOutcome({ content: [text('bad')], isError: true })).toThrow(
      ToolResultError,
    );
  });

  test('markContentResult: content, _meta and structured content as the schema allows', () => {
    const result: ContentResult = { content: [text('{"id":1}')], structuredContent: { id: 1 } };
    const mark = { markFresh: false, metaField: 'm/replayed' };
    const none = markContentResult(result, true, { ...mark, declared: undefined });
    expect(none._meta).toEqual({ 'm/replayed': true });
    expect(JSON.parse(String(none.content?.[0]?.text))).toEqual({
      id: 1,
      replayed: true,
    });
    expect(none.structuredContent).toEqual({ id: 1, replayed: true });
    expect(markContentResult(result, true, { ...mark, declared: false }).structuredContent).toEqual(
      { id: 1 },
    );
    expect(markContentResult(result, true, { ...mark, declared: true }).structuredContent).toEqual({
      id: 1,
      replayed: true,
    });
    const own = { structuredContent: { replayed: 'x' } };
    expect(
      markContentResult(own, true, { ...mark, declared: undefined }).structuredContent,
    ).toEqual({
      replayed: 'x',
    });
    expect(markContentResult(result, false, { ...mark, declared: undefined })).toBe(result);
    const fresh = markContentResult(result, false, { ...mark, markFresh: true, declared: true });
    expect(fresh._meta).toEqual({ 'm/replayed': false });
    expect(fresh.structuredContent).toEqual({ id: 1, replayed: false });
  });

  test('contentReply: the output, an error result, the model text as an error result', () => {
    const output = { content: [text('ok')] };
    expect(contentReply({ output })).toBe(output);
    const result = { content: [text('bad')], isError: true };
    expect(contentReply({ error: new ToolResultError(result) })).toBe(result);
    expect(contentReply({ text: 'wait' })).toEqual({ content: [text('wait')], isError: true });
    const developer = contentReply({
      developer: new InvalidInputError({ field: 'x', message: 'bad x' }),
    });
    expect(developer.isError).toBe(true);
    const own = new Error('boom');
    expect(() => contentReply({ error: own })).toThrow(own);
  });
});
