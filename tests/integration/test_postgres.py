"""test_postgres.py — what only the PostgreSQL backend has, through the
real daemon: an outage of the database server (readiness goes not_ready and
comes back, a write during the outage answers 503 not_ready with nothing
half-written), row-level security seen from the daemon's own role, and the
URL's password never reaching the log.

Runs under SANDBOXD_TEST_DATABASE=postgres (make test-integration-pg); each
test starts its own PostgreSQL (sbxpg.py) so restarting it disturbs no other
test.
"""
import subprocess
import time

import pytest
import requests

import sbxpg
from sbxtest import assert_error, sandboxd_bin, wait_until

pytestmark = pytest.mark.skipif(
    not sbxpg.enabled(),
    reason="PostgreSQL tests run with SANDBOXD_TEST_DATABASE=postgres (make test-integration-pg)")


@pytest.fixture
def pg():
    server = sbxpg.PgServer().start()
    yield server
    server.stop()


def pg_daemon(daemon_factory, pg):
    """A daemon on its own database of the server pg."""
    db = pg.database()
    app = pg.app_url(db)
    r = subprocess.run([sandboxd_bin(), "db", "init", "--database", app,
                        "--owner-url", pg.owner_url(db)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert pg.app_pw not in r.stderr + r.stdout and pg.owner_pw not in r.stderr + r.stdout
    d = daemon_factory()
    d.database_url = app
    d.db_args = ["--database", app]
    return d.start(), db


def readyz(d):
    try:
        r = requests.get(d.url + "/readyz", timeout=10)
        return r.status_code, r.json()
    except requests.RequestException as e:
        return None, str(e)


def test_database_outage_and_recovery(daemon_factory, pg):
    d, db = pg_daemon(daemon_factory, pg)
    c = d.client(d.create_key("alice"))
    assert readyz(d)[0] == 200
    s1 = c.new_session("process")
    e1 = c.new_execution("process", language="bash", code="echo before")
    assert c.wait_execution(e1["id"])["stdout"] == "before\n"

    pg.pg_stop("fast")
    status, body = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(readyz(d)), 30,
                              interval=0.2, what="/readyz to report the database down")
    assert body["status"] == "not_ready" and body["checks"]["store"] != "ok", body
    assert pg.app_pw not in str(body)

    # Writes answer 503 not_ready; none of them may leave anything behind.
    assert_error(c.post("/v1/sandbox/sessions", json={"profile": "process"}), 503, "not_ready")
    r = c.post("/v1/sandbox/executions", json={"profile": "process", "language": "bash",
                                                 "code": "echo during"})
    assert_error(r, 503, "not_ready")  # the key lookup itself needs the database

    pg.pg_start()
    wait_until(lambda: readyz(d)[0] == 200, 60, interval=0.2,
               what="/readyz to be ready again after the database came back")
    # The pool reconnects: reads and writes work again, on the same data.
    sessions = c.list_all("/v1/sandbox/sessions", "sessions")
    assert [s["id"] for s in sessions] == [s1["id"]], sessions
    execs = c.list_all("/v1/sandbox/executions", "executions")
    assert [e["id"] for e in execs] == [e1["id"]], execs
    s2 = c.new_session("process")
    assert c.exec(s2["id"], language="bash", code="echo after")["stdout"] == "after\n"
    # Nothing half-written in the database itself either.
    assert pg.psql(db, "SELECT COUNT(*) FROM sessions") == "2"
    assert pg.psql(db, "SELECT COUNT(*) FROM executions") == "1"
    assert pg.app_pw not in d.log_tail(100000)


def test_rls_from_daemon_role(daemon_factory, pg):
    """With the wrong app.tenant_id the daemon's own role sees none of
    another tenant's rows; with none set it sees nothing at all."""
    d, db = pg_daemon(daemon_factory, pg)
    alice = d.client(d.create_key("alice"))
    bob = d.client(d.create_key("bob"))
    s = alice.new_session("process")
    alice.exec(s["id"], language="bash", code="echo hi")
    bob.new_session("process")
    ids = dict(line.split("|") for line in
               pg.psql(db, "SELECT name, id FROM tenants").splitlines())

    def as_app(tenant, sql):
        setting = f"SELECT set_config('app.tenant_id', '{tenant}', true);" if tenant else ""
        r = subprocess.run([pg.bindir + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            pg.app_url(db)],
                           input=f"BEGIN;{setting}{sql};COMMIT;", capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()[-1]

    q = f"SELECT COUNT(*) FROM sessions WHERE id = '{s['id']}'"
    assert as_app(ids["alice"], q) == "1"
    assert as_app(ids["bob"], q) == "0"
    assert as_app(None, "SELECT COUNT(*) FROM sessions") == "0"
    assert as_app(None, "SELECT COUNT(*) FROM api_keys") == "0"
    assert as_app(ids["bob"], "SELECT COUNT(*) FROM sessions") == "1"
    assert pg.psql(db, "SELECT COUNT(*) FROM sessions") == "2"
