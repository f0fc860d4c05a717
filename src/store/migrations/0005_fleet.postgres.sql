-- 0005_fleet.postgres.sql — the fleet (docs/fleet.md): daemons on several
-- hosts sharing this database.  0005_fleet.sql's columns, plus
--  * nodes: one row per daemon started with --cluster; it heartbeats the
--    row every second.  Times that nodes compare (heartbeats, leases) are
--    this server's clock, never a node's, so skew between hosts is moot.
--  * session_holds: a session create's place in its tenant's fleet-wide
--    session quota while its sandbox is built (the row is inserted only
--    once it is ready); expired holds of a dead node count for nothing.
--  * the cross-tenant jobs as SECURITY DEFINER functions (0003 explains
--    the model): declaring dead nodes, taking the next execution from the
--    shared queue, renewing a node's leases.
-- The advisory lock keys continue 0003's (5862000…): 5862005 reap,
-- 5862006 claim; per tenant: (5862003, tenant) executions quota,
-- (5862004, tenant) sessions quota.

ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
-- The OOM kills in the execution's sandbox (its usage.oom_kills).
ALTER TABLE executions ADD COLUMN oom_kills BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sessions_node ON sessions (node_id, status);
CREATE INDEX executions_node ON executions (node_id, status);

CREATE TABLE nodes (
  id            TEXT PRIMARY KEY,
  advertise     TEXT NOT NULL,
  state         TEXT NOT NULL,              -- alive | dead | left
  slots         BIGINT NOT NULL DEFAULT 0,  -- sandboxes it offers
  used          BIGINT NOT NULL DEFAULT 0,  -- live sessions + reservations
  ncpu          INTEGER NOT NULL DEFAULT 0,
  load1         DOUBLE PRECISION NOT NULL DEFAULT 0,
  mem_total     BIGINT NOT NULL DEFAULT 0,
  mem_avail     BIGINT NOT NULL DEFAULT 0,
  info_json     TEXT NOT NULL DEFAULT '{}', -- profiles with their state and reasons, pools
  started_at    BIGINT NOT NULL,
  heartbeat_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  joins         BIGINT NOT NULL DEFAULT 1
);

CREATE TABLE session_holds (
  id          TEXT PRIMARY KEY,
  tenant_id   BIGINT NOT NULL REFERENCES tenants (id),
  node_id     TEXT NOT NULL,
  expires_at  BIGINT NOT NULL
);
CREATE INDEX session_holds_tenant ON session_holds (tenant_id);
ALTER TABLE session_holds ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_holds FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON session_holds
  USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint)
  WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::bigint);
CREATE POLICY maintenance ON session_holds TO CURRENT_USER USING (true) WITH CHECK (true);

