import { InvalidInputError } from '@idempotent-tools/core';
import { isListenClient, type PgListenClient, type PgQueryable, pgDriver } from './drivers/pg.js';
import { isPgliteLike, type PgliteLike, pgliteDriver } from './drivers/pglite.js';
import { isPostgresJs, type PostgresJsSql, postgresJsDriver } from './drivers/postgres-js.js';

/** The clients the store runs on. */
export type DriverName = 'pg' | 'postgres.js' | 'pglite';

/** What the store takes: a `pg.Pool` / `pg.Client`, a postgres.js `sql`, or a `PGlite`. */
export type PostgresClient = PgQueryable | PostgresJsSql | PgliteLike;

/** One parameterised statement. `name` asks for a prepared statement where the client has them. */
export interface DriverStatement {
  text: string;
  values: unknown[];
  name?: string | undefined;
}

/** The rows of a statement and how many it returned or changed (the command tag's count). */
export interface DriverResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** An active `LISTEN`: `stop()` unlistens (and ends a connection the driver opened for it). */
export interface Subscription {
  stop(): Promise<void>;
}

/**
 * Start listening on `channel`: resolves once `LISTEN` is active. `onLost` is called (at most
 * once) when notifications may have been missed since (the connection failed, or reconnected):
 * the subscription is then over, and the next wait listens anew.
 */
export type Listen = (
  channel: string,
  onPayload: (payload: string) => void,
  onLost: () => void,
) => Promise<Subscription>;

/** The store's view of a client: statements in, rows out, and `LISTEN` when it can. */
export interface Driver {
  readonly name: DriverName;
  query(statement: DriverStatement): Promise<DriverResult>;
  /** Statements without parameters in one simple-protocol message (one implicit transaction). */
  script(text: string): Promise<void>;
  /** Undefined: this client cannot listen (waiters poll). */
  readonly listen: Listen | undefined;
}

/** Which client this is, from its shape (`undefined`: none the store knows). */
export function detectDriver(client: unknown): DriverName | undefined {
  if (isPostgresJs(client)) return 'postgres.js';
  if (isPgliteLike(client)) return 'pglite';
  if (client != null && typeof (client as Partial<PgQueryable>).query === 'function') return 'pg';
  return undefined;
}

const usage = (who: string) =>
  `${who} takes a pg.Pool (or pg.Client), a postgres.js instance (postgres(url)) or a PGlite instance (new PGlite()).`;

/**
 * The driver for `client`: the one `driver` names (the client must have its shape), else the
 * detected one. Throws `InvalidInputError` for anything else.
 */
export function resolveDriver(
  client: unknown,
  options: { driver?: DriverName | undefined; listenClient?: PgListenClient | undefined },
  field = 'pool',
  who = 'createPostgresStore',
): Driver {
  const detected = detectDriver(client);
  const wanted = options.driver ?? detected;
  if (options.driver !== undefined && !['pg', 'postgres.js', 'pglite'].includes(options.driver)) {
    throw new InvalidInputError({
      field: 'driver',
      message: `driver must be 'pg', 'postgres.js' or 'pglite', got ${JSON.stringify(options.driver)}.`,
    });
  }
  if (wanted === undefined || (options.driver !== undefined && detected !== options.driver)) {
    throw new InvalidInputError({
      field: options.driver === undefined ? field : 'driver',
      message:
        options.driver === undefined
          ? usage(who)
          : `driver is '${options.driver}' but the client ${detected === undefined ? 'is none the store knows' : `looks like ${detected}`}. ${usage(who)}`,
    });
  }
  if (options.listenClient !== undefined) {
    if (wanted !== 'pg') {
      throw new InvalidInputError({
        field: 'listenClient',
        message: `listenClient is for pg only: ${wanted} listens on a connection of its own. Remove the option.`,
      });
    }
    if (!isListenClient(options.listenClient)) {
      throw new InvalidInputError({
        field: 'listenClient',
        message: 'listenClient must be a connected pg.Client (with query, on and removeListener).',
      });
    }
  }
  if (wanted === 'postgres.js') return postgresJsDriver(client as PostgresJsSql);
  if (wanted === 'pglite') return pgliteDriver(client as PgliteLike);
  return pgDriver(client as PgQueryable, options.listenClient);
}
