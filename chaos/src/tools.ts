/**
 * The checker's tools, one per configuration (types.ts `ConfigName`), written as an application
 * would write them. Each makes one request to its vendor: the effect. The same code runs in every
 * worker and in the checker's final pass.
 *
 * - `fetch`, `approvals`: a plain `fetch` to the plain vendor, the executor's defaults (no
 *   `onToolError`, no reconcile); the tool asks `ctx.stillOwned()` right before the request, as
 *   the docs tell a tool that sends its own requests to.
 * - `idempotentFetch`: `idempotentFetch` to the plain vendor (it ignores the key), nothing
 *   declared; `idempotentFetch` asks for ownership itself.
 * - `vendorDedupes`: `idempotentFetch` to the deduping vendor; `vendorDedupes: true`,
 *   `onStale: 'reexecute'`.
 * - `reconcile`, `localCache`: `idempotentFetch` to the plain vendor; `reconcile` asks the vendor
 *   whether the key happened (outcome-unknown when the look-up fails). `localCache` runs on an
 *   executor over `withLocalCache(store)`.
 * - `httpHandler`: a POST endpoint wrapped by `idempotentHandler` (called with a `Request`, as a
 *   framework would), the key in `Idempotency-Key`; its handler sends a plain `fetch`.
 *
 * The request goes through `wire` (past every check), where an `after-check` freeze stops the
 * process mid-request.
 */
import { appendFileSync } from 'node:fs';
import {
  type Approvals,
  type ExecutionContext,
  type Idempotency,
  IdempotencyError,
  idempotentFetch,
  type ToolPolicy,
} from '@idempotent-tools/core';
import type { Random } from './random.ts';
import {
  type CallReport,
  type ConfigName,
  type FreezePhase,
  type JournalLine,
  type ToolSettings,
  vendorOf,
} from './types.ts';

export interface ToolArgs {
  key: string;
}
export interface ToolResult {
  id: string;
}

