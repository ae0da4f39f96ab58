/**
 * The agent process that dies at the worst moment: the vendor charged, the outcome is stored in
 * SQLite, and the process is killed before its reply leaves. Started by demo.ts (step 7).
 */
import {
  createIdempotency,
  type IdempotencyStore,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';
import { chargeCardTool, demoFiles, PaymentVendor } from './demo.js';

const [dir, turnId, args] = process.argv.slice(2) as [string, string, string];
const files = demoFiles(dir);
const store = openSqliteStore(files.database);
// Kill the process right after the outcome is persisted, before anything is returned.
const dying = new Proxy(store, {
  get(target, property) {
    const value = Reflect.get(target, property, target);
    if (property === 'complete') {
      return async (...input: Parameters<IdempotencyStore['complete']>) => {
        const ok = await target.complete(...input);
        process.kill(process.pid, 'SIGKILL');
        return ok;
      };
    }
    return typeof value === 'function' ? value.bind(target) : value;
  },
});
const chargeCard = chargeCardTool(
  createIdempotency({ store: dying }),
  new PaymentVendor(files.ledger),
);
await chargeCard(JSON.parse(args) as Record<string, unknown>, turnId);
console.log('unreachable: the process should have died');
