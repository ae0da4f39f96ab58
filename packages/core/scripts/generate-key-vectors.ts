/**
 * Writes vectors/keys.json: inputs -> keys. Run only when adding vectors
 * (`pnpm tsx scripts/generate-key-vectors.ts`); an existing vector must never change: the test
 * that reads the file is what stops a key from changing by accident.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { deriveKey, type KeyInput } from '../src/keys/derive-key.js';

const inputs: Array<{ name: string; input: KeyInput }> = [
  {
    name: 'simple args',
    input: { toolName: 'charge_card', turnId: 'turn-1', args: { amount: 1999, currency: 'usd' } },
  },
  {
    name: 'same args, other key order',
    input: { toolName: 'charge_card', turnId: 'turn-1', args: { currency: 'usd', amount: 1999 } },
  },
  {
    name: 'other turn',
    input: { toolName: 'charge_card', turnId: 'turn-2', args: { amount: 1999, currency: 'usd' } },
  },
  {
    name: 'with scope',
    input: {
      toolName: 'charge_card',
      turnId: 'turn-1',
      scope: 'tenant-42',
      args: { amount: 1999, currency: 'usd' },
    },
  },
  { name: 'empty args', input: { toolName: 'list_tickets', turnId: 'msg_01J', args: {} } },
  { name: 'null args', input: { toolName: 'ping', turnId: 't', args: null } },
  {
    name: 'nested and arrays',
    input: {
      toolName: 'create_ticket',
      turnId: 'turn-7',
      args: {
        title: 'Printer on fire',
        tags: ['urgent', 'hw'],
        meta: { floor: 3, ok: false, note: null },
      },
    },
  },
  {
    name: 'integer-like keys',
    input: { toolName: 't', turnId: 't', args: { '10': 'a', '2': 'b', '1': 'c', b: 1, a: 2 } },
  },
  {
    name: 'unicode',
    input: {
      toolName: 'send_message',
      turnId: 'tour-é',
      scope: 'ünïcødé',
      args: { text: 'Grüße 👋 \u20ac \u2028', to: '日本' },
    },
  },
  {
    name: 'numbers',
    input: {
      toolName: 'n',
      turnId: 't',
      args: { a: 1e21, b: 0.1, c: -0, d: 1e-7, e: 123456789012345680000 },
    },
  },
  {
    name: 'separator characters in parts',
    input: { toolName: 'a:b', turnId: 'c|d', scope: '{e}', args: { '"': '\\' } },
  },
  {
    name: 'business key',
    input: {
      toolName: 'create_customer',
      args: { email: 'ada@example.com', name: 'Ada' },
      businessKey: 'ada@example.com',
    },
  },
  {
    name: 'business key, other args (same key, other fingerprint)',
    input: {
      toolName: 'create_customer',
      turnId: 'ignored',
      args: { email: 'ada@example.com', name: 'Ada L.' },
      businessKey: 'ada@example.com',
    },
  },
  {
    name: 'business key, scoped',
    input: {
      toolName: 'create_customer',
      scope: 'tenant-42',
      args: { email: 'ada@example.com' },
      businessKey: 'ada@example.com',
    },
  },
  {
    name: 'structured business key',
    input: { toolName: 'upsert', args: { x: 1 }, businessKey: { system: 'crm', id: 42 } },
  },
];

const path = new URL('../vectors/keys.json', import.meta.url);
let existing: Record<string, { key: string; fingerprint: string }> = {};
try {
  const old = JSON.parse(readFileSync(path, 'utf8')) as {
    vectors: Array<{ name: string; key: string; fingerprint: string }>;
  };
  existing = Object.fromEntries(old.vectors.map((v) => [v.name, v]));
} catch {}
const vectors = inputs.map(({ name, input }) => {
  const derived = deriveKey(input);
  const old = existing[name];
  if (old !== undefined && (old.key !== derived.key || old.fingerprint !== derived.fingerprint)) {
    throw new Error(`vector "${name}" would change: keys must stay stable`);
  }
  return { name, input, ...derived };
});
writeFileSync(
  path,
  `${JSON.stringify({ description: 'idempotent-tools key vectors (format v1): deriveKey(input) -> { key, fingerprint }', vectors }, null, 2)}\n`,
);
console.log(`wrote ${vectors.length} vectors`);
