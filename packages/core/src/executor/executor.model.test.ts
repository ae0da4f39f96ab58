import { randomUUID } from 'node:crypto';
/**
 * The executor against a small reference model of the state machine (design section 4 (docs/design.md)), with
 * fast-check generating sequences of calls, crashes and clock jumps.
 */
import fc from 'fast-check';
import { expect, test } from 'vitest';
import { DriftError, OutcomeUnknownError, ReplayedFailureError } from '../errors/index.js';
import { createIdempotency, type Idempotency, type ToolPolicy } from '../executor.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';

const TTL = 1000;

type Behaviour = 'ok' | 'retryable' | 'terminal';
type ModelRecord =
  | { state: 'completed'; value: number; fingerprint: string }
  | { state: 'failed'; fingerprint: string }
  | { state: 'stale'; fingerprint: string };

interface Model {
  records: Map<string, ModelRecord>;
  executions: number;
}

interface Real {
  idempotency: Idempotency;
  store: MemoryStore;
  clock: { now: number };
  executions: number;
}

class TerminalError extends Error {
  readonly terminal = true;
}

const policyFor = (business: boolean): ToolPolicy<{ id: string; v: number }, number> => ({
  isTerminalError: (e) => e instanceof TerminalError,
  ...(business ? { businessKey: (args: { id: string }) => args.id } : {}),
});

/** The model's own notion of identity: full args + turn, or the business id. */
const modelKey = (business: boolean, turn: string, args: { id: string; v: number }) =>
  business ? `biz|${args.id}` : `turn|${turn}|${args.id}|${args.v}`;
const modelFingerprint = (args: { id: string; v: number }) => `${args.id}|${args.v}`;

class RunCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly business: boolean,
    readonly turn: string,
    readonly args: { id: string; v: number },
    readonly behaviour: Behaviour,
  ) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    const key = modelKey(this.business, this.turn, this.args);
    const fp = modelFingerprint(this.args);
    const existing = model.records.get(key);
    const before = real.executions;
    const attempt = real.idempotency.run(
      { toolName: this.business ? 'create' : 'charge', turnId: this.turn, args: this.args },
      async () => {
        real.executions++;
        if (this.behaviour === 'retryable') throw new Error('retryable');
        if (this.behaviour === 'terminal') throw new TerminalError('terminal');
        return real.executions;
      },
      policyFor(this.business),
    );
    const settled = await attempt.then(
      (r) => ({ ok: true as const, r }),
      (e: unknown) => ({ ok: false as const, e }),
    );

    if (existing !== undefined && existing.fingerprint !== fp) {
      expect(!settled.ok && DriftError.isInstance(settled.e)).toBe(true);
      expect(real.executions).toBe(before);
      return;
    }
    if (existing?.state === 'completed') {
      expect(settled).toMatchObject({ ok: true, r: { replayed: true, value: existing.value } });
      expect(real.executions).toBe(before);
      return;
    }
    if (existing?.state === 'failed') {
      expect(!settled.ok && ReplayedFailureError.isInstance(settled.e)).toBe(true);
      expect(real.executions).toBe(before);
      return;
    }
    if (existing?.state === 'stale') {
      expect(!settled.ok && OutcomeUnknownError.isInstance(settled.e)).toBe(true);
      expect(real.executions).toBe(before);
      return;
    }
    // No record: the tool runs exactly once.
    expect(real.executions).toBe(before + 1);
    model.executions++;
    if (this.behaviour === 'ok') {
      expect(settled).toMatchObject({ ok: true, r: { replayed: false, value: real.executions } });
      model.records.set(key, { state: 'completed', value: real.executions, fingerprint: fp });
    } else if (this.behaviour === 'terminal') {
      expect(!settled.ok && settled.e instanceof TerminalError).toBe(true);
      model.records.set(key, { state: 'failed', fingerprint: fp });
    } else {
      expect(!settled.ok && (settled.e as Error).message === 'retryable').toBe(true);
    }
  }
  toString = () =>
    `run(${this.business ? 'business' : this.turn}, ${JSON.stringify(this.args)}, ${this.behaviour})`;
}

/** A process claims the call and dies before finishing: the record goes stale. */
class CrashCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly business: boolean,
    readonly turn: string,
    readonly args: { id: string; v: number },
  ) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    const key = modelKey(this.business, this.turn, this.args);
    const { key: realKey, fingerprint } = real.idempotency.keyOf(
      { toolName: this.business ? 'create' : 'charge', turnId: this.turn, args: this.args },
      policyFor(this.business),
    );
    const claim = await real.store.claim({
      key: realKey,
      fingerprint,
      token: `dead-${randomUUID()}`,
      leaseMs: 1,
      ttlMs: TTL,
    });
    expect(claim.status === 'acquired').toBe(!model.records.has(key));
    if (claim.status === 'acquired') {
      model.records.set(key, { state: 'stale', fingerprint: modelFingerprint(this.args) });
    }
    real.clock.now += 2; // the dead holder's lease runs out
  }
  toString = () => `crash(${this.business ? 'business' : this.turn}, ${JSON.stringify(this.args)})`;
}

/** Time passes beyond the TTL: every record expires. */
class ExpireCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    real.clock.now += TTL + 1;
    model.records.clear();
  }
  toString = () => 'expire';
}

const argsArb = fc.record({ id: fc.constantFrom('x', 'y'), v: fc.constantFrom(1, 2) });
const commands = fc.commands(
  [
    fc
      .tuple(
        fc.boolean(),
        fc.constantFrom('t1', 't2'),
        argsArb,
        fc.constantFrom<Behaviour>('ok', 'ok', 'retryable', 'terminal'),
      )
      .map(([b, t, a, h]) => new RunCommand(b, t, a, h)),
    fc
      .tuple(fc.boolean(), fc.constantFrom('t1', 't2'), argsArb)
      .map(([b, t, a]) => new CrashCommand(b, t, a)),
    fc.constant(new ExpireCommand()),
  ],
  { maxCommands: 40 },
);

test('the executor agrees with the reference state machine', async () => {
  await fc.assert(
    fc.asyncProperty(commands, async (cmds) => {
      const clock = { now: 1_000_000 };
      const store = createMemoryStore({ now: () => clock.now });
      const real: Real = {
        idempotency: createIdempotency({ store, ttl: TTL }),
        store,
        clock,
        executions: 0,
      };
      const model: Model = { records: new Map(), executions: 0 };
      await fc.asyncModelRun(() => ({ model, real }), cmds);
      expect(real.executions).toBe(model.executions);
    }),
    { numRuns: 200 },
  );
});
