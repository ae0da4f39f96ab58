/**
 * TEST ONLY: the Worker the tests run in workerd (bundled by `engine.ts`). It exports the real
 * `IdempotencyObject` and, for each request, calls the method named in the JSON body on the
 * real client, `createDurableObjectStore(env.IDEMPOTENCY, options)`, and answers its result or
 * its error as JSON. This HTTP transport exists only so that Node's test runner can drive a
 * store that runs inside workerd; a Worker calls the client directly.
 */
import {
  createDurableObjectStore,
  type DurableObjectStoreOptions,
  IdempotencyObject,
} from '../index.js';

export { IdempotencyObject };

interface Env {
  IDEMPOTENCY: DurableObjectNamespace<IdempotencyObject>;
}

/** One request: which store (a test's own), which method, its arguments. */
export interface Command {
  store: string;
  options?: DurableObjectStoreOptions;
  method: string;
  args?: unknown[];
  /** `waitForChange`: the wait's id, which a `cancel` command names to abort it. */
  waitId?: string;
}

/** The answer: the method's value (absent for undefined), or its error's fields. */
export type Answer =
  | { value?: unknown }
  | { error: { name: string; message: string } & Record<string, unknown> };

// The clients live as long as the isolate, as a Worker's module-level store would: a test's
// `close` reaches the client its waits were made on.
const stores = new Map<string, ReturnType<typeof createDurableObjectStore>>();
const waits = new Map<string, AbortController>();

function storeOf(env: Env, command: Command) {
  let store = stores.get(command.store);
  if (store === undefined) {
    store = createDurableObjectStore(env.IDEMPOTENCY, command.options);
    stores.set(command.store, store);
  }
  return store;
}

async function answer(env: Env, command: Command): Promise<unknown> {
  if (command.method === 'create') {
    // The options are checked here, where a Worker would pass them.
    const store = createDurableObjectStore(env.IDEMPOTENCY, command.options);
    stores.set(command.store, store);
    return {
      name: store.name,
      specificationVersion: store.specificationVersion,
      capabilities: store.capabilities,
    };
  }
  if (command.method === 'cancel') {
    waits.get(command.waitId ?? '')?.abort();
    return undefined;
  }
  const store = storeOf(env, command);
  const args = command.args ?? [];
  if (command.method === 'waitForChange') {
    const cancel = new AbortController();
    const id = command.waitId ?? '';
    waits.set(id, cancel);
    try {
      return await store.waitForChange(args[0] as string, args[1] as number, cancel.signal);
    } finally {
      waits.delete(id);
    }
  }
  if (command.method === 'close') {
    stores.delete(command.store);
    return store.close();
  }
  const method = (store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[
    command.method
  ];
  if (typeof method !== 'function') throw new Error(`no method ${command.method}`);
  return method.apply(store, args);
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const command = (await request.json()) as Command;
    try {
      const value = await answer(env, command);
      return Response.json(value === undefined ? {} : { value });
    } catch (caught) {
      const error = caught as Error & Record<string, unknown>;
      const fields: Record<string, unknown> = {};
      for (const field of ['code', 'reason', 'field', 'option', 'key', 'operation', 'storeName']) {
        if (error?.[field] !== undefined) fields[field] = error[field];
      }
      return Response.json({
        error: { ...fields, name: String(error?.name), message: String(error?.message ?? error) },
      });
    }
  },
} satisfies ExportedHandler<Env>;