-- Milliseconds since the epoch on this server's clock.
CREATE FUNCTION sbx_fleet_now_ms() RETURNS bigint
LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- Declares dead every alive node whose last heartbeat is older than
-- p_dead_after_ms: its ready sessions become lost (node_lost), its running
-- executions end error/node_lost (they may have had effects: never run
-- twice), the ones it had taken but not started go back to the queue.  One
-- reaper at a time across the fleet; a node that finds the lock held
-- leaves the job to the holder.
CREATE FUNCTION sbx_fleet_reap(p_dead_after_ms bigint)
RETURNS TABLE (node_id text, sessions bigint, failed bigint, requeued bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  n record;
  now_s bigint := extract(epoch FROM clock_timestamp())::bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(5862005) THEN
    RETURN;
  END IF;
  FOR n IN SELECT d.id FROM nodes d WHERE d.state = 'alive'
             AND d.heartbeat_at < clock_timestamp() - p_dead_after_ms * interval '1 millisecond'
           ORDER BY d.id FOR UPDATE LOOP
    UPDATE nodes SET state = 'dead', used = 0 WHERE id = n.id;
    UPDATE sessions s SET status = 'lost', reason = 'node_lost', updated_at = now_s
      WHERE s.node_id = n.id AND s.status = 'ready';
    GET DIAGNOSTICS sessions = ROW_COUNT;
    UPDATE executions e SET status = 'error', reason = 'node_lost', finished_at = now_s,
      updated_at = now_s, lease_until = 0,
      error_json = '{"reason":"node_lost","message":"the node running this execution stopped '
                   'answering; it was not run again, since it may have had effects"}'
      WHERE e.node_id = n.id AND e.status = 'running';
    GET DIAGNOSTICS failed = ROW_COUNT;
    UPDATE executions e SET node_id = '', lease_until = 0, updated_at = now_s
      WHERE e.node_id = n.id AND e.status = 'queued';
    GET DIAGNOSTICS requeued = ROW_COUNT;
    DELETE FROM session_holds h WHERE h.node_id = n.id;
    node_id := n.id;
    RETURN NEXT;
  END LOOP;
END $$;

-- The shared queue: p_node takes the next queued execution nobody holds
-- (or whose holder's lease ran out), fair between tenants — the tenant
-- with the fewest executions running or taken goes first, FIFO within a
-- tenant — and never past p_cap running or taken per tenant fleet-wide
-- (0: no cap).  Claims are serialised (advisory lock) so the cap is exact;
-- SKIP LOCKED keeps a claim off rows a create, cancel or finish holds.
CREATE FUNCTION sbx_fleet_claim(p_node text, p_cap bigint, p_lease_ms bigint)
RETURNS TABLE (id text, tenant_id bigint, lease_expired boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  v record;
  now_ms bigint := sbx_fleet_now_ms();
BEGIN
  PERFORM pg_advisory_xact_lock(5862006);
  SELECT e.id, e.tenant_id, e.node_id <> '' AS expired INTO v FROM executions e
    LEFT JOIN (SELECT r.tenant_id, count(*) AS n FROM executions r
               WHERE r.status = 'running'
                  OR (r.status = 'queued' AND r.node_id <> '' AND r.lease_until >= now_ms)
               GROUP BY r.tenant_id) busy ON busy.tenant_id = e.tenant_id
    WHERE e.status = 'queued' AND (e.node_id = '' OR e.lease_until < now_ms)
      AND (p_cap <= 0 OR coalesce(busy.n, 0) < p_cap)
    ORDER BY coalesce(busy.n, 0), e.created_at, e.id
    LIMIT 1 FOR UPDATE OF e SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE executions SET node_id = p_node, lease_until = now_ms + p_lease_ms
    WHERE executions.id = v.id;
  id := v.id;
  tenant_id := v.tenant_id;
  lease_expired := v.expired;
  RETURN NEXT;
END $$;

-- The shared queue's depth and the age of its oldest entry (seconds), for
-- the metrics every node exports.
CREATE FUNCTION sbx_fleet_queue() RETURNS TABLE (depth bigint, oldest_age bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
  SELECT count(*), COALESCE(extract(epoch FROM clock_timestamp())::bigint - min(created_at), 0)
  FROM executions WHERE status = 'queued'
$$;

-- A node's heartbeat renews the leases of everything it holds.
CREATE FUNCTION sbx_fleet_renew(p_node text, p_lease_ms bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE n bigint;
BEGIN
  UPDATE executions SET lease_until = sbx_fleet_now_ms() + p_lease_ms
    WHERE node_id = p_node AND status IN ('queued', 'running');
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

-- A node's recovery at start and its clean leave: its own ready sessions
-- and running executions, across tenants.  Sessions → lost with p_reason;
-- running executions → error with p_reason; taken, unstarted ones back to
-- the queue.  Returns the sessions and executions it ended.
CREATE FUNCTION sbx_fleet_release(p_node text, p_reason text)
RETURNS TABLE (sessions bigint, failed bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE now_s bigint := extract(epoch FROM clock_timestamp())::bigint;
BEGIN
  UPDATE sessions s SET status = 'lost', reason = p_reason, updated_at = now_s
    WHERE s.node_id = p_node AND s.status = 'ready';
  GET DIAGNOSTICS sessions = ROW_COUNT;
  UPDATE executions e SET status = 'error', reason = p_reason, finished_at = now_s,
    updated_at = now_s, lease_until = 0,
    error_json = json_build_object('reason', p_reason, 'message',
                                   'the node running this execution stopped; it was not run again')::text
    WHERE e.node_id = p_node AND e.status = 'running';
  GET DIAGNOSTICS failed = ROW_COUNT;
  UPDATE executions e SET node_id = '', lease_until = 0, updated_at = now_s
    WHERE e.node_id = p_node AND e.status = 'queued';
  DELETE FROM session_holds h WHERE h.node_id = p_node;
  RETURN NEXT;
END $$;

REVOKE EXECUTE ON FUNCTION sbx_fleet_now_ms(), sbx_fleet_reap(bigint),
  sbx_fleet_claim(text, bigint, bigint), sbx_fleet_renew(text, bigint),
  sbx_fleet_release(text, text), sbx_fleet_queue() FROM PUBLIC;
