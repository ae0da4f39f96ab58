import { describe, expect, test } from 'vitest';
import { parseArguments, parseSchema } from './arguments.js';

describe('parseArguments', () => {
  const schema = parseSchema((value) => {
    const { n } = value as { n?: unknown };
    if (typeof n !== 'number')
      throw Object.assign(new Error('bad'), {
        issues: [{ message: 'n must be a number', path: ['n'] }],
      });
    return { n, checked: true };
  });

  test('JSON text or a parsed value; a parse function as the schema, its output the args', async () => {
    expect(await parseArguments('charge', '{"n":1}', schema)).toEqual({
      args: { n: 1, checked: true },
    });
    expect(await parseArguments('charge', { n: 2 }, schema)).toEqual({
      args: { n: 2, checked: true },
    });
    expect(await parseArguments('charge', '', undefined)).toEqual({ args: {} });
  });

  test("what to fix, for the model: the thrown issues, or the error's text", async () => {
    const bad = await parseArguments('charge', { n: 'x' }, schema);
    expect('error' in bad && bad.error).toMatch(/n: n must be a number/);
    const plain = parseSchema(() => {
      throw new Error('no way');
    });
    const out = await parseArguments('charge', '{}', plain);
    expect('error' in out && out.error).toMatch(/no way/);
  });
});
