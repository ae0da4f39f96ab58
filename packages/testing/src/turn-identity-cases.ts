import { ConfigurationError } from '@idempotent-tools/core';
import { type DriverCaseOptions, driverCases } from './fixture-tests.js';

/** How one user message is sent: the words, in one of the shapes the framework takes. */
export interface SayOptions {
  /** The app's system prompt for this attempt (rebuilt on every attempt by many apps). */
  system?: string;
  /**
   * The shape of the user's message: one of the driver's `shapes` (e.g. `'string'`, `'parts'`,
   * `'items'`). @default the driver's first shape
   */
  shape?: string;
  /**
   * The user message carries provider options / a cache breakpoint (AI SDK `providerOptions`,
   * Anthropic `cache_control`), as apps that cache the conversation add them. Needs the
   * driver's `providerOptions`.
   */
  providerOptions?: boolean;
}

/**
 * One conversation of an app, driven through the framework's real loop. The scripted model calls
 * the adapter's mutating tool once per user turn (arguments taken from the user's words), then
 * answers.
 */
export interface TurnIdentityConversation {
  /**
   * One user turn: the user says `text`. Resolves when the turn is answered; the answer joins
   * the conversation's history.
   */
  say(text: string, options?: SayOptions): Promise<void>;
  /**
   * The last turn sent again as the app re-sends a request whose reply it never got: the same
   * history and user message (without the answer of the first attempt), rebuilt as `options`
   * say (a new system prompt, the message in another shape, provider options added).
   */
  resend(options?: SayOptions): Promise<void>;
  /**
   * One user turn whose reply is lost after the tool ran (the connection drops, the stream
   * breaks); the app, or the client's own retry, sends the same request again. Resolves after
   * the retry was answered.
   */
  sayLosingReply(text: string, options?: SayOptions): Promise<void>;
  /**
   * One user turn in which the model calls the tool, then repeats the same call in the next step
   * of the same request (the common glitch). With `cacheEachStep` the app moves a cache
   * breakpoint onto the last message before every step (the AI SDK's `prepareStep` pattern).
   */
  sayRepeatingCall?(text: string, options?: { cacheEachStep?: boolean }): Promise<void>;
  /**
   * One user turn that ends with the tool's result, with no text from the model after it (the
   * AI SDK's single step, a LangChain `returnDirect` tool, the Agents SDK's
   * `stop_on_first_tool`, an app loop that stops after the tool): the history keeps the call and
   * its result as the framework returns them.
   */
  sayAnsweredByTool?(text: string): Promise<void>;
  /** One user turn whose run returns nothing (`undefined`: a LangGraph entrypoint, say). */
  sayReturningNothing?(text: string): Promise<void>;
}

/** What a framework adapter gives the identity cases. */
export interface TurnIdentityDriver {
  /**
   * A conversation with the identity a real app passes (a chat id, a thread id, a session),
   * or, with `undefined`, none at all. May throw (the adapter refuses when wrapping). With
   * `wrapTwice`, the app made its tools idempotent twice (needs the driver's `wrapTwice`).
   */
  conversation(
    id: string | undefined,
    options?: { wrapTwice?: boolean },
  ): TurnIdentityConversation | Promise<TurnIdentityConversation>;
  /** How many times the tool's side effect ran, as the "vendor" counts it. */
  effects(): number | Promise<number>;
  /** The shapes a user message can take in this framework, the default first. @default ['string'] */
  shapes?: readonly string[];
  /** Whether `SayOptions.providerOptions` is supported. @default false */
  providerOptions?: boolean;
  /** Whether `conversation(id, { wrapTwice: true })` is supported. @default false */
  wrapTwice?: boolean;
  /** Release servers and stores. */
  close?(): Promise<void>;
}

