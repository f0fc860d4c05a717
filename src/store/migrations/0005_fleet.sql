-- 0005_fleet.sql — which node owns each session and execution, and the
-- lease of an execution a node has taken from the shared queue
-- (docs/fleet.md); and an execution's OOM kills.  SQLite serves one daemon only: its rows carry the
-- daemon's own node id and never a lease.  PostgreSQL runs
-- 0005_fleet.postgres.sql instead, which also creates the fleet's tables.

ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
-- The OOM kills in the execution's sandbox (its usage.oom_kills).
ALTER TABLE executions ADD COLUMN oom_kills BIGINT NOT NULL DEFAULT 0;
