/**
 * What the client and `IdempotencyObject` say to each other over Workers RPC: the arguments of
 * the store contract, and answers wrapped so that a row the store did not write, or an object
 * without its SQLite storage, reaches the client as data (RPC keeps only the message of an
 * error, not its class or fields).
 */
import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  InspectionState,
  ListedRecord,
  StatsFilter,
  StoreStats,
  TakeoverInput,
} from '@idempotent-tools/core';

/** An answer of the object. */
export type Reply<T> =
  /** The operation's answer. */
  | { value: T }
  /** The row under `key` is not one this store wrote (`problem` says what is wrong). */
  | { corrupt: { key: string; problem: string } }
  /** The object cannot keep records (no SQLite storage: a class not under `new_sqlite_classes`). */
  | { misconfigured: string };

/** One shard's part of a `list`: the filter, the page size left, and the key to resume after. */
export interface ShardListFilter extends StatsFilter {
  state?: InspectionState;
  limit: number;
  after?: string;
}

/**
 * One shard's page: its records in key order, whether it holds more after them, and the last
 * key it read (a row it cannot read is read, not listed: the next page resumes after it).
 */
export interface ShardPage {
  records: ListedRecord[];
  more: boolean;
  last: string | null;
}

/** The RPC methods of `IdempotencyObject`, as the client calls them on a stub. */
export interface ObjectRpc {
  claim(input: ClaimInput): Promise<Reply<ClaimResult>>;
  complete(input: CompleteInput): Promise<Reply<boolean>>;
  release(key: string, token: string): Promise<Reply<boolean>>;
  renew(key: string, token: string, leaseMs: number): Promise<Reply<boolean>>;
  takeover(input: TakeoverInput): Promise<Reply<boolean>>;
  get(key: string): Promise<Reply<IdempotencyRecord | null>>;
  purgeExpired(): Promise<Reply<number>>;
  list(filter: ShardListFilter): Promise<Reply<ShardPage>>;
  stats(filter: StatsFilter): Promise<Reply<StoreStats>>;
  waitForChange(key: string, timeoutMs: number, waitId: string): Promise<void>;
  cancelWait(waitId: string): Promise<void>;
}
