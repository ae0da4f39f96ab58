-- Table of @idempotent-tools/store-postgres. Times are milliseconds since the Unix epoch
-- on the database clock; outcome is the executor's serialised result, kept byte-exact.
CREATE TABLE IF NOT EXISTS "public"."idempotency_records" (
  key text COLLATE "C" PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  fingerprint text NOT NULL,
  token text NOT NULL,
  lease_expires_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  created_at bigint NOT NULL,
  completed_at bigint,
  outcome text,
  tool_name text,
  scope text,
  turn_id text,
  waiting boolean NOT NULL DEFAULT false
);

-- Set by a waiter in another process: complete / release send NOTIFY only then (0.1 tables).
ALTER TABLE "public"."idempotency_records" ADD COLUMN IF NOT EXISTS waiting boolean NOT NULL DEFAULT false;

CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at_idx" ON "public"."idempotency_records" (expires_at);
