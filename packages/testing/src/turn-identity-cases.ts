import { ConfigurationError } from '@idempotent-tools/core';
import type { ExpectLike } from './store-conformance.js';

/**
 * One conversation of an app, driven through the framework's real loop. The scripted model calls
 * the adapter's mutating tool once per user turn (arguments taken from the user's words), then
 * answers.
 */
export interface TurnIdentityConversation {
  /**
   * One user turn: the user says `text`; the app's system prompt is `system`. Resolves when the
   * turn is answered; the answer joins the conversation's history.
   */
  say(text: string, options?: { system?: string }): Promise<void>;
  /**
   * The last turn sent again as the app re-sends a request whose reply it never got: the same
   * history and user message (without the answer of the first attempt), the system prompt
   * rebuilt as `system` (a timestamp, retrieved context, a user profile changed).
   */
  resend(options?: { system?: string }): Promise<void>;
  /**
   * One user turn whose reply is lost after the tool ran (the connection drops, the stream
   * breaks); the app, or the client's own retry, sends the same request again. Resolves after
   * the retry was answered.
   */
  sayLosingReply(text: string, options?: { system?: string }): Promise<void>;
}

/** What a framework adapter gives the identity cases. */
export interface TurnIdentityDriver {
  /**
   * A conversation with the identity a real app passes (a chat id, a thread id, a session),
   * or, with `undefined`, none at all. May throw (the adapter refuses when wrapping).
   */
  conversation(id: string | undefined): TurnIdentityConversation;
  /** How many times the tool's side effect ran, as the "vendor" counts it. */
  effects(): number | Promise<number>;
  /** Release servers and stores. */
  close?(): Promise<void>;
}

export interface TurnIdentityCaseOptions {
  /** Label of the outer `describe`, e.g. `'ai-sdk: streamText over @ai-sdk/openai'`. */
  name: string;
  describe: (name: string, fn: () => void) => void;
  test: (name: string, fn: () => Promise<void>, timeoutMs?: number) => void;
  expect: ExpectLike;
  /** A fresh driver (fresh store, fresh effect count) for one case. */
  createDriver: () => TurnIdentityDriver | Promise<TurnIdentityDriver>;
  /**
   * Tells the developer-facing refusal (no conversation identity) as the framework surfaces it.
   * @default ConfigurationError.isInstance
   */
  isDeveloperError?: (error: unknown) => boolean;
  /** Timeout of one case, in ms. @default 60000 */
  timeoutMs?: number;
}

const PROMPT = 'Cancel my subscription.';
const CONFIRM = 'Yes, send it.';

/**
 * The turn identity contract (docs/design.md, "Turn identity"), as five cases every adapter runs
 * through its framework's real loop:
 * 1. two conversations with the same prompt: two effects;
 * 2. two turns with the same text in one conversation: two effects;
 * 3. a retry with a rebuilt system prompt: one effect;
 * 4. a lost reply or broken stream, retried: one effect;
 * 5. no conversation identity: a developer-facing error before anything runs.
 */
export function runTurnIdentityCases(options: TurnIdentityCaseOptions): void {
  const { describe, test, expect } = options;
  const isDeveloperError = options.isDeveloperError ?? ConfigurationError.isInstance;
  const timeout = options.timeoutMs ?? 60_000;

  const define = (name: string, body: (driver: TurnIdentityDriver) => Promise<void>) =>
    test(
      name,
      async () => {
        const driver = await options.createDriver();
        try {
          await body(driver);
        } finally {
          await driver.close?.();
        }
      },
      timeout,
    );

  describe(`${options.name}: turn identity`, () => {
    define('two conversations with the same prompt: two effects', async (driver) => {
      await driver.conversation('conversation-a').say(PROMPT);
      await driver.conversation('conversation-b').say(PROMPT);
      expect(await driver.effects()).toBe(2);
    });

    define('two turns with the same text in one conversation: two effects', async (driver) => {
      const chat = driver.conversation('conversation-a');
      await chat.say(CONFIRM);
      await chat.say(CONFIRM);
      expect(await driver.effects()).toBe(2);
    });

    define('a retry with a rebuilt system prompt: one effect', async (driver) => {
      const chat = driver.conversation('conversation-a');
      await chat.say(PROMPT, { system: 'You are a helpful agent. It is 09:00:00.' });
      await chat.resend({ system: 'You are a helpful agent. It is 09:00:07. Plan: gold.' });
      expect(await driver.effects()).toBe(1);
    });

    define('a lost reply or broken stream, retried: one effect', async (driver) => {
      await driver.conversation('conversation-a').sayLosingReply(PROMPT);
      expect(await driver.effects()).toBe(1);
    });

    define(
      'no conversation identity: a developer-facing error before anything runs',
      async (driver) => {
        let error: unknown;
        try {
          await driver.conversation(undefined).say(PROMPT);
        } catch (e) {
          error = e;
        }
        expect(error === undefined ? 'no error' : isDeveloperError(error)).toBe(true);
        expect(await driver.effects()).toBe(0);
      },
    );
  });
}
