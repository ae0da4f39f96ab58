import { describe, expect, test } from 'vitest';
import { DriftError, InProgressError, OutcomeUnknownError } from './errors/index.js';
import {
  errorForModel,
  markReplayed,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  withRetryNote,
} from './model-output.js';

describe('markReplayed', () => {
  test('objects get a replayed field; other values are wrapped', () => {
    expect(markReplayed({ id: 1 }, true)).toEqual({ id: 1, replayed: true });
    expect(markReplayed('done', true)).toEqual({ result: 'done', replayed: true });
    expect(markReplayed([1, 2], true)).toEqual({ result: [1, 2], replayed: true });
    expect(markReplayed(null, true)).toEqual({ result: null, replayed: true });
    expect(markReplayed({ replayed: 'x' }, true)).toEqual({
      result: { replayed: 'x' },
      replayed: true,
    });
    expect(markReplayed(new Date(0), true)).toEqual({ result: new Date(0), replayed: true });
  });
  test('fresh results are unchanged unless markFresh', () => {
    const value = { id: 1 };
    expect(markReplayed(value, false)).toBe(value);
    expect(markReplayed('x', false, { markFresh: true })).toEqual({ result: 'x', replayed: false });
  });
});

describe('withRetryNote', () => {
  test('appends the note once', () => {
    const once = withRetryNote('Charge a card.');
    expect(once).toBe(`Charge a card.\n\n${RETRY_SAFE_NOTE}`);
    expect(withRetryNote(once)).toBe(once);
    expect(withRetryNote(undefined, false)).toBe(RETRY_UNSAFE_NOTE);
  });
});

describe('errorForModel', () => {
  test('maps idempotency errors to a next step; other errors are not ours', () => {
    expect(
      errorForModel(new DriftError({ message: 'm', fingerprint: 'a', storedFingerprint: 'b' })),
    ).toEqual({
      error: 'drift',
      message: 'm',
      next: 'change-arguments',
    });
    expect(errorForModel(new OutcomeUnknownError({ message: 'm' }))?.next).toBe('check-first');
    expect(errorForModel(new InProgressError({ message: 'm' }))?.next).toBe('retry-later');
    expect(errorForModel(new Error('x'))).toBeUndefined();
  });
});
