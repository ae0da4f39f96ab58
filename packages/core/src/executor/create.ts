/**
 * The executor (design section 6, docs/design.md), assembled from its parts: options and
 * policies checked (policy.ts), keys derived, each call's state (call-run.ts) driven through the
 * claim loop (machine.ts). `createIdempotency` (../executor.ts) adds the vendor calls (vendor-calls/).
 */
import { InvalidInputError } from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import {
  DEFAULT_MAX_ARGS_BYTES,
  type DerivedKey,
  deriveKeyAndSize,
  keyHasher,
} from '../keys/derive-key.js';
import type { IdempotencyRecord } from '../store/store.js';
import { CallRun, type Engine } from './call-run.js';
import { isRunningAround, outsideTools, runningContext } from './context.js';
import { createOutcomeCodec } from './encryption.js';
import { runClaimLoop } from './machine.js';
import type { OpenedOutcome } from './outcome.js';
import { checkBytes, createPolicies, NO_POLICY } from './policy.js';
import { settle } from './settle.js';
import {
  type Call,
  DEFAULT_MAX_RESULT_BYTES,
  IDEMPOTENCY_OPTION_FIELDS,
  type Idempotency,
  type IdempotencyOptions,
  type IdempotentResult,
  type ToolFunction,
  type ToolPolicy,
} from './types.js';
import { createLocalWaiters, createReclaimer } from './wait.js';
import { isWrapped, markWrapped, wrappedTwice } from './wrapped.js';

/** What a value passed as the store most likely is, and the store that takes it. */
function clientHint(value: unknown): string {
  const v = value as Record<string, unknown> | null;
  const has = (name: string) => typeof v?.[name] === 'function';
  if (has('evalsha') || has('sendCommand') || has('hset')) {
    return ' but a Redis client: wrap it, createRedisStore(redis) from @idempotent-tools/store-redis';
  }
  if (has('query') && (typeof v?.idleCount === 'number' || has('connect'))) {
    return ' but a PostgreSQL client: wrap it, createPostgresStore(pool) from @idempotent-tools/store-postgres';
  }
  if (has('prepare') && has('exec')) {
    return ' but a SQLite database: use openSqliteStore(path) from @idempotent-tools/store-sqlite';
  }
  if (has('send') && has('destroy')) {
    return ' but an AWS SDK client: wrap it, createDynamoDbStore({ client, tableName }) from @idempotent-tools/store-dynamodb';
  }
  return ': pass createMemoryStore(), openSqliteStore(path), or a store from a store package';
}

/** A business key that names something: not undefined, null, '', {} or []. */
function identifies(value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (typeof value === 'object') return Object.keys(value).length > 0;
  return true;
}

const describeKey = (value: unknown): string =>
  value === undefined || value === null ? String(value) : JSON.stringify(value);

/**
 * @internal The executor without its vendor calls: `createIdempotency` (../executor.ts) binds
 * `vendorCall` (vendor-calls/ledger.ts) to its `run`.
 */
