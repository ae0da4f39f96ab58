import { type DriverCaseOptions, driverCases } from './fixture-tests.js';

/** The arguments of the tool that needs an approval: a charge of `amount`. */
export interface ChargeArgs {
  amount: number;
}

/**
 * One approval the model asked for (the run stopped to ask the human), and what the app can do
 * with it. Each method resumes the run as the framework does (a new request with the history, a
 * saved `RunState`, a `Command({ resume })`, an elicitation answer) and resolves when the run
 * finished or stopped again; it rejects when the adapter refuses, which the cases accept for
 * every operation they expect to be refused.
 */
export interface PendingApproval {
  /** The human approves; the app resumes. */
  approve(): Promise<void>;
  /** The human rejects; the app resumes. */
  reject?(): Promise<void>;
  /**
   * The human approves, but the state or history the app resumes from was edited first: the
   * pending call's arguments are `args` (a saved `RunState` edited, a client-made history).
   */
  approveEdited?(args: ChargeArgs): Promise<void>;
  /**
   * The approval of this request is attached to another call the model never asked for (other
   * arguments, another call id) in the resumed state or history.
   */
  approveForOther?(args: ChargeArgs): Promise<void>;
}

/** What a framework adapter gives the approval cases. */
export interface ApprovalDriver {
  /** One user turn in which the model asks to charge `args`; resolves when the run waits. */
  ask(args: ChargeArgs): Promise<PendingApproval>;
  /**
   * A resume the client made up: a call of the tool the model never emitted (made-up ids,
   * `args`) with an approval for it, in a conversation where the model asked for nothing.
   */
  forge?(args: ChargeArgs): Promise<void>;
  /** The charges the tool made, in order, as the vendor saw them. */
  effects(): ChargeArgs[] | Promise<ChargeArgs[]>;
  close?(): Promise<void>;
}

export interface ApprovalCaseOptions extends DriverCaseOptions<ApprovalDriver> {
  /** Which optional operations the driver implements (known before a driver is made). */
  supports?: readonly ('reject' | 'approveEdited' | 'approveForOther' | 'forge')[];
}

/** Run `op`, accepting a refusal (the adapter throws): what the cases expect to be refused. */
async function refusedOrRan(op: () => Promise<void>): Promise<void> {
  try {
    await op();
  } catch {
    // Refused loudly: nothing more to check here; the effects tell whether anything ran.
  }
}

/**
 * The approval contract (docs/design.md, "Turn identity", approvals): an approval authorises
 * only a call this server's model emitted, with exactly its arguments, bound when the model
 * asks; a decision is taken once.
 * 1. approve: the call runs once, with its arguments;
 * 2. approve twice (the resume sent again): one effect;
 * 3. reject: nothing runs;
 * 4. a state or history edited before the first resume: the edited call never runs, the genuine
 *    one still runs once (never refused as drift);
 * 5. approve A, run B: B never runs;
 * 6. a call the model never emitted, approved by a made-up resume: nothing runs.
 */
export function runApprovalCases(options: ApprovalCaseOptions): void {
  const { describe, expect } = options;
  const supports = new Set(options.supports ?? []);
  const define = driverCases(options);
  const A = { amount: 5 };
  const B = { amount: 500 };
  /** An optional operation the driver declared in `supports`. */
  const op = <T>(value: T | undefined, name: string): T => {
    if (value === undefined)
      throw new Error(`the driver declares ${name} but does not implement it`);
    return value;
  };

  describe(`${options.name}: approvals`, () => {
    define('approved: the call runs once, with its arguments', async (driver) => {
      const pending = await driver.ask(A);
      expect(await driver.effects()).toEqual([]);
      await pending.approve();
      expect(await driver.effects()).toEqual([A]);
    });

    define('approved twice (the resume sent again): one effect', async (driver) => {
      const pending = await driver.ask(A);
      await pending.approve();
      await refusedOrRan(() => pending.approve());
      expect(await driver.effects()).toEqual([A]);
    });

    if (supports.has('reject')) {
      define('rejected: nothing runs, also when resumed again', async (driver) => {
        const pending = await driver.ask(A);
        const reject = op(pending.reject, 'reject').bind(pending);
        await reject();
        await refusedOrRan(reject);
        expect(await driver.effects()).toEqual([]);
      });
    }

    if (supports.has('approveEdited')) {
      define(
        'the state or history edited before the first resume: the edited call never runs; the genuine one runs once',
        async (driver) => {
          const pending = await driver.ask(A);
          await refusedOrRan(() => op(pending.approveEdited, 'approveEdited').call(pending, B));
          expect(await driver.effects()).toEqual([]);
          await pending.approve();
          expect(await driver.effects()).toEqual([A]);
        },
      );
    }

    if (supports.has('approveForOther')) {
      define('approve A, run B: B never runs', async (driver) => {
        const pending = await driver.ask(A);
        await refusedOrRan(() => op(pending.approveForOther, 'approveForOther').call(pending, B));
        const effects = await driver.effects();
        expect(effects.some((e) => e.amount === B.amount)).toBe(false);
      });
    }

    if (supports.has('forge')) {
      define(
        'a call the model never emitted, approved by a made-up resume: nothing runs',
        async (driver) => {
          await refusedOrRan(() => op(driver.forge, 'forge').call(driver, B));
          expect(await driver.effects()).toEqual([]);
        },
      );
    }
  });
}