export interface TurnIdentityCaseOptions extends DriverCaseOptions<TurnIdentityDriver> {
  /**
   * What the driver supports, known before a driver is made (the cases are defined then):
   * the same fields as on the driver. @default nothing beyond the five core cases
   */
  supports?: Pick<TurnIdentityDriver, 'shapes' | 'providerOptions' | 'wrapTwice'> & {
    /** Which optional conversation methods the driver implements. */
    methods?: readonly ('sayRepeatingCall' | 'sayAnsweredByTool' | 'sayReturningNothing')[];
  };
  /**
   * Tells the developer-facing refusal (no conversation identity) as the framework surfaces it.
   * @default ConfigurationError.isInstance
   */
  isDeveloperError?: (error: unknown) => boolean;
}

const PROMPT = 'Cancel my subscription.';
const CONFIRM = 'Yes, send it.';

/** The error a promise rejects with, or undefined when it resolves. */
async function errorOf(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
    return undefined;
  } catch (error) {
    return error ?? new Error('rejected with nothing');
  }
}

/**
 * The turn identity contract (docs/design.md, "Turn identity"), as cases every adapter runs
 * through its framework's real loop:
 * 1. two conversations with the same prompt: two effects;
 * 2. two turns with the same text in one conversation: two effects;
 * 3. a retry with a rebuilt system prompt: one effect;
 * 4. a lost reply or broken stream, retried: one effect;
 * 5. no conversation identity: a developer-facing error before anything runs;
 * and, where the framework has them (`supports`):
 * 6. the same words retried in another shape (string, parts, provider items): one effect;
 * 7. provider options / a cache breakpoint added on the retry: one effect;
 * 8. the model repeating its call in the next step, the cache breakpoint moved: one effect;
 * 9. a turn answered only by the tool's result, then the same words: two effects;
 * 10. a run that returned nothing, then the same words: two effects, or a developer error;
 * 11. tools made idempotent twice: a developer error, nothing ran (never a wait for itself).
 */
