/**
 * The DynamoDB engine the tests run against: dynalite (an in-memory DynamoDB written in Node),
 * started here on 127.0.0.1 with a random port, or the endpoint in DYNAMODB_ENDPOINT (DynamoDB
 * Local, or real DynamoDB with AWS credentials in the environment).
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import {
  DeleteTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  PutItemCommand,
  ScanCommand,
  type ScanCommandInput,
} from '@aws-sdk/client-dynamodb';
import { uniqueKey } from '@idempotent-tools/testing';
import type { DynamoDbStore } from '../dynamodb-store.js';
import { ensureTable } from '../table.js';

export interface Engine {
  /** `dynalite` (started by the test) or `external` (DYNAMODB_ENDPOINT). */
  kind: 'dynalite' | 'external';
  endpoint: string;
  /** A new client for the engine (every test file makes its own). */
  client(config?: Partial<DynamoDBClientConfig>): DynamoDBClient;
  /** A fresh table (dropped by `stop`). */
  table(label: string): Promise<string>;
  stop(): Promise<void>;
}

type Server = import('node:http').Server;
const require = createRequire(import.meta.url);

/** Start dynalite (or take DYNAMODB_ENDPOINT). Call `stop` in an afterAll. */
export async function startEngine(): Promise<Engine> {
  let server: Server | undefined;
  let endpoint = process.env.DYNAMODB_ENDPOINT;
  if (endpoint === undefined || endpoint === '') {
    const dynalite = require('dynalite') as (options: Record<string, number>) => Server;
    server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
    await new Promise<void>((resolve, reject) => {
      server!.once('error', reject);
      server!.listen(0, '127.0.0.1', () => resolve());
    });
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  const url = endpoint;
  const client = (config: Partial<DynamoDBClientConfig> = {}) => newClient(url, config);
  const admin = client();
  const tables: string[] = [];
  return {
    kind: server === undefined ? 'external' : 'dynalite',
    endpoint: url,
    client,
    async table(label) {
      const name = `idem-test-${label}-${randomUUID().slice(0, 8)}`;
      await ensureTable(admin, name);
      tables.push(name);
      return name;
    },
    async stop() {
      for (const name of tables) {
        await admin.send(new DeleteTableCommand({ TableName: name })).catch(() => {});
      }
      admin.destroy();
      if (server !== undefined) {
        server.closeAllConnections?.();
        await new Promise<void>((resolve) => server!.close(() => resolve()));
      }
    },
  };
}

/** A client for `endpoint`: dummy credentials unless the environment has real ones. */
export function newClient(
  endpoint: string,
  config: Partial<DynamoDBClientConfig> = {},
): DynamoDBClient {
  const base: DynamoDBClientConfig = {
    endpoint,
    region: process.env.AWS_REGION ?? 'us-east-1',
    maxAttempts: 2,
  };
  if (process.env.AWS_ACCESS_KEY_ID === undefined) {
    base.credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
  }
  return new DynamoDBClient({ ...base, ...config });
}

/** The `id` of a key's item. */
export const idOf = (store: DynamoDbStore, key: string): string =>
  store.prefix === '' ? key : `${store.prefix}#${key}`;

/** A prefix no other store of the run uses. */
export const testPrefix = (label: string): string => uniqueKey(label).replaceAll('#', '-');

/** Items under the store's prefix, expired ones not yet deleted included. */
export async function countItems(client: DynamoDBClient, store: DynamoDbStore): Promise<number> {
  let count = 0;
  let start: ScanCommandInput['ExclusiveStartKey'];
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: store.tableName,
        Select: 'COUNT',
        ConsistentRead: true,
        FilterExpression: 'begins_with(#id, :p)',
        ExpressionAttributeNames: { '#id': 'id' },
        ExpressionAttributeValues: { ':p': { S: `${store.prefix}#` } },
        ...(start === undefined ? {} : { ExclusiveStartKey: start }),
      }),
    );
    count += page.Count ?? 0;
    start = page.LastEvaluatedKey;
  } while (start !== undefined);
  return count;
}

/** Write an item under the store's key with the engine's own client (not through the store). */
export async function putRaw(
  client: DynamoDBClient,
  store: DynamoDbStore,
  key: string,
  attributes: Record<string, import('@aws-sdk/client-dynamodb').AttributeValue>,
): Promise<void> {
  await client.send(
    new PutItemCommand({
      TableName: store.tableName,
      Item: { id: { S: idOf(store, key) }, ...attributes },
    }),
  );
}
