-- 0004_tools.postgres.sql — PostgreSQL's 0004_tools.sql: the same table,
-- with the two row-level security policies every tenant table has
-- (0003_rls.postgres.sql explains them).  The application role may also
-- DELETE from it (DELETE /v1/tools/{name}): `sandboxd db init` grants that
-- on this table only.

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

ALTER TABLE tools ENABLE ROW LEVEL SECURITY;
ALTER TABLE tools FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tools
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON tools TO CURRENT_USER USING (true) WITH CHECK (true);
