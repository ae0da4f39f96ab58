/**
 * Approvals bound to the exact call (human in the loop). An approval is a record on the same
 * store as the call, under a key derived from the call's key (scope, turn, tool, args
 * fingerprint), so it authorises that call and no other:
 *
 * - `requestApproval(call)` stores the pending request (idempotent: the same call asks once);
 * - `approve(key, { by })` / `reject(key, { by, reason })` store the decision: a write-once
 *   record (claim + complete), so the first decision wins, the same decision sent again is that
 *   decision, and the other one is refused (`ApprovalConflictError`);
 * - `run(call, fn)` runs the tool through the executor only once it is approved: pending ->
 *   `ApprovalPendingError`, rejected -> `ApprovalRejectedError` (stored, the same on every
 *   retry), approved -> the executor's normal path (the tool runs once, from any process);
 * - `runAsking(call, fn, policy, ask)` is `run` for an adapter that asks the human itself: it
 *   asks (`ask`) only when nothing is decided, and stores the answer first.
 *
 * Only the store contract is used (claim, complete, takeover, release, get): every store works.
 * Records live for the tool's ttl (the request from when it was made, the decision from when it
 * was made).
 */

import {
  ApprovalConflictError,
  ApprovalPendingError,
  ApprovalRejectedError,
  DriftError,
  InProgressError,
  InvalidInputError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '../errors/index.js';
import {
  type Call,
  DEFAULTS,
  type Idempotency,
  type IdempotentResult,
  type ToolFunction,
  type ToolPolicy,
} from '../executor/types.js';
import { randomUUID } from '../runtime/index.js';
import type { IdempotencyRecord, IdempotencyStore, RecordMeta } from '../store/store.js';

/** The tool names under which approval records are keyed (never a real tool's: they hold `/`). */
export const APPROVAL_TOOL_NAMES = {
  request: 'idempotent-tools/approval',
  decision: 'idempotent-tools/approval-decision',
  ref: 'idempotent-tools/approval-ref',
  asked: 'idempotent-tools/approval-asked',
} as const;

export type ApprovalStatus = 'pending' | 'approved' | 'rejected';

/** One approval: the request, and the decision once there is one. */
export interface Approval {
  /** The approval key: pass it to `approve` / `reject`. Derived from the call's key. */
  key: string;
  /** The call's idempotency key (the key of the record the tool's outcome is stored under). */
  callKey: string;
  status: ApprovalStatus;
  toolName: string;
  scope: string | undefined;
  turnId: string | undefined;
  /** The args fingerprint the approval is bound to: it authorises these args only. */
  fingerprint: string;
  /** When it was requested (ms since the epoch, the store's clock). */
  requestedAt: number;
  /** Who decided (`approved` / `rejected`). */
  by?: string;
  /** When (ms since the epoch). */
  decidedAt?: number;
  /** Why, when the decider said (rejections, mostly). */
  reason?: string;
}

export interface ApprovalsOptions {
  /**
   * How long approval records are kept, in ms, when the tool's policy has no `ttl`: a request
   * from when it was made, a decision from when it was made. Use the executor's `ttl` if you
   * changed it. @default 86400000 (24 h, the executor's default)
   */
  ttl?: number;
}

export interface RequestApprovalOptions<Args> {
  /** The tool's policy: its `businessKey` and `ttl`. @default {} */
  policy?: Pick<ToolPolicy<Args>, 'businessKey' | 'ttl'> | undefined;
  /**
   * The framework's id of this request (the AI SDK's `toolCallId`, the Agents SDK's `callId`):
   * the args are pinned to it, so a later request under the same `ref` with other arguments
   * (an edited history, a tampered saved state) is refused with `DriftError`.
   */
  ref?: string | undefined;
}

export interface Decider {
  /** Who decides (a user id, an email, a service): stored with the decision. */
  by: string;
}

/** A person's answer to an approval request, as an adapter got it (see `runAsking`). */
export interface ApprovalAnswer extends Decider {
  approved: boolean;
  /** Why (a rejection, mostly): stored with the decision. */
  reason?: string | undefined;
}

/**
 * How an adapter asks the person about one call (see `runAsking`). `pending`: the stored request
 * when there is one (an answer the framework carries for it counts); `request()` stores it (call
 * it before asking). Returns the answer, or throws (a question that travels in the framework's
 * reply, a client that cannot be asked).
 */
export type AskApproval = (asking: {
  pending: Approval | undefined;
  request: () => Promise<Approval>;
}) => Promise<ApprovalAnswer>;

/** A decision of the human on one approval (`decideAsked`). */
export interface AskedDecision extends Decider {
  /** The approval it decides (the key the human was shown). */
  approvalKey: string;
  status: 'approved' | 'rejected';
  reason?: string | undefined;
}

/** How a run that stops to ask the human (`askInRun`: a LangGraph interrupt) asks. */
export interface RunAsk {
  /**
   * Put the request to the human: throws to stop the run there (`stops`), or returns the answer
   * the run was resumed with (the answers come back in order on every resume). Asked again, with
   * `refused` saying why, after an answer that was not taken.
   */
  ask(request: { approvalKey: string; refused: string | undefined }): unknown;
  /** Whether an error `ask` threw stops the run to wait for the human. */
  stops(error: unknown): boolean;
  /** The decision in an answer, or why it is none (shown to the human as `refused`). */
  decisionOf(answer: unknown, approvalKey: string): AskedDecision | string;
}

export interface Approvals {
  /** The approval key of a call (derives the call's key; touches no store). */
  keyOf<Args>(call: Call<Args>, policy?: RequestApprovalOptions<Args>['policy']): string;
  /**
   * Ask for an approval of this exact call (idempotent: a call asked for again gets the same
   * approval, decided or not).
   * @throws DriftError when `ref` (or the business key) was asked for with other arguments
   */
  requestApproval<Args>(
    call: Call<Args>,
    options?: RequestApprovalOptions<Args>,
  ): Promise<Approval>;
  /**
   * Approve. The first decision wins: approving again returns the stored approval.
   * @throws ApprovalConflictError when it was rejected
   * @throws InvalidInputError when no approval was requested under `key` (or it expired)
   */
  approve(key: string, decider: Decider): Promise<Approval>;
  /**
   * Reject. The first decision wins: rejecting again returns the stored rejection.
   * @throws ApprovalConflictError when it was approved
   * @throws InvalidInputError when no approval was requested under `key` (or it expired)
   */
  reject(key: string, decider: Decider & { reason?: string | undefined }): Promise<Approval>;
  /** The approval under `key`, undefined when none was requested (or it expired). */
  getApproval(key: string): Promise<Approval | undefined>;
  /**
   * Run the call once it is approved: the executor's `run` (so a retry replays), guarded.
   * Asks for the approval when none was requested yet.
   *
   * @param options.approvalKey the key the approver decided on, when the caller has it: one that
   *   is not this call's is refused (`DriftError` when it was given for other arguments)
   * @throws ApprovalPendingError (not decided yet), ApprovalRejectedError (rejected), DriftError
   *   (the approval is for other arguments); nothing ran
   */
  run<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    policy?: ToolPolicy<Args, Result>,
    options?: { approvalKey?: string | undefined },
  ): Promise<IdempotentResult<Result> & { approval: Approval }>;
  /**
   * `run` for an adapter that asks the person itself (MCP elicitation, a graph interrupt):
   * decided already -> `run` (approved: runs once or replays; rejected: ApprovalRejectedError),
   * nobody is asked; else `ask` gets the answer, stored as the decision before `run` (a decision
   * taken first, by another approver or a concurrent answer, stands).
   * @throws as `run`, and what `ask` throws
   */
  runAsking<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    policy: ToolPolicy<Args, Result> | undefined,
    ask: AskApproval,
  ): Promise<IdempotentResult<Result> & { approval: Approval }>;
  /**
   * A call its framework says was approved (a resumed `RunState`, an approval response), bound to
   * the exact call: its request made or found under `ref`, approved by `by` while still pending;
   * a decision taken first stays (a rejection is thrown). Idempotent: the same approval sent
   * again is the one approval.
   * @param options.asked the call as `recordAsked` recorded it under `ref` when the model emitted
   *   it (recorded with the same `policy`): approved only when the model asked for exactly it
   *   (`checkAsked` first; nothing is stored otherwise). @default not checked
   * @throws ApprovalRejectedError (rejected on the store first), DriftError (`ref` was asked for
   *   with other arguments: an edited history or state), and what `checkAsked` throws
   */
  approveCall<Args>(
    call: Call<Args>,
    options: RequestApprovalOptions<Args> & {
      ref: string;
      by: string;
      asked?: Call<unknown> | undefined;
    },
  ): Promise<Approval>;
  /**
   * Record that the model asked for this call: its framework's id of the call (`ref`) with these
   * arguments, when the model emits it (before the run stops to ask the human). The first
   * arguments stay: a resume that announces the call again with edited ones records nothing.
   */
  recordAsked<Args>(
    call: Call<Args>,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<void>;
  /**
   * Whether the model asked for exactly this call (`recordAsked`): an approval authorises only
   * a call the model emitted. Nothing is stored.
   * @throws DriftError (the model asked for `ref` with other arguments), InvalidInputError (field
   *   `args`: the model never asked for this call here)
   */
  checkAsked<Args>(
    call: Call<Args>,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<void>;
  /**
   * A decision the human sent back for a call its run stopped to ask about (`recordAsked` under
   * `ref` when it stopped: a LangGraph interrupt), bound to the exact call: stored when it is this
   * call's and the call was asked under `ref`, the first decision standing (a conflict returns the
   * decision taken first). Nothing is decided, and the error's message says why for the human,
   * when the decision is of another approval (`DriftError`: of this call with other arguments;
   * `InvalidInputError` field `approvalKey`) or the call was never asked under `ref`
   * (`InvalidInputError` field `args`).
   */
  decideAsked<Args>(
    call: Call<Args>,
    decision: AskedDecision,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<Approval>;
  /**
   * The decision on this exact call in a run that stops to ask the human and is resumed with
   * the answer (a LangGraph interrupt): requested first (a decision already taken is returned
   * without asking), then `run.ask`ed until an answer is a decision of this call, each stop
   * recorded (`recordAsked`) so that only an answer to a question put to the human decides
   * (`decideAsked`); an answer that is not taken asks again, with `refused` saying why.
   * @throws what `ask` throws to stop the run (after recording it)
   */
  askInRun<Args>(
    call: Call<Args>,
    run: RunAsk,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<Approval>;
}

/** What the request record's outcome holds. */
interface StoredRequest {
  callKey: string;
  toolName: string;
  scope?: string;
  turnId?: string;
  fingerprint: string;
  ttl: number;
}

/** What the decision record's outcome holds. */
interface StoredDecision {
  status: 'approved' | 'rejected';
  by: string;
  at: number;
  reason?: string;
}

const CELL_LEASE = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fenced write sent again on a transient store error (every store operation is safe to resend). */
async function resend<T>(op: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (error) {
      if (!StoreUnavailableError.isInstance(error) || attempt >= 2) throw error;
      await sleep(20 * (attempt + 1));
    }
  }
}

type Cell =
  | { status: 'created' | 'existing'; record: IdempotencyRecord & { outcome: string } }
  | { status: 'drift'; record: IdempotencyRecord };

/**
 * A write-once record on the store contract: the first writer's outcome stays (claim + complete);
 * later writers with the same fingerprint get it, with another fingerprint `drift`. A writer that
 * died between its claim and its complete is taken over (nothing happens in between).
 */
async function putOnce(
  store: IdempotencyStore,
  input: { key: string; fingerprint: string; ttlMs: number; meta: RecordMeta },
  outcome: (record: IdempotencyRecord) => string,
): Promise<Cell> {
  const token = randomUUID();
  const claim = { ...input, token, leaseMs: CELL_LEASE };
  const finish = async (record: IdempotencyRecord): Promise<Cell | undefined> => {
    const text = outcome(record);
    const done = await resend(() =>
      store.complete({
        key: input.key,
        token,
        state: 'completed',
        outcome: text,
        ttlMs: input.ttlMs,
      }),
    );
    return done
      ? { status: 'created', record: { ...record, state: 'completed', outcome: text } }
      : undefined;
  };
  for (let round = 0; round < 200; round++) {
    const claimed = await store.claim(claim);
    if (claimed.status === 'acquired') {
      const created = await finish(claimed.record);
      if (created !== undefined) return created;
      continue; // the record went away (expired, purged): claim again
    }
    if (claimed.status === 'drift') return claimed;
    if (claimed.status === 'completed') {
      const { record } = claimed;
      if (record.outcome === undefined) throw corrupt(input.key);
      return { status: 'existing', record: { ...record, outcome: record.outcome } };
    }
    if (claimed.status === 'stale') {
      const taken = await store.takeover({
        key: input.key,
        staleToken: claimed.record.token,
        token,
        leaseMs: CELL_LEASE,
        ttlMs: input.ttlMs,
      });
      if (taken) {
        const created = await finish(claimed.record);
        if (created !== undefined) return created;
      }
      continue;
    }
    // in_progress: another writer is between its claim and its complete.
    if (store.waitForChange !== undefined) await store.waitForChange(input.key, 200);
    else await sleep(Math.min(10 * (round + 1), 100));
  }
  throw new InProgressError({
    key: input.key,
    message: `The approval record ${input.key} is being written by another process and did not settle. Retry.`,
  });
}

function metaOf(
  toolName: string,
  scope: string | undefined,
  turnId: string | undefined,
): RecordMeta {
  const meta: RecordMeta = { toolName };
  if (scope !== undefined) meta.scope = scope;
  if (turnId !== undefined) meta.turnId = turnId;
  return meta;
}

function corrupt(key: string): RecordIntegrityError {
  return new RecordIntegrityError({
    key,
    reason: 'corrupt',
    message: `The approval record ${key} cannot be read: the store returned a value approvals did not write. Nothing ran. Inspect the record and delete it, then ask for the approval again.`,
  });
}

function parse<T>(key: string, text: string | undefined, field: 'request' | 'decision'): T {
  try {
    const value = JSON.parse(text ?? '') as Record<string, unknown>;
    const inner = value?.[field];
    if (inner !== null && typeof inner === 'object') return inner as T;
  } catch {
    // below
  }
  throw corrupt(key);
}

function checkText(field: string, value: unknown, max: number): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > max ||
    !value.isWellFormed()
  ) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a non-empty string of at most ${max} characters.`,
    });
  }
  return value;
}

/**
 * Approvals on the executor's store, with its keys (`argsHmacKey` included).
 *
 * ```ts
 * const approvals = createApprovals(idempotency);
 * const { key } = await approvals.requestApproval({ toolName: 'refund', turnId, args });
 * await approvals.approve(key, { by: 'alice@example.com' });       // from the approver's UI
 * const { value } = await approvals.run({ toolName: 'refund', turnId, args }, refund);
 * ```
 */
export function createApprovals(
  idempotency: Idempotency,
  options: ApprovalsOptions = {},
): Approvals {
  if (idempotency == null || typeof idempotency.run !== 'function') {
    throw new InvalidInputError({
      field: 'idempotency',
      message: 'createApprovals takes an executor: createApprovals(createIdempotency({ store })).',
    });
  }
  const { store } = idempotency;
  const defaultTtl = options.ttl ?? DEFAULTS.ttl;
  if (!Number.isSafeInteger(defaultTtl) || defaultTtl <= 0) {
    throw new InvalidInputError({ field: 'ttl', message: 'ttl must be a positive integer of ms.' });
  }

  const derived = (toolName: string, scope: string | undefined, identity: unknown) =>
    idempotency.keyOf({ toolName, scope, args: {} }, { businessKey: () => identity }).key;
  /**
   * The decision's key: of this request (its args fingerprint and when it was made), not only of
   * the approval key. With a business key, args B asked for after the request of args A expired
   * share A's approval key; A's decision, which may outlive A's request, is not theirs.
   */
  const decisionKeyOf = (key: string, request: StoredRequest, record: IdempotencyRecord) =>
    derived(APPROVAL_TOOL_NAMES.decision, request.scope, [
      key,
      request.fingerprint,
      record.createdAt,
    ]);

  function identify<Args>(call: Call<Args>, policy: RequestApprovalOptions<Args>['policy']) {
    const { key: callKey, fingerprint } = idempotency.keyOf(
      call,
      policy?.businessKey === undefined ? {} : { businessKey: policy.businessKey },
    );
    return { callKey, fingerprint, key: derived(APPROVAL_TOOL_NAMES.request, call.scope, callKey) };
  }

  function approvalOf(
    key: string,
    record: IdempotencyRecord,
    request: StoredRequest,
    decision?: StoredDecision,
  ): Approval {
    const approval: Approval = {
      key,
      callKey: request.callKey,
      status: decision?.status ?? 'pending',
      toolName: request.toolName,
      scope: request.scope,
      turnId: request.turnId,
      fingerprint: request.fingerprint,
      requestedAt: record.createdAt,
    };
    if (decision !== undefined) {
      approval.by = decision.by;
      approval.decidedAt = decision.at;
      if (decision.reason !== undefined) approval.reason = decision.reason;
    }
    return approval;
  }

  /** The request under `key` (a request still being written is waited for). */
  async function readRequest(key: string) {
    for (let round = 0; round < 100; round++) {
      const record = await store.get(key);
      if (record === undefined) return undefined;
      if (record.state !== 'in_progress') {
        return { record, request: parse<StoredRequest>(key, record.outcome, 'request') };
      }
      if (record.leaseExpiresAt <= Date.now()) return undefined; // its writer died: not requested
      await sleep(Math.min(10 * (round + 1), 100));
    }
    return undefined;
  }

  async function readDecision(key: string, request: StoredRequest, requested: IdempotencyRecord) {
    const decisionKey = decisionKeyOf(key, request, requested);
    const record = await store.get(decisionKey);
    if (record === undefined || record.state === 'in_progress') return undefined;
    return parse<StoredDecision>(decisionKey, record.outcome, 'decision');
  }

  async function getApproval(key: string): Promise<Approval | undefined> {
    checkText('key', key, 256);
    const found = await readRequest(key);
    if (found === undefined) return undefined;
    const decision = await readDecision(key, found.request, found.record);
    return approvalOf(key, found.record, found.request, decision);
  }

  async function requestApproval<Args>(
    call: Call<Args>,
    requestOptions: RequestApprovalOptions<Args> = {},
  ): Promise<Approval> {
    const { policy, ref } = requestOptions;
    const ttl = policy?.ttl ?? defaultTtl;
    const { key, callKey, fingerprint } = identify(call, policy);
    const meta = metaOf(APPROVAL_TOOL_NAMES.request, call.scope, call.turnId);
    if (ref !== undefined) {
      const refKey = derived(APPROVAL_TOOL_NAMES.ref, call.scope, [
        call.toolName,
        call.turnId ?? null,
        checkText('ref', ref, 512),
      ]);
      const pinned = await putOnce(store, { key: refKey, fingerprint, ttlMs: ttl, meta }, () =>
        JSON.stringify({ ref: { key } }),
      );
      if (pinned.status === 'drift') {
        throw new DriftError({
          key: callKey,
          toolName: call.toolName,
          storedFingerprint: pinned.record.fingerprint,
          fingerprint,
          message: `The approval of ${call.toolName} (${ref}) was asked for other arguments: it does not authorise these. Nothing ran. Call the tool again to ask for an approval of these arguments.`,
        });
      }
    }
    const request: StoredRequest = { callKey, toolName: call.toolName, fingerprint, ttl };
    if (call.scope !== undefined) request.scope = call.scope;
    if (call.turnId !== undefined) request.turnId = call.turnId;
    const cell = await putOnce(store, { key, fingerprint, ttlMs: ttl, meta }, () =>
      JSON.stringify({ request }),
    );
    if (cell.status === 'drift') {
      throw new DriftError({
        key: callKey,
        toolName: call.toolName,
        storedFingerprint: cell.record.fingerprint,
        fingerprint,
        message: `An approval of ${call.toolName} with this business key was asked for other arguments: it does not authorise these. Nothing ran. Repeat the original arguments, or use a new business key.`,
      });
    }
    const stored = parse<StoredRequest>(key, cell.record.outcome, 'request');
    const decision =
      cell.status === 'created' ? undefined : await readDecision(key, stored, cell.record);
    return approvalOf(key, cell.record, stored, decision);
  }

  async function decide(
    key: string,
    status: 'approved' | 'rejected',
    decider: Decider & { reason?: string | undefined },
  ): Promise<Approval> {
    checkText('key', key, 256);
    if (decider === null || typeof decider !== 'object') {
      throw new InvalidInputError({
        field: 'by',
        message: `${status === 'approved' ? 'approve' : 'reject'}(key, { by }) needs who decides.`,
      });
    }
    const by = checkText('by', decider.by, 512);
    const reason =
      decider.reason === undefined ? undefined : checkText('reason', decider.reason, 4096);
    const found = await readRequest(key);
    if (found === undefined) {
      throw new InvalidInputError({
        field: 'key',
        message: `No approval was requested under ${key}, or it expired (approvals last the tool's ttl). Nothing was decided. Ask for it again (call the tool again), then decide.`,
      });
    }
    const { request, record } = found;
    const decisionKey = decisionKeyOf(key, request, record);
    // Write-once: the first decision stays. Its fingerprint is the request's (one per request),
    // so a writer that died between its claim and its complete is taken over (stale) whatever it
    // was deciding, and nothing is stuck.
    const cell = await putOnce(
      store,
      {
        key: decisionKey,
        fingerprint: request.fingerprint,
        ttlMs: request.ttl,
        meta: metaOf(APPROVAL_TOOL_NAMES.decision, request.scope, request.turnId),
      },
      () => {
        const decision: StoredDecision = { status, by, at: Date.now() };
        if (reason !== undefined) decision.reason = reason;
        return JSON.stringify({ decision });
      },
    );
    if (cell.status === 'drift') throw corrupt(decisionKey);
    const decision = parse<StoredDecision>(decisionKey, cell.record.outcome, 'decision');
    if (decision.status !== status) {
      // Decided the other way first: that decision stands.
      throw new ApprovalConflictError({
        approval: approvalOf(key, record, request, decision),
        attempted: status,
      });
    }
    return approvalOf(key, record, request, decision);
  }

  /** The refusal of an approval key that is not the call's (`DriftError`: other arguments). */
  async function foreign<Args>(
    call: Call<Args>,
    approvalKey: string,
    callKey: string,
    fingerprint: string,
  ): Promise<Error> {
    const other = await getApproval(approvalKey);
    const sameCall =
      other !== undefined &&
      other.toolName === call.toolName &&
      other.scope === call.scope &&
      other.turnId === call.turnId;
    if (sameCall) {
      return new DriftError({
        key: callKey,
        toolName: call.toolName,
        storedFingerprint: other.fingerprint,
        fingerprint,
        message: `The approval ${approvalKey} was given for other arguments of ${call.toolName}: it does not authorise these. Nothing ran. Ask for an approval of these arguments.`,
      });
    }
    return new InvalidInputError({
      field: 'approvalKey',
      message: `The approval ${approvalKey} is not an approval of this call of ${String(call.toolName)} (another tool, scope or turn, or it expired). Nothing ran.`,
    });
  }

  /** Decide a pending approval; decided the other way first, that decision stands. */
  async function standing(
    key: string,
    status: 'approved' | 'rejected',
    decider: Decider & { reason?: string | undefined },
  ): Promise<Approval> {
    try {
      return await decide(key, status, decider);
    } catch (error) {
      const stands = ApprovalConflictError.isInstance(error) ? await getApproval(key) : undefined;
      if (stands === undefined) throw error;
      return stands;
    }
  }

  async function run<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    policy?: ToolPolicy<Args, Result>,
    runOptions: { approvalKey?: string | undefined } = {},
  ): Promise<IdempotentResult<Result> & { approval: Approval }> {
    const { key, callKey, fingerprint } = identify(call, policy);
    if (runOptions.approvalKey !== undefined && runOptions.approvalKey !== key) {
      throw await foreign(call, runOptions.approvalKey, callKey, fingerprint);
    }
    const approval =
      (await getApproval(key)) ?? (await requestApproval(call, { policy: policy ?? {} }));
    if (approval.fingerprint !== fingerprint) {
      throw new DriftError({
        key: callKey,
        toolName: call.toolName,
        storedFingerprint: approval.fingerprint,
        fingerprint,
        message: `The approval of ${call.toolName} with this business key was given for other arguments: it does not authorise these. Nothing ran. Repeat the approved arguments, or ask for a new approval.`,
      });
    }
    if (approval.status === 'pending') throw new ApprovalPendingError({ approval, callKey });
    if (approval.status === 'rejected') throw new ApprovalRejectedError({ approval, callKey });
    const result = await idempotency.run(call, fn, policy);
    return { ...result, approval };
  }

  async function runAsking<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    policy: ToolPolicy<Args, Result> | undefined,
    ask: AskApproval,
  ): Promise<IdempotentResult<Result> & { approval: Approval }> {
    const key = identify(call, policy).key;
    const existing = await getApproval(key);
    if (existing === undefined || existing.status === 'pending') {
      const request = () => requestApproval(call, { policy: policy ?? {} });
      const { approved, by, reason } = await ask({ pending: existing, request });
      const decider = reason === undefined ? { by } : { by, reason };
      await decide(key, approved ? 'approved' : 'rejected', decider).catch((error: unknown) => {
        if (!ApprovalConflictError.isInstance(error)) throw error; // the first decision stands
      });
    }
    return run(call, fn, policy);
  }

  async function approveCall<Args>(
    call: Call<Args>,
    options: RequestApprovalOptions<Args> & {
      ref: string;
      by: string;
      asked?: Call<unknown> | undefined;
    },
  ): Promise<Approval> {
    const { by, asked: emitted, ...request } = options;
    if (emitted !== undefined) {
      await checkAsked(
        emitted,
        request.ref,
        request.policy as RequestApprovalOptions<unknown>['policy'],
      );
    }
    const requested = await requestApproval(call, request);
    let approval = requested;
    if (requested.status === 'pending')
      approval = await standing(requested.key, 'approved', { by });
    if (approval.status === 'rejected') throw new ApprovalRejectedError({ approval });
    return approval;
  }

  /** The record of what the model asked for under `ref`: keyed by the ref, the args fingerprinted. */
  const asked = <Args>(
    call: Call<Args>,
    ref: string,
    policy: RequestApprovalOptions<Args>['policy'],
  ) => {
    const { fingerprint } = idempotency.keyOf(
      call,
      policy?.businessKey === undefined ? {} : { businessKey: policy.businessKey },
    );
    return {
      call: {
        toolName: APPROVAL_TOOL_NAMES.asked,
        scope: call.scope,
        args: { toolName: call.toolName, fingerprint },
      },
      // `reject` whatever the executor's default: other arguments are never this call.
      policy: {
        businessKey: () => [call.toolName, ref],
        onDrift: 'reject' as const,
        ttl: policy?.ttl ?? defaultTtl,
      },
    };
  };
  const notAsked = new Error('not asked');

  async function recordAsked<Args>(
    call: Call<Args>,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<void> {
    const record = asked(call, ref, policy);
    await idempotency
      .run(record.call, () => true, record.policy)
      .catch((error: unknown) => {
        if (!DriftError.isInstance(error)) throw error;
      });
  }

  async function checkAsked<Args>(
    call: Call<Args>,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<void> {
    const record = asked(call, ref, policy);
    try {
      await idempotency.run(
        record.call,
        () => {
          throw notAsked;
        },
        { ...record.policy, isTerminalError: () => false, onToolError: 'release' },
      );
    } catch (error) {
      if (DriftError.isInstance(error)) {
        throw new DriftError({
          key: error.key,
          toolName: call.toolName,
          storedFingerprint: error.storedFingerprint,
          fingerprint: error.fingerprint,
          message: `The approval of ${call.toolName} (${ref}) was asked for other arguments: it does not authorise these. Nothing ran. Call ${call.toolName} again to ask for an approval of these arguments.`,
        });
      }
      if (error !== notAsked) throw error;
      throw new InvalidInputError({
        field: 'args',
        message: `The approval of ${call.toolName} (${ref}) is for a call the model never asked for (no such call was emitted here, or its record expired): it does not authorise it. Nothing ran. Call ${call.toolName} again to ask for an approval.`,
      });
    }
  }

  async function decideAsked<Args>(
    call: Call<Args>,
    decision: AskedDecision,
    ref: string,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<Approval> {
    const { key, callKey, fingerprint } = identify(call, policy);
    if (decision.approvalKey !== key) {
      throw await foreign(call, decision.approvalKey, callKey, fingerprint);
    }
    try {
      await checkAsked(call, ref, policy);
    } catch (error) {
      if (!InvalidInputError.isInstance(error) || error.field !== 'args') throw error;
      throw new InvalidInputError({
        field: 'args',
        message: `The decision on ${call.toolName} came before this call was asked for (nothing asked for it as ${ref}): nothing ran and nothing was decided. Decide when it is asked, with the approval key it is asked with.`,
      });
    }
    return standing(key, decision.status, decision);
  }

  async function askInRun<Args>(
    call: Call<Args>,
    run: RunAsk,
    policy?: RequestApprovalOptions<Args>['policy'],
  ): Promise<Approval> {
    let approval = await requestApproval(call, { policy });
    let refused: string | undefined;
    for (let index = 0; approval.status === 'pending'; index++) {
      const ref = `${approval.key}#${index}`;
      let answer: unknown;
      try {
        answer = await run.ask({ approvalKey: approval.key, refused });
      } catch (error) {
        // The run stops here: the request is put to the human; remember that it was.
        if (run.stops(error)) await recordAsked(call, ref, policy);
        throw error;
      }
      const decision = run.decisionOf(answer, approval.key);
      if (typeof decision === 'string') {
        refused = decision;
        continue;
      }
      try {
        approval = await decideAsked(call, decision, ref, policy);
      } catch (error) {
        // Not this call's decision, or an answer made up before the call was asked for.
        if (!DriftError.isInstance(error) && !InvalidInputError.isInstance(error)) throw error;
        refused = error.message;
      }
    }
    return approval;
  }

  return {
    keyOf: (call, policy) => identify(call, policy).key,
    requestApproval,
    approve: (key, decider) => decide(key, 'approved', decider),
    reject: (key, decider) => decide(key, 'rejected', decider),
    getApproval,
    run,
    runAsking,
    approveCall,
    recordAsked,
    checkAsked,
    decideAsked,
    askInRun,
  };
}
