-- 0004_tools.sql — the tools a tenant applied from tool manifests
-- (POST /v1/manifests/apply, core/tools.c): one row per (tenant, name),
-- the manifest as stored (compact JSON, keys sorted) and its SHA-256, so a
-- second apply of the same document changes nothing.  PostgreSQL runs
-- 0004_tools.postgres.sql instead (the same table plus its row-level
-- security policies).

CREATE TABLE tools (
  tenant_id     BIGINT NOT NULL REFERENCES tenants (id),
  name          TEXT NOT NULL,
  profile       TEXT NOT NULL,
  image         TEXT NOT NULL,
  digest        TEXT NOT NULL,
  manifest_json TEXT NOT NULL,
  generation    BIGINT NOT NULL,
  created_at    BIGINT NOT NULL,
  updated_at    BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, name)
);
