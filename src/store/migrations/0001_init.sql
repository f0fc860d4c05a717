-- 0001_init.sql — the first schema: tenants, API keys, sessions, executions
-- and the files an execution collected (DESIGN §6).
--
-- Shared by the SQLite and PostgreSQL backends, so it sticks to types and
-- syntax both accept: TEXT, BIGINT, INTEGER, DOUBLE PRECISION, plain
-- PRIMARY KEY / REFERENCES / UNIQUE, CREATE INDEX.  One exception: BLOB,
-- which the PostgreSQL backend reads as BYTEA.  Ids are chosen by the
-- application (tenant ids too), so no AUTOINCREMENT/SERIAL is needed.
-- Times are integer seconds since the epoch; booleans are INTEGER 0/1.

CREATE TABLE tenants (
  id          BIGINT PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  created_at  BIGINT NOT NULL
);

CREATE TABLE api_keys (
  key_id      TEXT PRIMARY KEY,
  tenant_id   BIGINT NOT NULL REFERENCES tenants (id),
  hash        BLOB NOT NULL,
  admin       INTEGER NOT NULL DEFAULT 0,
  created_at  BIGINT NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE sessions (
  id            TEXT PRIMARY KEY,
  tenant_id     BIGINT NOT NULL REFERENCES tenants (id),
  status        TEXT NOT NULL,
  reason        TEXT NOT NULL DEFAULT '',
  profile       TEXT NOT NULL DEFAULT '',
  runtime       TEXT NOT NULL DEFAULT '',
  image         TEXT NOT NULL DEFAULT '',
  limits_json   TEXT,
  network_json  TEXT,
  metadata_json TEXT,
  env_json      TEXT,
  ttl_s         BIGINT NOT NULL DEFAULT 0,
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL,
  expires_at    BIGINT NOT NULL DEFAULT 0,
  last_used_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_tenant_id ON sessions (tenant_id, id);
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at, id);
CREATE INDEX sessions_status ON sessions (status);

-- "signal" is spelled term_signal: SIGNAL is an SQL keyword in some dialects.
CREATE TABLE executions (
  id                 TEXT PRIMARY KEY,
  tenant_id          BIGINT NOT NULL REFERENCES tenants (id),
  status             TEXT NOT NULL,
  reason             TEXT NOT NULL DEFAULT '',
  profile            TEXT NOT NULL DEFAULT '',
  request_json       TEXT,
  metadata_json      TEXT,
  exit_code          INTEGER NOT NULL DEFAULT -1,
  term_signal        INTEGER NOT NULL DEFAULT 0,
  stdout             BLOB,
  stdout_truncated   INTEGER NOT NULL DEFAULT 0,
  stdout_dropped     BIGINT NOT NULL DEFAULT 0,
  stderr             BLOB,
  stderr_truncated   INTEGER NOT NULL DEFAULT 0,
  stderr_dropped     BIGINT NOT NULL DEFAULT 0,
  cpu_seconds        DOUBLE PRECISION NOT NULL DEFAULT 0,
  memory_mb_seconds  DOUBLE PRECISION NOT NULL DEFAULT 0,
  duration_seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
  memory_peak_bytes  BIGINT NOT NULL DEFAULT 0,
  error_json         TEXT,
  created_at         BIGINT NOT NULL,
  started_at         BIGINT NOT NULL DEFAULT 0,
  finished_at        BIGINT NOT NULL DEFAULT 0,
  updated_at         BIGINT NOT NULL
);
CREATE INDEX executions_tenant_status ON executions (tenant_id, status);
CREATE INDEX executions_tenant_created ON executions (tenant_id, created_at, id);
CREATE INDEX executions_status ON executions (status);

CREATE TABLE execution_files (
  execution_id  TEXT NOT NULL REFERENCES executions (id),
  path          TEXT NOT NULL,
  size          BIGINT NOT NULL,
  sha256        TEXT NOT NULL,
  content       BLOB,
  PRIMARY KEY (execution_id, path)
);
