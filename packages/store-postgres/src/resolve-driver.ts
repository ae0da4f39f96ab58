/** Which driver a client the store is given takes: pg, postgres.js or PGlite. */
import { InvalidInputError } from '@idempotent-tools/core';
import type { Driver, DriverName } from './driver.js';
import { isListenClient, type PgListenClient, type PgQueryable, pgDriver } from './drivers/pg.js';
import { isPgliteLike, type PgliteLike, pgliteDriver } from './drivers/pglite.js';
import { isPostgresJs, type PostgresJsSql, postgresJsDriver } from './drivers/postgres-js.js';

/** What the store takes: a `pg.Pool` / `pg.Client`, a postgres.js `sql`, or a `PGlite`. */
export type PostgresClient = PgQueryable | PostgresJsSql | PgliteLike;

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
