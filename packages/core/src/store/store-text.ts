import { InvalidInputError } from '../errors/index.js';

/**
 * For store authors: refuse a text the engine would not keep as it is (a lone surrogate becomes
 * U+FFFD in SQLite and Redis; PostgreSQL also refuses NUL) with a typed error, instead of storing
 * something else. The executor never sends such texts (key parts are checked, outcomes are JSON);
 * this guards direct use of a store.
 */
export function checkStoreText(
  field: string,
  value: string | undefined,
  options: { allowNul?: boolean } = {},
): void {
  if (value === undefined) return;
  if (!value.isWellFormed() || (options.allowNul === false && value.includes('\u0000'))) {
    throw new InvalidInputError({
      field,
      message: `${field} contains ${value.isWellFormed() ? 'a NUL character' : 'a lone surrogate (malformed UTF-16)'}, which the store cannot keep as it is. Escape it (JSON.stringify does) or remove it.`,
    });
  }
}

/**
 * For store authors: the message of an error that caused a failure, to quote inside a sentence
 * (its trailing full stops dropped: "failed during claim: Connection is closed. Nothing ran").
 */
export function reasonOf(cause: unknown): string {
  const text = cause instanceof Error ? cause.message : String(cause);
  return text.replace(/[.\s]+$/, '');
}