export function createExecutor(options: IdempotencyOptions): Omit<Idempotency, 'vendorCall'> {
  if (options === null || typeof options !== 'object' || options.store == null) {
    throw new InvalidInputError({
      field: 'store',
      message:
        'createIdempotency needs { store }: e.g. createIdempotency({ store: createMemoryStore() }).',
    });
  }
  const {
    store,
    onEvent,
    exposeArgs = false,
    maxArgsBytes = DEFAULT_MAX_ARGS_BYTES,
    maxResultBytes = DEFAULT_MAX_RESULT_BYTES,
    encryption,
    argsHmacKey,
    ...defaults
  } = options;
  const unknown = unknownOption(options, IDEMPOTENCY_OPTION_FIELDS);
  if (unknown !== undefined) {
    throw new InvalidInputError({
      field: unknown.name,
      message: `createIdempotency: ${unknown.message}`,
    });
  }
  if (store.specificationVersion !== 'v1') {
    throw new InvalidInputError({
      field: 'store',
      message:
        store.specificationVersion === undefined
          ? `createIdempotency: store is not an idempotency store${clientHint(store)}.`
          : `The store implements contract ${String(store.specificationVersion)}; this version of @idempotent-tools/core needs 'v1'. Upgrade the store package.`,
    });
  }
  checkBytes('maxArgsBytes', maxArgsBytes);
  checkBytes('maxResultBytes', maxResultBytes);
  const hash = keyHasher(argsHmacKey);
  const policyFor = createPolicies(defaults);
  const engine: Engine = {
    store,
    codec: createOutcomeCodec(encryption),
    maxResultBytes,
    exposeArgs,
    onEvent,
    openedOutcomes: new WeakMap<IdempotencyRecord, OpenedOutcome>(),
    waiters: createLocalWaiters(),
    reclaim: createReclaimer(store),
    now: () => performance.now(),
    orphans: new Map(),
    staleSince: new Map(),
  };

  function derive<Args>(
    call: Call<Args>,
    policy: { businessKey?: ToolPolicy<Args>['businessKey'] | undefined },
  ): DerivedKey & { argsBytes: number } {
    if (call === null || typeof call !== 'object') {
      throw new InvalidInputError({
        field: 'call',
        message: 'A call is an object { toolName, turnId, scope?, args }.',
      });
    }
    const businessKey =
      policy.businessKey === undefined ? undefined : policy.businessKey(call.args, call);
    if (policy.businessKey !== undefined && !identifies(businessKey)) {
      throw new InvalidInputError({
        field: 'businessKey',
        message: `businessKey returned ${describeKey(businessKey)} for tool ${String(call.toolName)}, which identifies nothing: every such call would share one key. Return a stable identifier (e.g. the email) for every call.`,
      });
    }
    return deriveKeyAndSize(
      {
        toolName: call.toolName,
        turnId: call.turnId,
        scope: call.scope,
        args: call.args,
        businessKey,
      },
      { maxArgsBytes, hash, measure: onEvent !== undefined },
    );
  }

  function keyOf<Args>(
    call: Call<Args>,
    policy: { businessKey?: ToolPolicy<Args>['businessKey'] | undefined } = {},
  ): DerivedKey {
    if (policy === null || typeof policy !== 'object') {
      throw new InvalidInputError({
        field: 'policy',
        message: 'keyOf takes (call, policy?) where policy is an object such as { businessKey }.',
      });
    }
    if (policy.businessKey !== undefined && typeof policy.businessKey !== 'function') {
      throw new InvalidInputError({
        field: 'businessKey',
        message: 'businessKey must be a function of the args, e.g. (args) => args.email.',
      });
    }
    const { key, fingerprint } = derive(call, policy);
    return { key, fingerprint };
  }

  async function run<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    toolPolicy: ToolPolicy<Args, Result> = NO_POLICY as ToolPolicy<Args, Result>,
  ): Promise<IdempotentResult<Result>> {
    if (typeof fn !== 'function') {
      throw new InvalidInputError({
        field: 'fn',
        message: 'The tool function must be a function.',
      });
    }
    const policy = policyFor(toolPolicy);
    const { key, fingerprint, argsBytes } = derive(call, policy);
    const around = runningContext();
    if (around === undefined) {
      return runClaimLoop(new CallRun(engine, call, fn, policy, key, fingerprint, argsBytes));
    }
    // A call made inside a tool (a vendorCall, a nested tool): refused when it is the tool itself
    // (made idempotent twice); its store operations and timers run outside the tool's context,
    // so they are never counted as the tool's requests.
    if (isRunningAround(key, around)) throw wrappedTwice(call.toolName);
    const nested = new CallRun(engine, call, fn, policy, key, fingerprint, argsBytes, around);
    return outsideTools(() => runClaimLoop(nested));
  }

  return {
    store,
    run,
    keyOf,
    checkPolicy: (policy) => {
      policyFor(policy as unknown as ToolPolicy);
    },
    wrap: (toolName, fn, policy) => {
      if (isWrapped(fn)) throw wrappedTwice(toolName);
      return markWrapped((args, call) => {
        if (call === null || typeof call !== 'object') {
          throw new InvalidInputError({
            field: 'call',
            message: `Call the wrapped ${String(toolName)} as fn(args, { turnId, scope? }).`,
          });
        }
        return run({ toolName, turnId: call.turnId, scope: call.scope, args }, fn, policy);
      });
    },
    settle: (key, settlement, operator) =>
      settle(engine, policyFor(NO_POLICY as ToolPolicy).ttl, key, settlement, operator),
  };
}
