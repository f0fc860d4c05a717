-- 0002_audit_usage.sql — the audit chain and usage records (DESIGN §5–7).
-- Same portable subset as 0001 (TEXT, BIGINT, INTEGER,
-- DOUBLE PRECISION, plain keys and indexes).
--
-- tenant_id is on every row so PostgreSQL's row-level security can filter
-- them like any tenant table.  Tenant 0 means "no tenant" (an auth failure,
-- a system action): tenant ids start at 1, so it never matches a real one.
-- Hence no REFERENCES tenants (id): an audit event outlives anything.

-- One row per event; seq is assigned inside the append transaction as
-- MAX(seq) + 1 and hash chains each row to the previous (docs/audit.md).
CREATE TABLE audit_events (
  seq           BIGINT PRIMARY KEY,
  time_ms       BIGINT NOT NULL,
  tenant_id     BIGINT NOT NULL,
  actor         TEXT NOT NULL DEFAULT '',
  action        TEXT NOT NULL,
  target        TEXT NOT NULL DEFAULT '',
  outcome       TEXT NOT NULL DEFAULT '',
  details_json  TEXT NOT NULL DEFAULT '{}',
  prev_hash     TEXT NOT NULL,
  hash          TEXT NOT NULL
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, seq);
CREATE INDEX audit_events_action ON audit_events (action, seq);

-- One row per exec / execution.  The row is also the FinOps outbox entry:
-- delivery is 'pending' until the endpoint acknowledged it ('delivered'),
-- or 'none' when no endpoint was configured when it was recorded.
CREATE TABLE usage_records (
  id                 TEXT PRIMARY KEY,
  tenant_id          BIGINT NOT NULL,
  tenant_name        TEXT NOT NULL DEFAULT '',
  kind               TEXT NOT NULL,
  source_id          TEXT NOT NULL DEFAULT '',
  profile            TEXT NOT NULL DEFAULT '',
  status             TEXT NOT NULL DEFAULT '',
  project            TEXT NOT NULL DEFAULT '',
  agent              TEXT NOT NULL DEFAULT '',
  run                TEXT NOT NULL DEFAULT '',
  cpu_seconds        DOUBLE PRECISION NOT NULL DEFAULT 0,
  memory_mb_seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,
  duration_seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
  created_at         BIGINT NOT NULL,
  delivery           TEXT NOT NULL DEFAULT 'none',
  attempts           INTEGER NOT NULL DEFAULT 0,
  next_attempt_at    BIGINT NOT NULL DEFAULT 0,
  delivered_at       BIGINT NOT NULL DEFAULT 0,
  last_error         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX usage_records_tenant_created ON usage_records (tenant_id, created_at);
CREATE INDEX usage_records_outbox ON usage_records (delivery, next_attempt_at);
