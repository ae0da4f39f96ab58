import { describe, expect, test } from 'vitest';
import { createApprovals } from '../approvals/approvals.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { anchorSources, createRequestTurns, type TurnAnchor } from './request-turns.js';
import { copyTool } from './tool-set.js';

type Info = { anchor: TurnAnchor; args: unknown };
const said = (text: string) => [{ role: 'user' as const, content: text }];

function setup() {
  const executor = createIdempotency({ store: createMemoryStore() });
  const turns = createRequestTurns(executor, 'test');
  const adapter = createAdapter<Info>(
    { idempotency: executor, conversationId: 'chat-1' },
    {
      caller: 'test',
      toolNames: ['refund'],
      howTo: 'turnId',
      ...anchorSources<Info>((info) => info.anchor),
    },
  );
  return { executor, turns, adapter };
}

describe('createRequestTurns: the turn of a request, carried to its calls', () => {
  test('anchor: the words; a response continued names the turn; refusals for hidden items and a server history', async () => {
    const { turns } = setup();
    const words = await turns.anchor({ transcript: said('hi'), answers: [] });
    expect(words).toEqual({ said: expect.stringMatching(/^tc_/) });
    expect(await turns.anchor({ transcript: said('hi'), answers: [] })).toEqual(words);
    const chained = await turns.anchor({ transcript: said('hi'), continues: 'r1', answers: [] });
    expect(chained).toEqual({ turn: expect.stringMatching(/^tc_/) });
    expect(
      await turns.anchor({ transcript: said('hi'), continues: 'r2', answers: [] }),
    ).not.toEqual(chained);
    const hidden = { transcript: said('hi'), hidden: 'an item reference', answers: [] };
    expect(await turns.anchor({ ...hidden, continues: 'r1' })).toEqual({
      refuse: 'an item reference',
    });
    const server = { transcript: said('hi'), serverHistory: 'a server conversation', answers: [] };
    expect(await turns.anchor(server)).toEqual({ refuse: 'a server conversation' });
    expect(await turns.anchor({ ...server, continues: 'r1' })).toEqual(chained);
  });

  test('anchor: only tool outputs find the turn linked to their calls, else a refusal naming turnId', async () => {
    const { turns } = setup();
    const outputs = { transcript: [{ role: 'answer' as const }], answers: ['call_1'] };
    expect(await turns.anchor(outputs)).toEqual({
      refuse: expect.stringMatching(/only tool outputs.*pass turnId/),
    });
    expect(await turns.anchor({ transcript: undefined, answers: [] })).toEqual({
      refuse: expect.stringMatching(/no user message.*Pass turnId/),
    });
    await turns.emitted({ turn: 't1' }, [
      { id: 'call_1', toolName: 'refund', args: '{}', asks: false },
    ]);
    expect(await turns.anchor(outputs)).toEqual({ turn: 't1' });
  });

  test('emitted: links in the store only when a call may wait for an approval', async () => {
    const { executor } = setup();
    const quiet = createRequestTurns(executor, 'test');
    await quiet.emitted({ turn: 't1' }, [
      { id: 'c1', toolName: 'refund', args: '{}', asks: false },
    ]);
    expect(await createRequestTurns(executor, 'test').links.find(['c1'])).toBeUndefined();
    await quiet.emitted({ turn: 't2' }, [{ id: 'c2', toolName: 'refund', args: '{}', asks: true }]);
    expect(await createRequestTurns(executor, 'test').links.find(['c2'])).toEqual({ turn: 't2' });
  });

  test('linkTurn: the turn a step resolves to, linked in the store to its first call id', async () => {
    const { executor, turns } = setup();
    await turns.linkTurn(['c1', 'c2'])('t1');
    const other = createRequestTurns(executor, 'test');
    expect(await other.links.find(['c1'])).toEqual({ turn: 't1' });
    expect(await other.links.find(['c2'])).toBeUndefined();
  });

  test('anchorSources: a turn, a refusal, or the words derived again with the conversation', async () => {
    const { adapter } = setup();
    const sources = anchorSources<Info>((info) => info.anchor);
    const at = (anchor: TurnAnchor) => ({ anchor, args: {} });
    expect(sources.turn(at({ turn: 't1' }))).toBe('t1');
    expect(sources.refusal(at({ refuse: 'why' }))).toBe('why');
    expect(sources.transcript(at({ said: 'tc_x' }))).toEqual(said('tc_x'));
    expect(sources.turn(at({ said: 'tc_x' }))).toBeUndefined();
    expect(adapter.identify(at({ turn: 't1' }), 'refund').turnId).toBe('t1');
    expect(() => adapter.identify(at({ refuse: 'the turn is unknown' }), 'refund')).toThrow(
      /the turn is unknown/,
    );
  });
});

