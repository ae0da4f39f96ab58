import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  type ScanCommandInput,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  checkListFilter,
  checkStatsFilter,
  checkStoreText,
  checkStoreTimeout,
  countRecord,
  decodeCursor,
  emptyStats,
  encodeCursor,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
  matchesFilter,
  RecordIntegrityError,
  type RecordPage,
  reasonOf,
  type StatsFilter,
  type StoreCapabilities,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
  withDeadline,
} from '@idempotent-tools/core';
import { checkClock, checkWholeNumber } from '@idempotent-tools/core/store-kit';
import {
  A,
  copyMeta,
  type Item,
  metaAttributes,
  N,
  names,
  S,
  toRecord,
  ttlSeconds,
} from './item.js';
import { type Look, Poller } from './poller.js';

export interface DynamoDbStoreOptions {
  /**
   * Your `DynamoDBClient` from `@aws-sdk/client-dynamodb` (v3). The store never closes it. Its own
   * retries (`maxAttempts`) are safe: every operation of the store may be sent again.
   */
  client: DynamoDBClient;
  /**
   * The table: partition key `id` (string), nothing else required (`table/table.json`,
   * `table/cloudformation.yaml`, or `ensureTable(client, tableName)`). 3 to 255 characters of
   * `a-z A-Z 0-9 _ . -`.
   */
  tableName: string;
  /**
   * Records live at `id = prefix + '#' + key` (with no prefix: `id = key`). Lets several apps or
   * environments share one table (single-table designs); `list`, `stats` and `purgeExpired`
   * then only see items whose `id` starts with `prefix#`. Up to 100 characters without `#`
   * (so no prefix can reach into another's items); empty: the store owns the whole table, and
   * must not share it with prefixed stores.
   * @default ''
   */
  prefix?: string;
  /**
   * The store's clock, ms since the epoch. DynamoDB has no server clock usable in a condition,
   * so leases and expiry are decided by the clock of the process that sends each request: keep
   * the clocks of every process sharing the table synchronised (NTP; Lambda and EC2 are), far
   * closer than a tenth of your shortest lease. Tests inject a virtual clock here.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Longest interval between two looks of a waiter (`waitForChange`): a waiter polls the record
   * with a consistent `GetItem`, 20 ms doubling up to this. DynamoDB has no push channel; this
   * bounds how late a waiter learns that a duplicate finished, and what waiting costs (one read
   * per interval per waited key and process, whatever the number of waiters).
   * @default 500
   */
  maxPollMs?: number;
  /**
   * Longest one store operation may take, in ms, whatever the client's own retries
   * (`maxAttempts` with back-off): then it fails with `StoreUnavailableError`. The request may
   * still land later, which every operation allows for (each is safe to send again).
   * @default 5000
   */
  timeoutMs?: number;
}

/** DynamoDB's item limit is 400 KB; the rest of a finished record is well under this margin. */
const MAX_OUTCOME_BYTES = 400 * 1024 - 8 * 1024;
const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
const FIRST_POLL_MS = 20;
/** The attributes a write of a running record's lease (takeover, renew) names. */
const LEASE_ATTRIBUTES = [
  'token',
  'state',
  'expires',
  'lease',
  'keepMs',
  'keepSeconds',
  'ttl',
] as const;
/** Claims that found the record gone between the write and the read, before giving up. */
const CLAIM_ATTEMPTS = 8;

/** `:name` values of an expression. */
type Values = Record<string, ReturnType<typeof S>>;

/**
 * The DynamoDB store (AWS SDK v3): one conditional write per operation. A claim is one
 * `PutItem` (`attribute_not_exists(id) OR expiresAt <= :now`); when the condition fails,
 * DynamoDB returns the record in the error (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), so a
 * replay is one request and a fresh call two (claim, complete). On engines that do not return it
 * (dynalite), one consistent `GetItem` follows the failed condition.
 *
 * ```ts
 * const store = createDynamoDbStore({ client: new DynamoDBClient({}), tableName: 'idempotency' });
 * const idempotency = createIdempotency({ store, maxResultBytes: 350_000 });
 * ```
 */
