-- 0003_rls.postgres.sql — PostgreSQL only: row-level security on every
-- tenant table, and the few cross-tenant operations the daemon needs as
-- SECURITY DEFINER functions (docs/postgres.md).  SQLite has no RLS: it
-- runs nothing for this version (and still records it).
--
-- The model:
--  * The daemon connects as an application role that owns nothing and is
--    not a superuser; each tenant-scoped transaction first runs
--    SELECT set_config('app.tenant_id', '<id>', true).  The policy
--    "tenant_isolation" lets it see and write only rows of that tenant;
--    with app.tenant_id unset (or '') it sees nothing.
--  * FORCE makes the policies apply to the table owner too.  The owner (the
--    role that runs migrations, CURRENT_USER here) has a second policy,
--    "maintenance", so the SECURITY DEFINER functions below — which run as
--    the owner — can do their narrow cross-tenant job.  Nothing else runs
--    as the owner: the daemon refuses to start as it (or as a member of it,
--    a superuser or a BYPASSRLS role).
--  * The functions are not executable by PUBLIC; `sandboxd db init` grants
--    EXECUTE (and table DML) to the application role.
--
-- A later migration that adds a table with a tenant_id column must give it
-- the same two policies (in a NNNN_name.postgres.sql variant): the daemon
-- refuses to start while any such table lacks forced RLS.
--
-- The tenant expression: NULLIF(…, '') because a setting that was SET LOCAL
-- in an earlier transaction reads back as '' afterwards, not NULL.

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
  USING (id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON tenants TO CURRENT_USER USING (true) WITH CHECK (true);

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON api_keys
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON api_keys TO CURRENT_USER USING (true) WITH CHECK (true);

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON sessions
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON sessions TO CURRENT_USER USING (true) WITH CHECK (true);

ALTER TABLE executions ENABLE ROW LEVEL SECURITY;
ALTER TABLE executions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON executions
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON executions TO CURRENT_USER USING (true) WITH CHECK (true);

-- execution_files has no tenant_id: a file row is visible (and insertable)
-- only when its execution is — and the subquery on executions is itself
-- filtered by executions' policy.
ALTER TABLE execution_files ENABLE ROW LEVEL SECURITY;
ALTER TABLE execution_files FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON execution_files
  USING (EXISTS (SELECT 1 FROM executions e WHERE e.id = execution_files.execution_id))
  WITH CHECK (EXISTS (SELECT 1 FROM executions e WHERE e.id = execution_files.execution_id));
CREATE POLICY maintenance ON execution_files TO CURRENT_USER USING (true) WITH CHECK (true);

-- Tenant 0 ("no tenant": auth failures, system actions) is written with
-- app.tenant_id = '0'.
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_events
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON audit_events TO CURRENT_USER USING (true) WITH CHECK (true);

ALTER TABLE usage_records ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage_records FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON usage_records
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON usage_records TO CURRENT_USER USING (true) WITH CHECK (true);

-- ---- The cross-tenant path: fixed queries, run as the owner. ----
-- SET search_path FROM CURRENT pins the schema they were created in, so a
-- caller cannot redirect them with its own search_path.

-- Tenant by name, created if missing (ids MAX+1 like SQLite, serialised by
-- an advisory lock so two creators never pick the same id).
CREATE FUNCTION sbx_tenant_ensure(p_name text, p_now bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE v bigint;
BEGIN
  SELECT id INTO v FROM tenants WHERE name = p_name;
  IF FOUND THEN RETURN v; END IF;
  PERFORM pg_advisory_xact_lock(5862001);
  SELECT id INTO v FROM tenants WHERE name = p_name;
  IF FOUND THEN RETURN v; END IF;
  SELECT COALESCE(MAX(id), 0) + 1 INTO v FROM tenants;
  INSERT INTO tenants (id, name, created_at) VALUES (v, p_name, p_now);
  RETURN v;
END $$;

-- Authentication: the key is looked up before its tenant is known.
CREATE FUNCTION sbx_key_lookup(p_key_id text)
RETURNS TABLE (key_id text, tenant_id bigint, tenant_name text, hash bytea, admin integer,
               created_at bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT k.key_id, k.tenant_id, t.name, k.hash, k.admin, k.created_at
  FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.key_id = p_key_id
$$;

-- Recovery and the reaper: every tenant's ready sessions.
CREATE FUNCTION sbx_sessions_ready() RETURNS SETOF sessions
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT * FROM sessions WHERE status = 'ready' ORDER BY created_at, id
$$;

-- Recovery: every tenant's executions in one status (queued, running).
CREATE FUNCTION sbx_executions_in_status(p_status text) RETURNS SETOF executions
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT * FROM executions WHERE status = p_status ORDER BY created_at, id
$$;

-- The audit chain is one chain across tenants: its head, for the next
-- append (the caller holds the audit advisory lock).
CREATE FUNCTION sbx_audit_head() RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT a.seq, a.hash FROM audit_events a ORDER BY a.seq DESC LIMIT 1
$$;

-- Admin listing and verification of the whole chain (the daemon checks the
-- caller is an admin key before calling it).
CREATE FUNCTION sbx_audit_all(p_after bigint, p_action text, p_limit bigint)
RETURNS SETOF audit_events
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT * FROM audit_events WHERE seq > p_after AND (p_action IS NULL OR action = p_action)
  ORDER BY seq LIMIT p_limit
$$;

-- The FinOps outbox is drained for every tenant by one background worker.
CREATE FUNCTION sbx_outbox_due(p_now bigint, p_limit bigint) RETURNS SETOF usage_records
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT * FROM usage_records WHERE delivery = 'pending' AND next_attempt_at <= p_now
  ORDER BY created_at, id LIMIT p_limit
$$;

CREATE FUNCTION sbx_outbox_mark(p_id text, p_delivered boolean, p_now bigint, p_next bigint,
                                p_error text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE n bigint;
BEGIN
  IF p_delivered THEN
    UPDATE usage_records SET delivery = 'delivered', delivered_at = p_now,
      attempts = attempts + 1, last_error = '' WHERE id = p_id;
  ELSE
    UPDATE usage_records SET attempts = attempts + 1, next_attempt_at = p_next,
      last_error = p_error WHERE id = p_id;
  END IF;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

REVOKE EXECUTE ON FUNCTION sbx_tenant_ensure(text, bigint), sbx_key_lookup(text),
  sbx_sessions_ready(), sbx_executions_in_status(text), sbx_audit_head(),
  sbx_audit_all(bigint, text, bigint), sbx_outbox_due(bigint, bigint),
  sbx_outbox_mark(text, boolean, bigint, bigint, text) FROM PUBLIC;
