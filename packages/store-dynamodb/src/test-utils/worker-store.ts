/**
 * Store module for the multi-process race and crash workers of `@idempotent-tools/testing`
 * (`runWorkers({ storeModule })`). Reads DYNAMODB_ENDPOINT, IDEM_DYNAMODB_TABLE and
 * IDEM_DYNAMODB_PREFIX from the environment: every worker is a client of the one engine the
 * test started.
 */
import { createDynamoDbStore } from '../dynamodb-store.js';
import { newClient } from './engine.js';

export async function createStore() {
  const client = newClient(process.env.DYNAMODB_ENDPOINT ?? 'http://127.0.0.1:8000', {
    maxAttempts: 3,
  });
  const store = createDynamoDbStore({
    client,
    tableName: process.env.IDEM_DYNAMODB_TABLE ?? 'idempotency',
    prefix: process.env.IDEM_DYNAMODB_PREFIX ?? '',
  });
  return {
    store,
    close: async () => {
      await store.close();
      client.destroy();
    },
  };
}
