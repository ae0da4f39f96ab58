import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { approvalStory } from './approval-story.js';

test('refunds with an approval: each runs once, an approval never authorises another amount', async () => {
  const result = await approvalStory({ dataDir: mkdtempSync(join(tmpdir(), 'vendor-refunds-')) });
  // PayCo's own counts, per order: one refund each, none twice.
  expect(result.scenarios.map((s) => s.refunds)).toEqual([1, 1, 1, 1]);
  expect(result).toMatchObject({ refunds: 4, duplicates: 0, missing: 0 });
  const [small, twice, killed, drift] = result.scenarios;
  const of = (s: typeof small) =>
    s?.agents.map((a) => ({
      signal: a.signal,
      asked: a.asked !== undefined,
      decided: a.decided,
      events: a.events,
    }));

  // Under the threshold: no approval asked, it runs at once.
  expect(of(small)).toEqual([
    { signal: null, asked: false, decided: undefined, events: ['refund executed'] },
  ]);

  // The agent asks and waits; the approval sent twice at once is one decision; it runs once.
  expect(of(twice)).toEqual([
    { signal: null, asked: true, decided: 'approved', events: ['refund executed'] },
  ]);
  expect(twice?.approvals).toHaveLength(2);
  expect(new Set(twice?.approvals.map((a) => `${a.status} ${a.by} ${a.decidedAt}`)).size).toBe(1);
  expect(twice?.approvals[0]?.key).toBe(twice?.agents[0]?.asked);

  // Killed between the approval and the run: the next process finds it approved and runs it; a
  // late resend of the approval changes nothing; the process after that gets the replay.
  expect(of(killed)).toEqual([
    { signal: 'SIGKILL', asked: true, decided: 'approved', events: [] },
    { signal: null, asked: false, decided: undefined, events: ['refund executed'] },
    { signal: null, asked: false, decided: undefined, events: ['refund replayed'] },
  ]);
  const [firstDecision, , lateResend] = killed?.approvals ?? [];
  expect(lateResend?.decidedAt).toBe(firstDecision?.decidedAt);
  const replay = killed?.agents[2]?.reply as { replayed?: boolean; refundedAt?: string };
  const ran = killed?.agents[1]?.reply as { refund?: string } | undefined;
  expect(replay).toMatchObject({ replayed: true, refund: ran?.refund });
  expect(typeof replay.refundedAt).toBe('string'); // added by onReplay

  // Approved for 60.00 while no agent ran; the resumed call for 65.00 with that approval is
  // refused (nothing ran); the approved call then runs once.
  expect(of(drift)).toEqual([
    { signal: 'SIGKILL', asked: true, decided: undefined, events: [] },
    { signal: null, asked: false, decided: undefined, events: [] },
    { signal: null, asked: false, decided: undefined, events: ['refund executed'] },
  ]);
  expect(drift?.agents[1]?.reply).toMatchObject({ error: 'drift', next: 'change-arguments' });
  expect(drift?.agents[2]?.reply).toMatchObject({ amount: 6000 });
});
