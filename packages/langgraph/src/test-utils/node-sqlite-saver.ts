/**
 * LangGraph's own SqliteSaver (`@langchain/langgraph-checkpoint-sqlite`) on Node's built-in
 * `node:sqlite`: the saver is written for better-sqlite3, whose native build this repo does not
 * run, so it is given the few better-sqlite3 calls it makes (`prepare`, `exec`, `pragma`,
 * `transaction`) over a `DatabaseSync`. The saver's own SQL and serialization run unchanged.
 */
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';

const bind = (params: unknown[]) =>
  params.map((p) => (p === undefined ? null : p)) as SQLInputValue[];

export function openSqliteSaver(path: string): SqliteSaver & { close(): void } {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA busy_timeout = 10000');
  const shim = {
    prepare(sql: string) {
      const statement = db.prepare(sql);
      return {
        run: (...params: unknown[]) => statement.run(...bind(params)),
        get: (...params: unknown[]) => statement.get(...bind(params)),
        all: (...params: unknown[]) => statement.all(...bind(params)),
      };
    },
    exec: (sql: string) => db.exec(sql),
    pragma: (pragma: string) => db.exec(`PRAGMA ${pragma}`),
    transaction:
      <A extends unknown[]>(fn: (...args: A) => void) =>
      (...args: A) => {
        db.exec('BEGIN IMMEDIATE');
        try {
          fn(...args);
          db.exec('COMMIT');
        } catch (error) {
          db.exec('ROLLBACK');
          throw error;
        }
      },
    close: () => db.close(),
  };
  const saver = new SqliteSaver(shim as never);
  return Object.assign(saver, { close: () => db.close() });
}