export function runTurnIdentityCases(options: TurnIdentityCaseOptions): void {
  const { describe, expect } = options;
  const isDeveloperError = options.isDeveloperError ?? ConfigurationError.isInstance;
  const supports = options.supports ?? {};
  const methods = new Set(supports.methods ?? []);
  const shapes = supports.shapes ?? ['string'];

  const define = driverCases(options);
  /** A conversation method the driver declared in `supports.methods`. */
  const method = <K extends 'sayRepeatingCall' | 'sayAnsweredByTool' | 'sayReturningNothing'>(
    chat: TurnIdentityConversation,
    name: K,
  ): NonNullable<TurnIdentityConversation[K]> => {
    const fn = chat[name];
    if (fn === undefined) throw new Error(`the driver declares ${name} but does not implement it`);
    return fn.bind(chat) as NonNullable<TurnIdentityConversation[K]>;
  };

  describe(`${options.name}: turn identity`, () => {
    define('two conversations with the same prompt: two effects', async (driver) => {
      await (await driver.conversation('conversation-a')).say(PROMPT);
      await (await driver.conversation('conversation-b')).say(PROMPT);
      expect(await driver.effects()).toBe(2);
    });

    define('two turns with the same text in one conversation: two effects', async (driver) => {
      const chat = await driver.conversation('conversation-a');
      await chat.say(CONFIRM);
      await chat.say(CONFIRM);
      expect(await driver.effects()).toBe(2);
    });

    define('a retry with a rebuilt system prompt: one effect', async (driver) => {
      const chat = await driver.conversation('conversation-a');
      await chat.say(PROMPT, { system: 'You are a helpful agent. It is 09:00:00.' });
      await chat.resend({ system: 'You are a helpful agent. It is 09:00:07. Plan: gold.' });
      expect(await driver.effects()).toBe(1);
    });

    define('a lost reply or broken stream, retried: one effect', async (driver) => {
      await (await driver.conversation('conversation-a')).sayLosingReply(PROMPT);
      expect(await driver.effects()).toBe(1);
    });

    define(
      'no conversation identity: a developer-facing error before anything runs',
      async (driver) => {
        const error = await errorOf(async () => (await driver.conversation(undefined)).say(PROMPT));
        expect(error === undefined ? 'no error' : isDeveloperError(error)).toBe(true);
        expect(await driver.effects()).toBe(0);
      },
    );

    for (const first of shapes) {
      for (const again of shapes) {
        if (again === first) continue;
        define(
          `the same words sent as ${first} and retried as ${again}: one effect`,
          async (driver) => {
            const chat = await driver.conversation('conversation-a');
            await chat.say(PROMPT, { shape: first });
            await chat.resend({ shape: again });
            expect(await driver.effects()).toBe(1);
          },
        );
      }
      if (shapes.length > 1) {
        define(`two turns with the same words as ${first}: two effects`, async (driver) => {
          const chat = await driver.conversation('conversation-a');
          await chat.say(CONFIRM, { shape: first });
          await chat.say(CONFIRM, { shape: first });
          expect(await driver.effects()).toBe(2);
        });
      }
    }

    if (supports.providerOptions === true) {
      define(
        'provider options / a cache breakpoint added on the retry: one effect',
        async (driver) => {
          const chat = await driver.conversation('conversation-a');
          await chat.say(PROMPT);
          await chat.resend({ providerOptions: true });
          expect(await driver.effects()).toBe(1);
        },
      );
      define(
        'provider options / a cache breakpoint taken off on the retry: one effect',
        async (driver) => {
          const chat = await driver.conversation('conversation-a');
          await chat.say(PROMPT, { providerOptions: true });
          await chat.resend();
          expect(await driver.effects()).toBe(1);
        },
      );
    }

    if (methods.has('sayRepeatingCall')) {
      define('the model repeats its call in the next step: one effect', async (driver) => {
        const chat = await driver.conversation('conversation-a');
        await method(chat, 'sayRepeatingCall')(PROMPT);
        expect(await driver.effects()).toBe(1);
      });
      if (supports.providerOptions === true) {
        define(
          'the model repeats its call in the next step, the cache breakpoint moved onto the last message: one effect',
          async (driver) => {
            const chat = await driver.conversation('conversation-a');
            await method(chat, 'sayRepeatingCall')(PROMPT, { cacheEachStep: true });
            expect(await driver.effects()).toBe(1);
          },
        );
      }
    }

    if (methods.has('sayAnsweredByTool')) {
      define(
        'a turn answered only by the tool result, then the same words: two effects',
        async (driver) => {
          const chat = await driver.conversation('conversation-a');
          const answeredByTool = method(chat, 'sayAnsweredByTool');
          await answeredByTool(CONFIRM);
          await answeredByTool(CONFIRM);
          expect(await driver.effects()).toBe(2);
        },
      );
      define(
        'a turn answered only by the tool result, then the same words answered in text: two effects',
        async (driver) => {
          const chat = await driver.conversation('conversation-a');
          await method(chat, 'sayAnsweredByTool')(CONFIRM);
          await chat.say(CONFIRM);
          expect(await driver.effects()).toBe(2);
        },
      );
    }

    if (methods.has('sayReturningNothing')) {
      define(
        'a run that returned nothing, then the same words: two effects, or a developer error',
        async (driver) => {
          const chat = await driver.conversation('conversation-a');
          await method(chat, 'sayReturningNothing')(CONFIRM);
          const error = await errorOf(() => method(chat, 'sayReturningNothing')(CONFIRM));
          const effects = await driver.effects();
          if (error === undefined) expect(effects).toBe(2);
          else {
            expect(isDeveloperError(error)).toBe(true);
            expect(effects).toBe(1);
          }
        },
      );
    }

    if (supports.wrapTwice === true) {
      define(
        'tools made idempotent twice: a developer error, nothing ran, on every retry',
        async (driver) => {
          for (let attempt = 0; attempt < 2; attempt++) {
            const error = await errorOf(async () =>
              (await driver.conversation('conversation-a', { wrapTwice: true })).say(PROMPT),
            );
            expect(error === undefined ? 'no error' : isDeveloperError(error)).toBe(true);
          }
          expect(await driver.effects()).toBe(0);
        },
      );
    }
  });
}
