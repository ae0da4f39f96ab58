/** What the store needs of a PostgreSQL client, whichever client it is (types only). */
export type DriverName = 'pg' | 'postgres.js' | 'pglite';

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
