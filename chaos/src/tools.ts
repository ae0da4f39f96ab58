/**
 * The two tools of the soak, as an application would write them. Each one makes one request to
 * its vendor: the effect. The same code runs in every worker and in the checker.
 *
 * - `chaos.plain` calls the vendor without idempotency; a stale call is settled by `reconcile`,
 *   which asks the vendor whether key K happened (else the call is outcome-unknown).
 * - `chaos.dedupe` calls the vendor that honours `Idempotency-Key` through `idempotentFetch`; a
 *   stale call re-executes (`onStale: 'reexecute'`, `vendorDedupes: true`).
 *
 * Right before the request each tool checks that its attempt still owns the call:
 * `ctx.signal`, and `ctx.stillOwned()` where the executor has it; it never calls the vendor when
 * the answer is no. The request then goes through `wire` (past every check, idempotentFetch's
 * own included), where a targeted `after-check` freeze stops the process mid-request.
 */
import { appendFileSync } from 'node:fs';
import {
  type ExecutionContext,
  type Idempotency,
  IdempotencyError,
  idempotentFetch,
  type ToolPolicy,
} from '@idempotent-tools/core';
import type { Random } from './random.ts';
import type { CallReport, FreezePhase, JournalLine, ToolSettings, VendorName } from './types.ts';

export interface ToolArgs {
  key: string;
}
export interface ToolResult {
  id: string;
}

/** The execution context of an executor that has (or will have) `stillOwned`. */
type OwnableContext = ExecutionContext & { stillOwned?: () => boolean };

/** The tool refused to call the vendor: its attempt no longer owns the call. */
export class NotOwnedError extends Error {
  override readonly name = 'NotOwnedError';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Tools {
  /** One logical call of `key` through the executor; never throws. */
  call(
    key: string,
    vendor: VendorName,
    options?: { callId?: number; freeze?: FreezePhase },
  ): Promise<CallReport & { error?: unknown }>;
  journal(line: Omit<JournalLine, 'at' | 'worker' | 'pid'>): void;
}

export function createTools(options: {
  idempotency: Idempotency;
  settings: ToolSettings;
  /** Who sends the requests: `w3.1` (slot 3, incarnation 1) or `checker`. */
  worker: string;
  journalPath: string;
  random: Random;
  /** Freeze this process at a phase (targeted freeze); resolves once it runs again. */
  freeze?: (callId: number, key: string, phase: FreezePhase) => Promise<void>;
}): Tools {
  const { idempotency, settings, worker, journalPath, random } = options;
  const pid = process.pid;
  let attempts = 0;

  const journal: Tools['journal'] = (line) => {
    const full: JournalLine = { at: Date.now(), worker, pid, ...line };
    appendFileSync(journalPath, `${JSON.stringify(full)}\n`);
  };

  const plainPolicy: ToolPolicy<ToolArgs, ToolResult> = {
    // A request that threw may have reached the vendor: keep the attempt, reconcile on retry.
    onToolError: 'keep',
    reconcile: async ({ args }) => {
      const response = await fetch(
        `${settings.vendors.plain}/lookup?key=${encodeURIComponent(args.key)}`,
        { signal: AbortSignal.timeout(settings.fetchTimeoutMs) },
      );
      if (!response.ok) throw new Error(`vendor lookup answered ${response.status}`);
      const body = (await response.json()) as { found: boolean; id?: string };
      journal({ key: args.key, ev: 'reconcile', detail: body.found ? `found ${body.id}` : 'none' });
      return body.found ? { found: true, value: { id: body.id! } } : { found: false };
    },
  };
  const dedupePolicy: ToolPolicy<ToolArgs, ToolResult> = {
    onToolError: 'keep',
    onStale: 'reexecute',
    vendorDedupes: true,
  };

  const toolFor =
    (
      vendor: VendorName,
      callId: number | undefined,
      freeze: FreezePhase | undefined,
      called: number,
    ) =>
    async (args: ToolArgs, ctx: OwnableContext): Promise<ToolResult> => {
      const attempt = `${worker}#${++attempts}`;
      const started = Date.now();
      const at = (ev: string, detail?: string) =>
        journal({
          key: args.key,
          ev,
          attempt,
          ...(callId === undefined ? {} : { callId }),
          ...(detail === undefined ? {} : { detail }),
        });
      at('tool', vendor);
      await sleep(random.between(settings.thinkMs[0], settings.thinkMs[1]));
      if (freeze === 'before-check') await options.freeze?.(callId ?? -1, args.key, freeze);
      if (ctx.signal.aborted || ctx.stillOwned?.() === false) {
        at('not-owned', ctx.signal.aborted ? 'signal aborted' : 'stillOwned() false');
        throw new NotOwnedError(`attempt ${attempt} no longer owns ${args.key}: vendor not called`);
      }
      // The wire: past every check (ours, and idempotentFetch's own for the dedupe vendor). A
      // freeze here is a process stopped in the middle of its vendor request.
      const wire: typeof fetch = async (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('x-chaos-checked', String(Date.now()));
        if (freeze === 'after-check') await options.freeze?.(callId ?? -1, args.key, freeze);
        at('send');
        return fetch(input, { ...init, headers });
      };
      const send = vendor === 'dedupe' ? idempotentFetch({ fetch: wire }) : wire;
      const response = await send(`${settings.vendors[vendor]}/effect`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-chaos-key': args.key,
          'x-chaos-worker': worker,
          'x-chaos-pid': String(pid),
          'x-chaos-attempt': attempt,
          'x-chaos-called': String(called),
          'x-chaos-started': String(started),
        },
        body: JSON.stringify({ key: args.key }),
        // Not ctx.signal: a request on the wire is not taken back by aborting it.
        signal: AbortSignal.timeout(settings.fetchTimeoutMs),
      });
      if (!response.ok) throw new Error(`vendor answered ${response.status}`);
      const body = (await response.json()) as { id: string };
      at('reply', body.id);
      if (freeze === 'after-effect') await options.freeze?.(callId ?? -1, args.key, freeze);
      return { id: body.id };
    };

  return {
    journal,
    async call(key, vendor, { callId, freeze } = {}) {
      const called = Date.now();
      const base = { key, ev: 'call', ...(callId === undefined ? {} : { callId }) };
      journal({ ...base, detail: vendor });
      try {
        const result = await idempotency.run(
          { toolName: `chaos.${vendor}`, turnId: settings.runId, args: { key } },
          toolFor(vendor, callId, freeze, called),
          vendor === 'plain' ? plainPolicy : dedupePolicy,
        );
        journal({ ...base, ev: 'result', detail: `${result.outcome} ${result.value.id}` });
        return {
          ok: true,
          outcome: result.outcome,
          id: result.value.id,
          replayed: result.replayed,
        };
      } catch (error) {
        const code = IdempotencyError.isInstance(error)
          ? error.code
          : error instanceof NotOwnedError
            ? 'not_owned'
            : 'tool_error';
        const message = error instanceof Error ? error.message : String(error);
        journal({ ...base, ev: 'result', detail: `error ${code}: ${message.slice(0, 200)}` });
        return { ok: false, code, message: message.slice(0, 500), error };
      }
    },
  };
}