describe('runLinked: a call by its id, its approval bound to the call the model emitted', () => {
  const execute = (ran: unknown[]) => async (prepared: { args: unknown }) => {
    ran.push(prepared.args);
    return { refunded: true };
  };

  test('the turn linked to the call id; a repeat replays; an unlinked call gets the refusal', async () => {
    const { turns, adapter } = setup();
    await turns.emitted({ turn: 't1' }, [
      { id: 'c1', toolName: 'refund', args: '{"n":1}', asks: false },
    ]);
    const ran: unknown[] = [];
    const call = (callId: string | undefined) => ({
      toolName: 'refund',
      callId,
      input: '{"n":1}',
      durable: true,
      unlinked: { refuse: 'no link' } as TurnAnchor,
      info: (anchor: TurnAnchor, args: unknown) => ({ anchor, args }),
    });
    expect(await turns.runLinked(adapter, call('c1'), execute(ran))).toEqual({
      output: { refunded: true },
    });
    expect(await turns.runLinked(adapter, call('c1'), execute(ran))).toEqual({
      output: { refunded: true, replayed: true },
    });
    expect(ran).toEqual([{ n: 1 }]);
    const unlinked = await turns.runLinked(adapter, call(undefined), execute(ran));
    expect('developer' in unlinked && String(unlinked.developer)).toMatch(/no link/);
    expect(ran).toEqual([{ n: 1 }]);
  });

  test('approved: runs only the call the model emitted, with those arguments, approved once', async () => {
    const { executor, turns, adapter } = setup();
    await turns.emitted({ turn: 't1' }, [
      { id: 'c1', toolName: 'refund', args: '{"n":1}', asks: true },
    ]);
    const ran: unknown[] = [];
    const call = (callId: string, input: string) => ({
      toolName: 'refund',
      callId,
      input,
      durable: true,
      unlinked: { turn: 't1' } as TurnAnchor,
      info: (anchor: TurnAnchor, args: unknown) => ({ anchor, args }),
      approvedBy: async () => `test:${callId}`,
    });
    const edited = await turns.runLinked(adapter, call('c1', '{"n":500}'), execute(ran));
    expect(edited).toEqual({ text: expect.stringContaining('other arguments') });
    const madeUp = await turns.runLinked(adapter, call('c9', '{"n":1}'), execute(ran));
    expect(madeUp).toEqual({ text: expect.stringContaining('never asked for') });
    expect(ran).toEqual([]);
    expect(await turns.runLinked(adapter, call('c1', '{"n":1}'), execute(ran))).toEqual({
      output: { refunded: true },
    });
    expect(ran).toEqual([{ n: 1 }]);
    const approvals = createApprovals(executor);
    const key = approvals.keyOf({ toolName: 'refund', turnId: 't1', args: { n: 1 } });
    expect(await approvals.getApproval(key)).toMatchObject({ status: 'approved', by: 'test:c1' });
  });
});

describe('observe: a model client whose request methods are watched', () => {
  test('the turn read before the request, the calls linked after; a stream before the event passes on', async () => {
    const { turns } = setup();
    const model = {
      name: 'm',
      async get(request: { text: string }) {
        return { calls: [`${request.text}-call`] };
      },
      async *stream(request: { text: string }) {
        yield { type: 'delta' };
        yield { type: 'done', calls: [`${request.text}-streamed`] };
      },
      label() {
        return this.name;
      },
    };
    const calls = (ids: string[]) =>
      Promise.resolve(ids.map((id) => ({ id, toolName: 'refund', args: '{}', asks: false })));
    const turnOf = (request: { text: string }) => ({ transcript: said(request.text), answers: [] });
    const observed = turns.observe(model, {
      get: { turnOf, callsOf: (response: { calls: string[] }) => calls(response.calls) },
      stream: {
        stream: true,
        turnOf,
        callsOf: (event: { type: string; calls?: string[] }) =>
          event.calls === undefined ? undefined : calls(event.calls),
      },
    });
    expect(await observed.get({ text: 'a' })).toEqual({ calls: ['a-call'] });
    const words = await turns.anchor(turnOf({ text: 'a' }));
    expect(await turns.links.find(['a-call'])).toEqual(words);
    const events = [];
    for await (const event of observed.stream({ text: 'b' })) {
      if (event.type === 'done') {
        expect(await turns.links.find(['b-streamed'])).toEqual(
          await turns.anchor(turnOf({ text: 'b' })),
        );
      }
      events.push(event.type);
    }
    expect(events).toEqual(['delta', 'done']);
    expect(observed.label()).toBe('m');
  });
});

describe('copyTool', () => {
  test('same prototype, every own property, the replaced ones replaced', () => {
    class Tool {
      name = 'refund';
      describe() {
        return this.name;
      }
    }
    const tool = new Tool();
    Object.defineProperty(tool, 'hidden', { value: 1, enumerable: false });
    const copy = copyTool(tool, { name: 'copy' });
    expect(copy).toBeInstanceOf(Tool);
    expect(copy.describe()).toBe('copy');
    expect((copy as unknown as { hidden: number }).hidden).toBe(1);
    expect(tool.name).toBe('refund');
  });
});
