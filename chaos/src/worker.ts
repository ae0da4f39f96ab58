/**
 * A worker process of the checker: opens the store (through its slot's proxy), runs the calls
 * the harness sends it (several at once, every configuration), reports each outcome, and may be
 * SIGKILLed, SIGSTOPped, asked to freeze itself at a point of the tool, or have its clock stepped
 * (clock-preload.ts) at any time. `drain`: finish the calls in flight, close the store, exit.
 *
 * Started by the harness with `CHAOS_WORKER` (JSON: WorkerSettings) and an IPC channel, under
 * `--import clock-preload.ts` and, in a mutation run, `--import core-hook-register.ts`.
 */
import { createApprovals, createIdempotency, withLocalCache } from '@idempotent-tools/core';
import { idempotentHandler } from '@idempotent-tools/core/http';
import { createRandom } from './random.ts';
import { openStore } from './stores.ts';
import { createTools, realNow } from './tools.ts';
import type { CallReport, FromWorker, ToWorker, WorkerSettings } from './types.ts';

const settings = JSON.parse(process.env.CHAOS_WORKER ?? '{}') as WorkerSettings;
const worker = `w${settings.slot}.${settings.incarnation}`;
const send = (message: FromWorker, then?: () => void) =>
  process.send?.(message, undefined, {}, () => then?.());

process.on('disconnect', () => process.exit(0));
process.on('unhandledRejection', (error) => {
  console.error(`${worker}: unhandled rejection`, error);
  process.exit(70);
});

const { store, close } = await openStore(settings.store);
const options = { lease: settings.lease, waitTimeout: settings.waitTimeout, ttl: settings.ttl };
const idempotency = createIdempotency({ store, ...options });
const cached = createIdempotency({ store: withLocalCache(store), ...options });
const tools = createTools({
  idempotency,
  cached,
  approvals: createApprovals(idempotency, { ttl: settings.ttl }),
  wrapHandler: (handler) =>
    idempotentHandler(handler, { idempotency, scope: () => 'chaos', name: 'chaos.httpHandler' }),
  settings,
  worker,
  journalPath: settings.journal,
  random: createRandom(settings.seed),
  // Stop this process right here: the harness sees the message, sends the successor, and
  // SIGCONTs it later. Execution goes on after `process.kill` returns, i.e. once continued.
  freeze: (callId, key, phase) =>
    new Promise<void>((resolve) => {
      const at = realNow();
      tools.journal({ key, ev: 'frozen', callId, detail: phase });
      send({ type: 'frozen', id: callId, key, phase, at }, () => {
        process.kill(process.pid, 'SIGSTOP');
        tools.journal({ key, ev: 'thawed', callId, detail: phase });
        resolve();
      });
    }),
});

let inFlight = 0;
let draining = false;
async function finishIfDrained(): Promise<void> {
  if (!draining || inFlight > 0) return;
  await Promise.race([close(), new Promise((resolve) => setTimeout(resolve, 2_000))]).catch(
    () => {},
  );
  process.exit(0);
}

const report = (r: CallReport & { error?: unknown }): CallReport => {
  const { error: _error, ...rest } = r;
  return rest;
};

process.on('message', (message: ToWorker) => {
  if (message.type === 'clock') return; // clock-preload.ts
  if (message.type === 'drain') {
    draining = true;
    void finishIfDrained();
    return;
  }
  inFlight++;
  void (async () => {
    const callOptions = {
      callId: message.id,
      ...(message.freeze === undefined ? {} : { freeze: message.freeze }),
      ...(message.decision === undefined ? {} : { decision: message.decision }),
    };
    const first = report(await tools.call(message.key, message.config, callOptions));
    let again: CallReport | undefined;
    // The first reply was "lost": the caller sends the same call again after the tool ran.
    if (message.lostReply && first.ok) {
      again = report(
        await tools.call(message.key, message.config, {
          callId: message.id,
          ...(message.decision === undefined ? {} : { decision: message.decision }),
        }),
      );
    }
    send({
      type: 'done',
      id: message.id,
      key: message.key,
      first,
      ...(again === undefined ? {} : { again }),
      at: realNow(),
    });
    inFlight--;
    await finishIfDrained();
  })();
});

send({ type: 'ready', pid: process.pid });
