import { describe, expect, test } from 'vitest';
import { ConfigurationError, DriftError } from '../errors/index.js';
import { errorOutcome, returnOrThrow } from './outcomes.js';

describe('errorOutcome / returnOrThrow: an error as an outcome, an outcome as a return value', () => {
  test('an idempotency error is the model text; a configuration error the developer; any other the tool', () => {
    const drift = new DriftError({
      key: 'k',
      toolName: 'charge',
      storedFingerprint: 'a',
      fingerprint: 'b',
      message: 'other arguments',
    });
    expect(errorOutcome(drift)).toEqual({ text: expect.stringContaining('"error":"drift"') });
    const config = new ConfigurationError({ option: 'turnId', message: 'pass turnId' });
    expect(errorOutcome(config)).toEqual({ developer: config });
    const own = new Error('the vendor is down');
    expect(errorOutcome(own)).toEqual({ error: own });
  });

  test('the output and the text are returned; the developer error and the tool error thrown', () => {
    expect(returnOrThrow({ output: { ok: 1 } })).toEqual({ ok: 1 });
    expect(returnOrThrow({ text: 'fix it' })).toBe('fix it');
    const config = new ConfigurationError({ option: 'turnId', message: 'pass turnId' });
    expect(() => returnOrThrow({ developer: config })).toThrow(config);
    const own = new Error('the vendor is down');
    expect(() => returnOrThrow({ error: own })).toThrow(own);
  });
});
