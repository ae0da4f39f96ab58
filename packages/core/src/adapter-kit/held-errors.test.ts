import { describe, expect, test } from 'vitest';
import { createHeldErrors } from './held-errors.js';

describe('createHeldErrors: a developer error that ends the run, whatever the layers below made of it', () => {
  test('held during the call: thrown instead of the answer; gone afterwards', async () => {
    const held = createHeldErrors();
    const refusal = new Error('configuration');
    const run = () => {
      held.hold('call-1', refusal); // the tool, below a layer that turns its error into a message
      return Promise.resolve('a message about it');
    };
    await expect(held.around('call-1', run)).rejects.toBe(refusal);
    expect(await held.around('call-1', async () => 'ok')).toBe('ok');
  });

  test("another call's error is not this one's; a call without an id holds nothing", async () => {
    const held = createHeldErrors();
    const answer = await held.around('call-2', async () => {
      held.hold('call-3', new Error('other'));
      return 'mine';
    });
    expect(answer).toBe('mine');
    expect(await held.around(undefined, async () => 'no id')).toBe('no id');
  });

  test('an error thrown by the layers below passes as it is, and nothing stays held', async () => {
    const held = createHeldErrors();
    const thrown = new Error('thrown');
    const run = async () => {
      held.hold('call-4', new Error('held'));
      throw thrown;
    };
    await expect(held.around('call-4', run)).rejects.toBe(thrown);
    expect(await held.around('call-4', async () => 'clean')).toBe('clean');
  });
});
