import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  type TableDescription,
  type TimeToLiveDescription,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { InvalidInputError, StoreUnavailableError } from '@idempotent-tools/core';
import { A } from './item.js';

/**
 * The `CreateTable` input of the store's table: partition key `id` (string), on-demand billing.
 * The same as `table/table.json` in the package (with `TableName` "idempotency"). Enable TTL on
 * the `ttl` attribute after creating it (`ensureTable` does).
 */
export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: A.id, AttributeType: 'S' }],
    KeySchema: [{ AttributeName: A.id, KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

export interface EnsureTableOptions {
  /**
   * Longest wait for a table being created to become `ACTIVE`, ms.
   * @default 300000
   */
  timeoutMs?: number;
}

export interface EnsureTableResult {
  /** The table was created by this call. */
  created: boolean;
  /**
   * DynamoDB's TTL on the `ttl` attribute: `enabled` (or being enabled), `unsupported` (the
   * engine has no TTL, e.g. dynalite: call `store.purgeExpired()` on a schedule instead), or
   * `other-attribute` (the table's TTL is on another attribute, and a table has one: the
   * store's expired records then stay until `purgeExpired`).
   */
  ttl: 'enabled' | 'unsupported' | 'other-attribute';
}

/**
 * Create the store's table if it does not exist (`tableDefinition`), wait until it is `ACTIVE`,
 * and enable TTL on `ttl` where the engine supports it. Idempotent, safe from many processes at
 * once. An existing table whose key schema is not `id` (string) is refused with
 * `InvalidInputError`. For production, prefer deploying `table/cloudformation.yaml` (needs no
 * `CreateTable` permission at run time).
 */
export async function ensureTable(
  client: DynamoDBClient,
  tableName: string,
  options: EnsureTableOptions = {},
): Promise<EnsureTableResult> {
  const { timeoutMs = 300_000 } = options;
  const deadline = Date.now() + timeoutMs;
  const fail = (what: string, cause: unknown) =>
    new StoreUnavailableError({
      cause,
      storeName: 'dynamodb',
      operation: what,
      message: `ensureTable(${JSON.stringify(tableName)}) failed during ${what}: ${cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)}. Check that DynamoDB is reachable and the caller may DescribeTable, CreateTable, DescribeTimeToLive and UpdateTimeToLive.`,
    });
  let created = false;
  let table = await describe(client, tableName).catch((cause: unknown) => {
    throw fail('DescribeTable', cause);
  });
  if (table === undefined) {
    try {
      await client.send(new CreateTableCommand(tableDefinition(tableName)));
      created = true;
    } catch (cause) {
      // Created by another process meanwhile: wait for it like for our own.
      if ((cause as { name?: unknown }).name !== 'ResourceInUseException') {
        throw fail('CreateTable', cause);
      }
    }
  }
  for (let pauseMs = 50; ; pauseMs = Math.min(pauseMs * 2, 2000)) {
    table = await describe(client, tableName).catch((cause: unknown) => {
      throw fail('DescribeTable', cause);
    });
    if (table?.TableStatus === 'ACTIVE') break;
    if (Date.now() > deadline) {
      throw fail(
        'DescribeTable',
        new Error(`the table is ${table?.TableStatus ?? 'missing'} after ${timeoutMs} ms`),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  const key = table.KeySchema ?? [];
  const type = table.AttributeDefinitions?.find((d) => d.AttributeName === A.id)?.AttributeType;
  if (key.length !== 1 || key[0]?.AttributeName !== A.id || type !== 'S') {
    throw new InvalidInputError({
      field: 'tableName',
      message: `Table ${tableName} exists with another key schema (${JSON.stringify(key)}); the idempotency store needs a partition key "id" of type string and no sort key. Use another table name, or create one from table/table.json.`,
    });
  }
  return { created, ttl: await enableTtl(client, tableName, fail) };
}

async function describe(
  client: DynamoDBClient,
  tableName: string,
): Promise<TableDescription | undefined> {
  try {
    return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  } catch (error) {
    if ((error as { name?: unknown }).name === 'ResourceNotFoundException') return undefined;
    throw error;
  }
}

async function enableTtl(
  client: DynamoDBClient,
  tableName: string,
  fail: (what: string, cause: unknown) => Error,
): Promise<EnsureTableResult['ttl']> {
  const unsupported = (error: unknown) =>
    ['UnknownOperationException', 'UnrecognizedClientException'].includes(
      String((error as { name?: unknown }).name),
    );
  let description: TimeToLiveDescription | undefined;
  try {
    description = (await client.send(new DescribeTimeToLiveCommand({ TableName: tableName })))
      .TimeToLiveDescription;
  } catch (error) {
    if (unsupported(error)) return 'unsupported';
    throw fail('DescribeTimeToLive', error);
  }
  const status = description?.TimeToLiveStatus;
  if (status === 'ENABLED' || status === 'ENABLING') {
    return description?.AttributeName === A.ttl ? 'enabled' : 'other-attribute';
  }
  try {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: A.ttl, Enabled: true },
      }),
    );
    return 'enabled';
  } catch (error) {
    if (unsupported(error)) return 'unsupported';
    // Enabled by another process meanwhile ("TimeToLive is already enabled"), or changing.
    if ((error as { name?: unknown }).name === 'ValidationException') {
      const again = await client
        .send(new DescribeTimeToLiveCommand({ TableName: tableName }))
        .catch(() => undefined);
      const d = again?.TimeToLiveDescription;
      if (d?.TimeToLiveStatus === 'ENABLED' || d?.TimeToLiveStatus === 'ENABLING') {
        return d.AttributeName === A.ttl ? 'enabled' : 'other-attribute';
      }
    }
    throw fail('UpdateTimeToLive', error);
  }
}
