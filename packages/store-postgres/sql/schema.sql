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
  turn_id text
);

CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at_idx" ON "public"."idempotency_records" (expires_at);
