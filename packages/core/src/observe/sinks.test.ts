import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import type { IdempotencyEvent } from './events.js';
import { createLoggerSink, DEFAULT_LOG_LEVELS } from './logger-sink.js';
import { combineSinks } from './sinks.js';

/** A real pino logger writing JSON lines into an array. */
function memoryPino(level = 'trace') {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

const ARGS = { card: '4242 4242 4242 4242', amount: 12 };
const SECRET_RESULT = { chargeId: 'ch_1', clientSecret: 'pi_secret_abc' };

function event(overrides: Partial<IdempotencyEvent> = {}): IdempotencyEvent {
  return {
    key: 'v1_k',
    toolName: 'charge_card',
    scope: undefined,
    turnId: 't1',
    outcome: 'executed',
    store: 'memory',
    startedAt: 1_000,
    endedAt: 1_004,
    durationMs: 4,
    argsFingerprint: 'fp',
    argsBytes: 10,
    ...overrides,
  };
}

describe('createLoggerSink (real pino)', () => {
  test('one line per call, redacted: fingerprint and sizes, no raw args or result', async () => {
    const { logger, lines } = memoryPino();
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: createLoggerSink(logger),
      exposeArgs: true, // even then, the default redaction keeps them out
    });
    const call = { toolName: 'charge_card', turnId: 'turn-1', scope: 'acme', args: ARGS };
    await idempotency.run(call, async () => SECRET_RESULT);
    await idempotency.run(call, async () => SECRET_RESULT);

    expect(lines).toHaveLength(2);
    const { key, fingerprint } = idempotency.keyOf(call);
    expect(lines[0]).toMatchObject({
      level: 30,
      msg: 'charge_card executed',
      idempotency: {
        key,
        toolName: 'charge_card',
        scope: 'acme',
        turnId: 'turn-1',
        outcome: 'executed',
        replayed: false,
        store: 'memory',
        argsFingerprint: fingerprint,
        argsBytes: expect.any(Number),
        resultBytes: Buffer.byteLength(JSON.stringify({ v: SECRET_RESULT })),
        durationMs: expect.any(Number),
      },
    });
    expect(lines[1]).toMatchObject({
      level: 30,
      msg: 'charge_card replayed',
      idempotency: { outcome: 'replayed', replayed: true },
    });
    const text = JSON.stringify(lines);
    expect(text).not.toContain('4242');
    expect(text).not.toContain('pi_secret');
  });

  test('redact: false logs the raw args the executor exposes (unsafe, debugging)', async () => {
    const { logger, lines } = memoryPino();
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: createLoggerSink(logger, { redact: false }),
      exposeArgs: true,
    });
    await idempotency.run({ toolName: 'charge_card', turnId: 't', args: ARGS }, async () => 1);
    expect(lines[0]).toMatchObject({ idempotency: { args: ARGS } });
  });

  test('levels follow the outcome; they can be changed, and silent drops', () => {
    const { logger, lines } = memoryPino();
    const sink = createLoggerSink(logger, { levels: { replayed: 'debug', waited: 'silent' } });
    sink(event({ outcome: 'executed' }));
    sink(event({ outcome: 'replayed' }));
    sink(event({ outcome: 'waited' }));
    sink(event({ outcome: 'drift', errorCode: 'drift' }));
    sink(event({ outcome: 'outcome-unknown', errorCode: 'outcome_unknown' }));
    expect(lines.map((l) => [l.level, (l.idempotency as { outcome: string }).outcome])).toEqual([
      [30, 'executed'],
      [20, 'replayed'],
      [40, 'drift'],
      [50, 'outcome-unknown'],
    ]);
    expect(lines[3]).toMatchObject({ idempotency: { errorCode: 'outcome_unknown' } });
    expect(DEFAULT_LOG_LEVELS['store-unavailable']).toBe('error');
  });

  test('a pino level above the event level filters it out', () => {
    const { logger, lines } = memoryPino('warn');
    const sink = createLoggerSink(logger);
    sink(event({ outcome: 'executed' }));
    sink(event({ outcome: 'persist-failed', errorCode: 'persist_failed' }));
    expect(lines.map((l) => l.level)).toEqual([50]);
  });

  test('field: false logs at the top level; a custom message; child loggers work', () => {
    const { logger, lines } = memoryPino();
    const sink = createLoggerSink(logger.child({ service: 'agent' }), {
      field: false,
      message: (e) => `tool ${e.toolName}: ${e.outcome}`,
    });
    sink(event({ waitedMs: 7 }));
    expect(lines[0]).toMatchObject({
      service: 'agent',
      msg: 'tool charge_card: executed',
      key: 'v1_k',
      outcome: 'executed',
      waitedMs: 7,
    });
    expect(lines[0]).not.toHaveProperty('scope');
  });

  test('a minimal logger (info, warn, error) gets trace/debug on info and fatal on error', () => {
    const calls: string[] = [];
    const log = (level: string) => (_o: object, msg?: string) => void calls.push(`${level}:${msg}`);
    const sink = createLoggerSink(
      { info: log('info'), warn: log('warn'), error: log('error') },
      { levels: { executed: 'debug', failed: 'fatal' } },
    );
    sink(event());
    sink(event({ outcome: 'failed', errorCode: 'tool_error' }));
    expect(calls).toEqual(['info:charge_card executed', 'error:charge_card failed']);
  });

  test('rejects something that is not a logger', () => {
    expect(() => createLoggerSink({} as never)).toThrow(/pino-compatible/);
  });
});

describe('combineSinks', () => {
  test('every sink gets every event in order; a throwing sink does not stop the others', () => {
    const seen: string[] = [];
    const sink = combineSinks(
      (e) => seen.push(`a:${e.outcome}`),
      () => {
        throw new Error('broken sink');
      },
      undefined,
      false,
      { onEvent: (e) => seen.push(`b:${e.outcome}`) },
    );
    sink(event());
    sink(event({ outcome: 'replayed' }));
    expect(seen).toEqual(['a:executed', 'b:executed', 'a:replayed', 'b:replayed']);
  });

  test('rejects what is not a sink', () => {
    expect(() => combineSinks({} as never)).toThrow(/combineSinks takes/);
  });
});
