import { ConfigurationError } from '@idempotent-tools/core';
import { type DriverCaseOptions, driverCases } from './fixture-tests.js';

/** What the model reads back from one call of the tool. */
export interface RepeatCallResult {
  /** The output's replay mark (`replayed: true` on a replay). */
  replayed?: boolean | undefined;
  /** The model's error text when the call was refused (bad input): nothing ran. */
  error?: string | undefined;
}

/** What a framework adapter gives the deliberate-repeat cases. */
export interface RepeatDriver {
  /**
   * One call of the repeatable tool (its policy `repeatable: true`) as the model makes it, in
   * one turn, through the framework's real loop: `args` may hold the `repeat` argument.
   */
  call(args: Record<string, unknown>): Promise<RepeatCallResult>;
  /** How many times the tool's effect ran. */
  effects(): number | Promise<number>;
  /** The JSON schema the model is sent for the tool, wrapped with `repeatable` on or off. */
  schema(repeatable: boolean): Promise<unknown> | unknown;
  /** Wrap a repeatable tool whose own schema has a `repeat` property (the adapter refuses). */
  wrapClashing(): unknown;
  close?(): Promise<void>;
}

export type RepeatCaseOptions = DriverCaseOptions<RepeatDriver>;

const propertiesOf = (schema: unknown): Record<string, unknown> =>
  ((schema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {}) as Record<
    string,
    unknown
  >;

/**
 * Deliberate repeats (docs/design.md, "Deliberate repeats"), as every adapter that supports them
 * runs them through its framework's real loop:
 * 1. the same call twice is one effect (the second replayed); `repeat: 2` is a second effect, and
 *    its retry is replayed;
 * 2. off by default: the schema the model sees has no repeat argument; on, it has;
 * 3. an invalid repeat (0, a string): the model is told what to fix, nothing runs;
 * 4. a tool whose own schema has `repeat`: refused when it is wrapped (`ConfigurationError`).
 */
export function runRepeatCases(options: RepeatCaseOptions): void {
  const { describe, expect } = options;
  const define = driverCases(options);

  describe(`${options.name}: deliberate repeats`, () => {
    define(
      'same call twice: one effect, replayed; repeat 2: a second effect; its retry: replayed',
      async (driver) => {
        const args = { to: 'ann@example.com' };
        expect((await driver.call(args)).replayed === true).toBe(false);
        expect((await driver.call(args)).replayed).toBe(true);
        expect(await driver.effects()).toBe(1);
        expect((await driver.call({ ...args, repeat: 2 })).replayed === true).toBe(false);
        expect(await driver.effects()).toBe(2);
        expect((await driver.call({ ...args, repeat: 2 })).replayed).toBe(true);
        expect(await driver.effects()).toBe(2);
      },
    );

    define('off by default: the schema has no repeat argument; on: it has', async (driver) => {
      expect(Object.hasOwn(propertiesOf(await driver.schema(false)), 'repeat')).toBe(false);
      expect(Object.hasOwn(propertiesOf(await driver.schema(true)), 'repeat')).toBe(true);
    });

    define('an invalid repeat: the model is told what to fix, nothing ran', async (driver) => {
      const result = await driver.call({ to: 'ann@example.com', repeat: 0 });
      expect(typeof result.error).toBe('string');
      expect(await driver.effects()).toBe(0);
    });

    define('a tool whose own schema has `repeat` is refused when it is wrapped', async (driver) => {
      let error: unknown;
      try {
        await driver.wrapClashing();
      } catch (e) {
        error = e;
      }
      expect(ConfigurationError.isInstance(error)).toBe(true);
    });
  });
}