export function createDynamoDbStore(options: DynamoDbStoreOptions): DynamoDbStore {
  return new DynamoDbStore(options);
}

export class DynamoDbStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'dynamodb';
  /**
   * `notifiesChanges`: waiters are woken by the store's own poll (see `maxPollMs`), so the
   * executor does not re-claim on a timer. `durable`: DynamoDB writes are durable once answered.
   */
  readonly capabilities: StoreCapabilities = {
    notifiesChanges: true,
    durable: true,
    maxOutcomeBytes: MAX_OUTCOME_BYTES,
  };
  readonly tableName: string;
  readonly prefix: string;

  readonly #client: DynamoDBClient;
  readonly #now: () => number;
  /** What every `id` of this store starts with: `prefix#`, or nothing. */
  readonly #idPrefix: string;
  readonly #poller: Poller;

  constructor(options: DynamoDbStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidInputError({
        field: 'options',
        message:
          "createDynamoDbStore takes an options object: createDynamoDbStore({ client: new DynamoDBClient({}), tableName: 'idempotency' }).",
      });
    }
    const { client, tableName, prefix = '', maxPollMs = 500 } = options;
    if (client == null || typeof (client as { send?: unknown }).send !== 'function') {
      throw new InvalidInputError({
        field: 'client',
        message:
          "createDynamoDbStore needs a DynamoDBClient from @aws-sdk/client-dynamodb: createDynamoDbStore({ client: new DynamoDBClient({}), tableName: 'idempotency' }).",
      });
    }
    if (typeof tableName !== 'string' || !TABLE_NAME.test(tableName)) {
      throw new InvalidInputError({
        field: 'tableName',
        message: `tableName must be a DynamoDB table name (3 to 255 characters of a-z, A-Z, 0-9, _ . -), got ${JSON.stringify(tableName)}.`,
      });
    }
    if (
      typeof prefix !== 'string' ||
      prefix.length > 100 ||
      prefix.includes('#') ||
      !prefix.isWellFormed()
    ) {
      throw new InvalidInputError({
        field: 'prefix',
        message: `prefix must be a string of at most 100 characters without # (the store puts # between prefix and key), got ${JSON.stringify(prefix)}.`,
      });
    }
    const now = checkClock(options.now);
    checkWholeNumber('maxPollMs', maxPollMs, 1);
    const timeoutMs = checkStoreTimeout('createDynamoDbStore', options.timeoutMs);
    // Every request of the store, bounded by its deadline: the late reply is dropped and the
    // request aborted (the SDK stops retrying it).
    this.#client = {
      send: (command: Parameters<DynamoDBClient['send']>[0]) => {
        const abort = new AbortController();
        return withDeadline(
          client.send(command as never, { abortSignal: abort.signal }),
          timeoutMs,
          () => {
            abort.abort();
            return new Error(`no answer within ${timeoutMs} ms (timeoutMs)`);
          },
        );
      },
    } as unknown as DynamoDBClient;
    this.tableName = tableName;
    this.prefix = prefix;
    this.#idPrefix = prefix === '' ? '' : `${prefix}#`;
    this.#now = now;
    this.#poller = new Poller((key) => this.#look(key), FIRST_POLL_MS, maxPollMs);
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    const { key, fingerprint, token, leaseMs, ttlMs, meta } = input;
    this.#checkKey(key);
    checkStoreText('fingerprint', fingerprint);
    checkStoreText('token', token);
    checkStoreText('meta.toolName', meta?.toolName);
    checkStoreText('meta.scope', meta?.scope);
    checkStoreText('meta.turnId', meta?.turnId);
    for (let attempt = 1; ; attempt++) {
      const now = this.#now();
      const leaseExpiresAt = now + leaseMs;
      const expiresAt = now + Math.max(ttlMs, leaseMs);
      const keepMs = expiresAt - leaseExpiresAt;
      const item: Item = {
        [A.id]: S(this.#id(key)),
        [A.state]: S('in_progress'),
        [A.fingerprint]: S(fingerprint),
        [A.token]: S(token),
        [A.lease]: N(leaseExpiresAt),
        [A.expires]: N(expiresAt),
        [A.created]: N(now),
        [A.keepMs]: N(keepMs),
        [A.keepSeconds]: N(Math.ceil(keepMs / 1000)),
        [A.ttl]: N(ttlSeconds(expiresAt)),
        ...metaAttributes(meta),
      };
      let found: Item | undefined;
      try {
        await this.#client.send(
          new PutItemCommand({
            TableName: this.tableName,
            Item: item,
            ConditionExpression: 'attribute_not_exists(#id) OR #expires <= :now',
            ExpressionAttributeNames: names('id', 'expires'),
            ExpressionAttributeValues: { ':now': N(now) },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        );
        const record: IdempotencyRecord = {
          key,
          state: 'in_progress',
          fingerprint,
          token,
          leaseExpiresAt,
          expiresAt,
          createdAt: now,
        };
        const stored = meta === undefined ? undefined : copyMeta(meta);
        if (stored !== undefined) record.meta = stored;
        return { status: 'acquired', token, record };
      } catch (error) {
        found = await this.#heldItem('claim', key, error);
      }
      const record = found === undefined ? undefined : this.#decode(key, found);
      if (record === undefined || record.expiresAt <= now) {
        // Gone (released or expired) between the write and the read: claim again.
        if (attempt < CLAIM_ATTEMPTS) continue;
        throw this.#unavailable(
          'claim',
          key,
          new Error(`the record changed under ${CLAIM_ATTEMPTS} claims in a row`),
        );
      }
      if (record.fingerprint !== fingerprint) return { status: 'drift', record };
      if (record.state !== 'in_progress') return { status: 'completed', record };
      if (record.token !== token) {
        return record.leaseExpiresAt <= now
          ? { status: 'stale', record }
          : { status: 'in_progress', record };
      }
      // This attempt's own claim, sent again (the reply of the first was lost): it owns the
      // record. A lease that ran out meanwhile is renewed first, atomically against a takeover.
      if (record.leaseExpiresAt > now) return { status: 'acquired', token, record };
      const renewed = await this.#renewLease(key, token, leaseMs, now, fingerprint);
      if (renewed !== undefined) return { status: 'acquired', token, record: renewed };
      // Taken over (or finished) meanwhile: claim again, which reports what is there now.
    }
  }

  async complete(input: CompleteInput): Promise<boolean> {
    const { key, token, state, outcome, ttlMs } = input;
    this.#checkKey(key);
    checkStoreText('outcome', outcome);
    const outcomeBytes = Buffer.byteLength(outcome);
    if (outcomeBytes > MAX_OUTCOME_BYTES) {
      throw new InvalidInputError({
        field: 'outcome',
        key,
        message: `The outcome is ${outcomeBytes} bytes; a DynamoDB item holds at most 400 KB, so this store keeps outcomes up to ${MAX_OUTCOME_BYTES} bytes. Set maxResultBytes: ${MAX_OUTCOME_BYTES} (or less) on createIdempotency so a tool's result is checked before it is returned, or return a reference to the data instead of the data.`,
      });
    }
    const now = this.#now();
    const expiresAt = now + ttlMs;
    const update = {
      ConditionExpression: '#token = :token AND #state = :running AND #expires > :now',
      UpdateExpression:
        'SET #state = :state, #outcome = :outcome, #outcomeBytes = :bytes, #completed = :now, #expires = :expires, #ttl = :ttl REMOVE #keepMs, #keepSeconds',
      ExpressionAttributeNames: names(
        'token',
        'state',
        'expires',
        'outcome',
        'outcomeBytes',
        'completed',
        'ttl',
        'keepMs',
        'keepSeconds',
      ),
      ExpressionAttributeValues: {
        ':token': S(token),
        ':running': S('in_progress'),
        ':now': N(now),
        ':state': S(state),
        ':outcome': S(outcome),
        ':bytes': N(outcomeBytes),
        ':expires': N(expiresAt),
        ':ttl': N(ttlSeconds(expiresAt)),
      },
    };
    // Sent again (its reply was lost): the record is finished by this token, as asked.
    const done = (record: IdempotencyRecord) =>
      record.token === token &&
      record.state === state &&
      record.outcome === outcome &&
      record.expiresAt > now;
    return this.#fencedUpdate('complete', key, update, done);
  }

  async release(key: string, token: string): Promise<boolean> {
    this.#checkKey(key);
    try {
      await this.#client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: { [A.id]: S(this.#id(key)) },
          ConditionExpression: '#token = :token AND #state = :running AND #expires > :now',
          ExpressionAttributeNames: names('token', 'state', 'expires'),
          ExpressionAttributeValues: {
            ':token': S(token),
            ':running': S('in_progress'),
            ':now': N(this.#now()),
          },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw this.#fail('release', key, error);
    }
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.#checkKey(key);
    return (await this.#renewLease(key, token, leaseMs, this.#now())) !== undefined;
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    const { key, staleToken, token, leaseMs, ttlMs } = input;
    this.#checkKey(key);
    checkStoreText('token', token);
    const now = this.#now();
    const leaseExpiresAt = now + leaseMs;
    const expiresAt = now + Math.max(ttlMs, leaseMs);
    const keepMs = expiresAt - leaseExpiresAt;
    const update = {
      ConditionExpression:
        '#token = :stale AND #state = :running AND #expires > :now AND #lease <= :now',
      UpdateExpression:
        'SET #token = :token, #lease = :lease, #expires = :expires, #keepMs = :keepMs, #keepSeconds = :keepSeconds, #ttl = :ttl',
      ExpressionAttributeNames: names(...LEASE_ATTRIBUTES),
      ExpressionAttributeValues: {
        ':stale': S(staleToken),
        ':running': S('in_progress'),
        ':now': N(now),
        ':token': S(token),
        ':lease': N(leaseExpiresAt),
        ':expires': N(expiresAt),
        ':keepMs': N(keepMs),
        ':keepSeconds': N(Math.ceil(keepMs / 1000)),
        ':ttl': N(ttlSeconds(expiresAt)),
      },
    };
    // Sent again by the new owner (its reply was lost): the record is running under `token`.
    const taken = (record: IdempotencyRecord) =>
      record.state === 'in_progress' &&
      record.token === token &&
      token !== staleToken &&
      record.expiresAt > now;
    return this.#fencedUpdate('takeover', key, update, taken);
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    this.#checkKey(key);
    const item = await this.#read('get', key);
    if (item === undefined) return undefined;
    const record = this.#decode(key, item);
    return record.expiresAt > this.#now() ? record : undefined;
  }

  /**
   * Resolves when the record at `key` is finished, or gone, claimed or taken over since the
   * first look, or after `timeoutMs`. DynamoDB cannot push: one poll loop per key and store (a
   * consistent `GetItem` every 20 ms doubling to `maxPollMs`) serves every waiter of the key.
   */
  waitForChange(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.#poller.wait(key, timeoutMs, signal);
  }

  /**
   * Delete expired records now. Not needed on DynamoDB with TTL enabled on `ttl` (it deletes
   * expired items itself, late: within days; the store ignores them until then). For engines
   * without TTL (dynalite, DynamoDB Local). Cost: a `Scan` of the table (or of the items under
   * the prefix, read through the filter) plus one conditional `DeleteItem` per expired record.
   */
  async purgeExpired(): Promise<number> {
    try {
      let removed = 0;
      const now = this.#now();
      for await (const items of this.#scan({
        ProjectionExpression: '#id',
        filter: '#expires <= :now',
        names: names('expires'),
        values: { ':now': N(now) },
      })) {
        const results = await Promise.all(
          items.map(async (item) => {
            try {
              await this.#client.send(
                new DeleteItemCommand({
                  TableName: this.tableName,
                  Key: { [A.id]: item[A.id]! },
                  ConditionExpression: '#expires <= :now',
                  ExpressionAttributeNames: names('expires'),
                  ExpressionAttributeValues: { ':now': N(now) },
                }),
              );
              return 1;
            } catch (error) {
              if (isConditionFailure(error)) return 0; // claimed again meanwhile
              throw error;
            }
          }),
        );
        for (const n of results) removed += n;
      }
      return removed;
    } catch (cause) {
      throw this.#fail('purgeExpired', undefined, cause);
    }
  }

  /**
   * Inspection, admin only: a `Scan` of the table (only items whose `id` starts with the prefix
   * pass its filter), without outcomes, filtered in the client. **O(items in the table)** per
   * full listing, whatever the filter: never call it on a hot path. Order is DynamoDB's (by
   * hash); the cursor is the `id` of the last record returned.
   */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    const start =
      checked.cursor === undefined ? undefined : decodeCursor(checked.cursor, this.#toCursor);
    try {
      const now = this.#now();
      const records: ListedRecord[] = [];
      for await (const items of this.#scan({ exclusiveStart: start, listing: true })) {
        for (const item of items) {
          const record = this.#listed(item, now);
          if (record === undefined || !matchesFilter(record, checked, now)) continue;
          records.push(record);
          if (records.length === checked.limit) {
            return { records, cursor: encodeCursor({ id: item[A.id]!.S }) };
          }
        }
      }
      return { records };
    } catch (cause) {
      throw this.#fail('list', undefined, cause);
    }
  }

  /** Inspection, admin only: live records by state. **O(items in the table)** (`Scan`). */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    try {
      const now = this.#now();
      const stats = emptyStats(now);
      for await (const items of this.#scan({ listing: true })) {
        for (const item of items) {
          const record = this.#listed(item, now);
          if (record !== undefined && matchesFilter(record, checked, now)) {
            countRecord(stats, record.inspectionState);
          }
        }
      }
      return stats;
    } catch (cause) {
      throw this.#fail('stats', undefined, cause);
    }
  }

  /** Wake pending waiters and stop polling. The client is yours: it stays open. */
  async close(): Promise<void> {
    this.#poller.close();
  }

  // ---- internals ----

  #id(key: string): string {
    return `${this.#idPrefix}${key}`;
  }

  #checkKey(key: string): void {
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidInputError({
        field: 'key',
        message: `key must be a non-empty string, got ${JSON.stringify(key)}.`,
      });
    }
    checkStoreText('key', key);
  }

  readonly #toCursor = (value: unknown): string | undefined => {
    const id = (value as { id?: unknown } | null)?.id;
    return typeof id === 'string' && id.startsWith(this.#idPrefix) ? id : undefined;
  };

  /**
   * Renew the lease of `token`'s running record (also the own-token claim of a record whose
   * lease ran out). Returns the renewed record, or undefined when the token does not own a live
   * running record (with `fingerprint`, when given).
   */
  async #renewLease(
    key: string,
    token: string,
    leaseMs: number,
    now: number,
    fingerprint?: string,
  ): Promise<IdempotencyRecord | undefined> {
    const leaseExpiresAt = now + leaseMs;
    const values: Values = {
      ':token': S(token),
      ':running': S('in_progress'),
      ':now': N(now),
      ':lease': N(leaseExpiresAt),
      ':leaseSeconds': N(Math.ceil(leaseExpiresAt / 1000)),
    };
    let condition =
      '#token = :token AND #state = :running AND #expires > :now AND attribute_exists(#keepMs) AND attribute_exists(#keepSeconds)';
    const attributeNames = names(...LEASE_ATTRIBUTES);
    if (fingerprint !== undefined) {
      // The own-token claim: only if nobody renewed it meanwhile, same args.
      condition += ' AND #fingerprint = :fingerprint AND #lease <= :now';
      values[':fingerprint'] = S(fingerprint);
      attributeNames['#fingerprint'] = A.fingerprint;
    }
    try {
      const reply = await this.#client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { [A.id]: S(this.#id(key)) },
          ConditionExpression: condition,
          UpdateExpression:
            'SET #lease = :lease, #expires = :lease + #keepMs, #ttl = :leaseSeconds + #keepSeconds',
          ExpressionAttributeNames: attributeNames,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
        }),
      );
      return reply.Attributes === undefined ? undefined : this.#decode(key, reply.Attributes);
    } catch (error) {
      if (isConditionFailure(error)) return undefined;
      throw this.#fail(fingerprint === undefined ? 'renew' : 'claim', key, error);
    }
  }

  /**
   * A conditional `UpdateItem` of `key`'s record: true when its condition held; when it failed,
   * whether the record as it stands is what this update made it (`again`: the update was sent
   * again, its reply lost).
   */
  async #fencedUpdate(
    what: string,
    key: string,
    update: Pick<
      ConstructorParameters<typeof UpdateItemCommand>[0],
      | 'ConditionExpression'
      | 'UpdateExpression'
      | 'ExpressionAttributeNames'
      | 'ExpressionAttributeValues'
    >,
    again: (record: IdempotencyRecord) => boolean,
  ): Promise<boolean> {
    try {
      await this.#client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { [A.id]: S(this.#id(key)) },
          ...update,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return true;
    } catch (error) {
      const record = this.#tryDecode(key, await this.#heldItem(what, key, error));
      return record !== undefined && again(record);
    }
  }

  /**
   * After a write whose condition failed: the item that failed it, from the error
   * (`ReturnValuesOnConditionCheckFailure`), else (an engine that does not return it) from one
   * consistent read. Any other error is rethrown as the store's error.
   */
  async #heldItem(what: string, key: string, error: unknown): Promise<Item | undefined> {
    if (!isConditionFailure(error)) throw this.#fail(what, key, error);
    const item = (error as { Item?: Item }).Item;
    if (item !== undefined) return item;
    return this.#read(what, key);
  }

  async #read(what: string, key: string): Promise<Item | undefined> {
    try {
      const reply = await this.#client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: { [A.id]: S(this.#id(key)) },
          ConsistentRead: true,
        }),
      );
      return reply.Item;
    } catch (cause) {
      throw this.#fail(what, key, cause);
    }
  }

  /** One look of a waiter: finished, or the live record's token and state. */
  async #look(key: string): Promise<Look> {
    const item = await this.#read('waitForChange', key);
    const record = this.#tryDecode(key, item, false);
    if (record === undefined || record.expiresAt <= this.#now()) {
      return { finished: false, signature: item === undefined ? '' : 'unreadable' };
    }
    if (record.state !== 'in_progress') return { finished: true };
    return { finished: false, signature: `${record.token}\u0000${record.createdAt}` };
  }

  /** Scan this store's items, a page at a time. */
  async *#scan(options: {
    ProjectionExpression?: string;
    filter?: string;
    names?: Record<string, string>;
    values?: Values;
    exclusiveStart?: string | undefined;
    listing?: boolean;
  }): AsyncGenerator<Item[]> {
    const filters: string[] = [];
    const attributeNames: Record<string, string> = { ...options.names };
    const values: Values = { ...options.values };
    if (this.prefix !== '') {
      filters.push('begins_with(#id, :prefix)');
      attributeNames['#id'] = A.id;
      values[':prefix'] = S(this.#idPrefix);
    }
    if (options.filter !== undefined) filters.push(options.filter);
    let projection = options.ProjectionExpression;
    if (projection === '#id') attributeNames['#id'] = A.id;
    if (options.listing === true) {
      // Everything but the outcome, which may be large (list reports its size instead).
      const listed = [
        'id',
        'state',
        'fingerprint',
        'token',
        'lease',
        'expires',
        'created',
        'completed',
        'outcomeBytes',
        'toolName',
        'scope',
        'turnId',
      ] as const;
      projection = listed.map((k) => `#${k}`).join(', ');
      Object.assign(attributeNames, names(...listed));
    }
    let start: Item | undefined =
      options.exclusiveStart === undefined ? undefined : { [A.id]: S(options.exclusiveStart) };
    do {
      const input: ScanCommandInput = { TableName: this.tableName, ConsistentRead: true };
      if (projection !== undefined) input.ProjectionExpression = projection;
      if (filters.length > 0) input.FilterExpression = filters.join(' AND ');
      if (Object.keys(attributeNames).length > 0) input.ExpressionAttributeNames = attributeNames;
      if (Object.keys(values).length > 0) input.ExpressionAttributeValues = values;
      if (start !== undefined) input.ExclusiveStartKey = start;
      const page = await this.#client.send(new ScanCommand(input));
      if ((page.Items ?? []).length > 0) yield page.Items!;
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
  }

  /** A scanned item as `list` reports it; undefined when expired or not a record of ours. */
  #listed(item: Item, now: number): ListedRecord | undefined {
    const id = item[A.id]?.S;
    if (id === undefined || !id.startsWith(this.#idPrefix)) return undefined;
    let record: IdempotencyRecord;
    try {
      record = toRecord(id.slice(this.#idPrefix.length), item, false);
    } catch {
      return undefined;
    }
    if (!(record.expiresAt > now)) return undefined;
    const listed: ListedRecord = { ...record, inspectionState: inspectionStateOf(record, now) };
    if (record.state !== 'in_progress') {
      const bytes = Number(item[A.outcomeBytes]?.N);
      if (Number.isSafeInteger(bytes)) listed.outcomeBytes = bytes;
    }
    return listed;
  }

  #decode(key: string, item: Item, withOutcome = true): IdempotencyRecord {
    try {
      return toRecord(key, item, withOutcome);
    } catch (cause) {
      throw this.#corrupt(key, cause);
    }
  }

  #tryDecode(key: string, item: Item | undefined, withOutcome = true) {
    if (item === undefined) return undefined;
    try {
      return toRecord(key, item, withOutcome);
    } catch {
      return undefined;
    }
  }

  /**
   * The item under a record's key is not a record this store wrote. DynamoDB answered, so this
   * is no outage (never `StoreUnavailableError`, which `onStoreUnavailable: 'fail-open'` would
   * run the tool unguarded on): the call fails, nothing runs, until someone looks at the item.
   */
  #corrupt(key: string, cause: unknown): RecordIntegrityError {
    const id = this.#id(key);
    const reason = reasonOf(cause);
    return new RecordIntegrityError({
      key,
      cause,
      reason: 'corrupt',
      message: `The DynamoDB idempotency store found an item at id ${JSON.stringify(id)} in table ${this.tableName} that is not a record of this store (${reason}). It was not replayed and the tool did not run. Inspect the item and delete it, then retry the call; check that nothing else writes to the table under the store's prefix ${JSON.stringify(this.prefix)}.`,
    });
  }

  /** The error an operation throws for a failure of DynamoDB or of the request. */
  #fail(what: string, key: string | undefined, cause: unknown): Error {
    if (InvalidInputError.isInstance(cause) || RecordIntegrityError.isInstance(cause)) return cause;
    const name = (cause as { name?: unknown } | null)?.name;
    const reason = reasonOf(cause);
    if (name === 'ValidationException') {
      // DynamoDB refused the request itself: retrying cannot help, and running the tool
      // unguarded (fail-open) must not follow.
      return new InvalidInputError({
        field: what === 'complete' ? 'outcome' : 'key',
        key,
        cause,
        message: `DynamoDB refused the ${what} of the idempotency store (table ${this.tableName}): ${reason}. Nothing ran. Check that the table's partition key is the string attribute "id" and nothing else (table/table.json), and that keys and outcomes fit DynamoDB's limits (2048-byte keys, 400 KB items).`,
      });
    }
    return this.#unavailable(what, key, cause);
  }

  #unavailable(what: string, key: string | undefined, cause: unknown): StoreUnavailableError {
    const name = (cause as { name?: unknown } | null)?.name;
    const reason = cause instanceof Error ? `${String(name)}: ${cause.message}` : String(cause);
    const hint =
      name === 'ResourceNotFoundException'
        ? ` Create the table first: ensureTable(client, ${JSON.stringify(this.tableName)}), or deploy table/cloudformation.yaml from the package.`
        : name === 'AccessDeniedException'
          ? ' Grant the caller dynamodb:GetItem, PutItem, UpdateItem, DeleteItem (and Scan for list, stats, purgeExpired) on the table.'
          : ' Check that DynamoDB is reachable and the table exists, then retry the same call.';
    return new StoreUnavailableError({
      key,
      cause,
      storeName: this.name,
      operation: what,
      message: `The DynamoDB idempotency store failed during ${what} on table ${this.tableName}: ${reason}. Nothing ran.${hint}`,
    });
  }
}

function isConditionFailure(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === 'ConditionalCheckFailedException';
}
