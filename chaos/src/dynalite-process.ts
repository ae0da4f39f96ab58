/**
 * dynalite (an in-memory DynamoDB written in Node) in a process of its own, on 127.0.0.1 and a
 * random port, as packages/store-dynamodb/src/test-utils/engine.ts starts it: its own process so
 * that the harness can SIGSTOP it (a store outage) without stopping itself. Sends `{ port }`.
 */
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

const require = createRequire(import.meta.url);
const dynalite = require('dynalite') as (
  options: Record<string, number>,
) => import('node:http').Server;
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
process.on('disconnect', () => process.exit(0));