/** The tool refused to call the vendor: its attempt no longer owns the call. */
export class NotOwnedError extends Error {
  override readonly name = 'NotOwnedError';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The machine's clock, whatever clock-preload.ts did to `Date.now`: every stamp of the checker. */
export const realNow: () => number =
  (globalThis as { __chaosRealNow?: () => number }).__chaosRealNow ?? Date.now;

/** The HTTP handler's key header value of a key (its business key). */
export const httpKey = (runId: string, key: string) => `${runId}.${key}`;

export interface CallOptions {
  callId?: number;
  freeze?: FreezePhase;
  decision?: 'approve' | 'reject';
}

export interface Tools {
  /** One logical call of `key` under `config`; never throws. */
  call(
    key: string,
    config: ConfigName,
    options?: CallOptions,
  ): Promise<CallReport & { error?: unknown }>;
  journal(line: Omit<JournalLine, 'at' | 'worker' | 'pid'>): void;
}

export interface ToolsInput {
  /** The executor of every configuration but `localCache`. */
  idempotency: Idempotency;
  /** The executor over `withLocalCache(store)`. */
  cached: Idempotency;
  approvals: Approvals;
  /** Wraps the HTTP endpoint's handler (`idempotentHandler` over `idempotency`). */
  wrapHandler: (
    handler: (request: Request) => Promise<Response>,
  ) => (request: Request) => Promise<Response>;
  settings: ToolSettings;
  worker: string;
  journalPath: string;
  random: Random;
  freeze?: (callId: number, key: string, phase: FreezePhase) => Promise<void>;
}

export function createTools(input: ToolsInput): Tools {
  const { settings, worker, journalPath, random } = input;
  const pid = process.pid;
  let attempts = 0;

  const journal: Tools['journal'] = (line) => {
    const full: JournalLine = { at: realNow(), worker, pid, ...line };
    appendFileSync(journalPath, `${JSON.stringify(full)}\n`);
  };

  const reconcile: ToolPolicy<ToolArgs, ToolResult>['reconcile'] = async ({ args }) => {
    const response = await fetch(
      `${settings.vendors.plain}/lookup?key=${encodeURIComponent(args.key)}`,
      { signal: AbortSignal.timeout(settings.fetchTimeoutMs) },
    );
    if (!response.ok) throw new Error(`vendor lookup answered ${response.status}`);
    const body = (await response.json()) as { found: boolean; id?: string };
    journal({ key: args.key, ev: 'reconcile', detail: body.found ? `found ${body.id}` : 'none' });
    return body.found ? { found: true, value: { id: body.id! } } : { found: false };
  };
  const POLICIES: Record<ConfigName, ToolPolicy<ToolArgs, ToolResult>> = {
    fetch: {},
    idempotentFetch: {},
    vendorDedupes: { vendorDedupes: true, onStale: 'reexecute' },
    reconcile: { reconcile },
    localCache: { reconcile },
    httpHandler: {},
    approvals: {},
  };
  const OWN_CHECK = new Set<ConfigName>(['fetch', 'approvals']);
  const KEYED = new Set<ConfigName>([
    'idempotentFetch',
    'vendorDedupes',
    'reconcile',
    'localCache',
  ]);

  /** The tool's body: one request to the vendor. `ctx` is undefined in the HTTP handler. */
  const effect = async (
    config: ConfigName,
    key: string,
    ctx: ExecutionContext | undefined,
    { callId, freeze, called }: CallOptions & { called: number },
  ): Promise<ToolResult> => {
    const attempt = `${worker}#${++attempts}`;
    const started = realNow();
    const vendor = vendorOf(config);
    const at = (ev: string, detail?: string) =>
      journal({
        key,
        ev,
        attempt,
        ...(callId === undefined ? {} : { callId }),
        ...(detail === undefined ? {} : { detail }),
      });
    at('tool', config);
    await sleep(random.between(settings.thinkMs[0], settings.thinkMs[1]));
    if (freeze === 'before-check') await input.freeze?.(callId ?? -1, key, freeze);
    if (OWN_CHECK.has(config) && ctx !== undefined && !ctx.stillOwned()) {
      at('not-owned', 'stillOwned() false');
      throw new NotOwnedError(`attempt ${attempt} no longer owns ${key}: vendor not called`);
    }
    const wire: typeof fetch = async (url, init) => {
      const headers = new Headers(init?.headers);
      headers.set('x-chaos-checked', String(realNow()));
      if (freeze === 'after-check') await input.freeze?.(callId ?? -1, key, freeze);
      at('send');
      return fetch(url, { ...init, headers });
    };
    const send = KEYED.has(config) ? idempotentFetch({ fetch: wire }) : wire;
    const response = await send(`${settings.vendors[vendor]}/effect`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-chaos-key': key,
        'x-chaos-worker': worker,
        'x-chaos-pid': String(pid),
        'x-chaos-attempt': attempt,
        'x-chaos-called': String(called),
        'x-chaos-started': String(started),
      },
      body: JSON.stringify({ key }),
      // Not ctx.signal: a request on the wire is not taken back by aborting it.
      signal: AbortSignal.timeout(settings.fetchTimeoutMs),
    });
    if (!response.ok) throw new Error(`vendor answered ${response.status}`);
    const body = (await response.json()) as { id: string };
    at('reply', body.id);
    if (freeze === 'after-effect') await input.freeze?.(callId ?? -1, key, freeze);
    return { id: body.id };
  };

  // The endpoint: its handler is the tool's body (no ctx: a handler sees only its request).
  const handler = input.wrapHandler(async (request) => {
    const key = request.headers.get('x-chaos-key') ?? '';
    const callId = Number(request.headers.get('x-chaos-call') ?? '-1');
    const called = Number(request.headers.get('x-chaos-called') ?? '0');
    const { id } = await effect('httpHandler', key, undefined, { callId, called });
    return Response.json({ id });
  });

  const viaHttp = async (key: string, options: CallOptions & { called: number }) => {
    const response = await handler(
      new Request('http://chaos.invalid/effects', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': httpKey(settings.runId, key),
          'x-chaos-key': key,
          'x-chaos-call': String(options.callId ?? -1),
          'x-chaos-called': String(options.called),
        },
        body: JSON.stringify({ key }),
      }),
    );
    const text = await response.text();
    const body = JSON.parse(text) as { id?: string; code?: string; detail?: string };
    if (response.status !== 200) {
      return {
        ok: false,
        code: body.code ?? `http_${response.status}`,
        message: `${response.status}: ${body.detail ?? text}`.slice(0, 500),
      } satisfies CallReport;
    }
    const replayed = response.headers.get('idempotent-replayed') === 'true';
    return {
      ok: true,
      outcome: replayed ? 'replayed' : 'executed',
      id: body.id!,
      replayed,
    } satisfies CallReport;
  };

  return {
    journal,
    async call(key, config, options = {}) {
      const called = realNow();
      const { callId } = options;
      const base = { key, ev: 'call', ...(callId === undefined ? {} : { callId }) };
      journal({ ...base, detail: config });
      try {
        let report: CallReport;
        if (config === 'httpHandler') {
          report = await viaHttp(key, { ...options, called });
        } else {
          const call = { toolName: `chaos.${config}`, turnId: settings.runId, args: { key } };
          const fn = (args: ToolArgs, ctx: ExecutionContext) =>
            effect(config, args.key, ctx, { ...options, called });
          let result: Awaited<ReturnType<Idempotency['run']>> & { value: ToolResult };
          if (config === 'approvals') {
            const approval = await input.approvals.requestApproval(call);
            if (options.decision === 'reject') {
              await input.approvals.reject(approval.key, { by: worker, reason: 'chaos' });
            } else if (options.decision === 'approve') {
              await input.approvals.approve(approval.key, { by: worker });
            }
            result = await input.approvals.run(call, fn, POLICIES[config]);
          } else {
            const executor = config === 'localCache' ? input.cached : input.idempotency;
            result = await executor.run(call, fn, POLICIES[config]);
          }
          report = {
            ok: true,
            outcome: result.outcome,
            id: result.value.id,
            replayed: result.replayed,
          };
        }
        journal({
          ...base,
          ev: 'result',
          detail: report.ok ? `${report.outcome} ${report.id}` : `error ${report.code}`,
        });
        return { ...report, startedAt: called };
      } catch (error) {
        const code = IdempotencyError.isInstance(error)
          ? error.code
          : error instanceof NotOwnedError
            ? 'not_owned'
            : (error as { name?: string })?.name === 'ApprovalRejectedError'
              ? 'approval_rejected'
              : 'tool_error';
        const message = error instanceof Error ? error.message : String(error);
        journal({ ...base, ev: 'result', detail: `error ${code}: ${message.slice(0, 200)}` });
        if (code === 'approval_rejected')
          return { ok: true, outcome: 'rejected', startedAt: called };
        return { ok: false, code, message: message.slice(0, 500), error, startedAt: called };
      }
    },
  };
}
