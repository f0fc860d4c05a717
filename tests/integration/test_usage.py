"""Usage records (DESIGN §7): one per session exec and execution,
summed by GET /v1/sandbox/usage per profile, project or agent (metadata),
in a time range, for the caller's tenant only; and the FinOps outbox: with
SANDBOXD_FINOPS_URL set, records reach a local receiver that answers 503 for
a while, across a kill -9 and restart of the daemon, in the end exactly once
per Idempotency-Key."""
import http.server
import json
import os
import sqlite3
import threading
import time

import pytest

from sbxtest import assert_error, wait_until

PROFILE = "process"


def usage(c, **params):
    r = c.get("/v1/sandbox/usage", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def groups(report):
    return {g["key"]: g for g in report["groups"]}


def test_records_grouped_by_metadata(daemon_factory):
    d = daemon_factory().start()
    alice = d.client(d.create_key("alice"))
    bob = d.client(d.create_key("bob"))
    t0 = int(time.time())
    s = alice.new_session(PROFILE, metadata={"project": "p1", "agent": "coder", "run": "r1"})
    cpu = 0.0
    for _ in range(3):
        cpu += alice.exec(s["id"], command=["sh", "-c", "echo x"])["usage"]["cpu_seconds"]
    # Metadata changed by PATCH applies to the execs after it.
    r = alice.patch(f"/v1/sandbox/sessions/{s['id']}", json={"metadata": {"project": "p3"}})
    assert r.status_code == 200, r.text
    alice.exec(s["id"], command=["true"])
    e = alice.new_execution(PROFILE, command=["true"], metadata={"project": "p2", "agent": "rev"})
    ex = alice.wait_execution(e["id"])
    bob.new_execution(PROFILE, command=["true"], metadata={"project": "p1"})

    by_project = groups(usage(alice, group_by="project"))
    assert set(by_project) == {"p1", "p2", "p3"}, by_project
    assert by_project["p1"]["records"] == 3
    assert abs(by_project["p1"]["cpu_seconds"] - cpu) < 1e-6
    assert by_project["p2"]["records"] == 1 and by_project["p3"]["records"] == 1
    assert abs(by_project["p2"]["duration_seconds"] - ex["usage"]["duration_seconds"]) < 1e-6
    assert abs(by_project["p2"]["memory_mb_seconds"] - ex["usage"]["memory_mb_seconds"]) < 1e-6
    by_agent = groups(usage(alice, group_by="agent"))
    assert by_agent["coder"]["records"] == 3 and by_agent["rev"]["records"] == 1
    assert by_agent[None]["records"] == 1  # the exec after PATCH dropped the agent key
    rep = usage(alice)  # group_by defaults to profile
    assert rep["group_by"] == "profile" and groups(rep)[PROFILE]["records"] == 5
    assert rep["total"]["records"] == 5

    # Time range: RFC 3339 or epoch seconds, [from, to).
    assert usage(alice, **{"from": str(t0 + 3600)})["groups"] == []
    assert usage(alice, to="2000-01-01T00:00:00Z")["groups"] == []
    t_from = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0 - 5))
    assert usage(alice, **{"from": t_from, "to": str(t0 + 3600)})["total"]["records"] == 5
    assert_error(alice.get("/v1/sandbox/usage", params={"group_by": "color"}), 400,
                 "invalid_request", "group_by")
    assert_error(alice.get("/v1/sandbox/usage", params={"from": "yesterday"}), 400,
                 "invalid_request", "from")
    # Bob sees his own record only (once it finished).
    wait_until(lambda: usage(bob)["total"]["records"] == 1, 30, what="bob's record")
    assert set(groups(usage(bob, group_by="project"))) == {"p1"}


class Receiver:
    """A FinOps endpoint on 127.0.0.1: answers 503 while `down`, else 200,
    and de-duplicates by Idempotency-Key like a real one would."""

    def __init__(self):
        self.down = True
        self.lock = threading.Lock()
        self.attempts = []       # (key, status) of every POST
        self.accepted = {}       # key → body (first accepted)
        self.bodies = {}         # key → every body seen
        recv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                key = self.headers.get("Idempotency-Key")
                with recv.lock:
                    status = 503 if recv.down else 200
                    recv.attempts.append((key, status))
                    recv.bodies.setdefault(key, []).append(body)
                    if status == 200:
                        recv.accepted.setdefault(key, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/usage"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def db_records(d):
    if getattr(d, "database_url", None):
        import sbxpg
        return {r[0]: (r[1], int(r[2]), r[3]) for r in sbxpg.query(
            d.database_url, "SELECT id, delivery, attempts, source_id FROM usage_records")}
    db = sqlite3.connect(os.path.join(d.state_dir, "sandboxd.db"), timeout=30)
    try:
        return {r[0]: r[1:] for r in db.execute(
            "SELECT id, delivery, attempts, source_id FROM usage_records")}
    finally:
        db.close()


@pytest.mark.slow
def test_finops_outbox_survives_outage_and_kill9(daemon_factory, monkeypatch):
    recv = Receiver()
    try:
        monkeypatch.setenv("SANDBOXD_FINOPS_URL", recv.url)
        d = daemon_factory().start()
        key = d.create_key("acme")
        c = d.client(key)
        s = c.new_session(PROFILE, metadata={"project": "fin", "agent": "a1"})
        for _ in range(3):
            c.exec(s["id"], command=["true"])
        e = c.new_execution(PROFILE, command=["true"], metadata={"project": "fin"})
        c.wait_execution(e["id"])
        # The endpoint is down: attempts fail, records stay pending.
        wait_until(lambda: len(recv.attempts) >= 2, 30, what="delivery attempts")
        assert not recv.accepted
        assert all(r[0] == "pending" for r in db_records(d).values())

        d.kill9()
        d2 = daemon_factory(state_dir=d.state_dir).start()
        c2 = d2.client(key)
        s2 = c2.new_session(PROFILE, metadata={"project": "fin2"})
        c2.exec(s2["id"], command=["true"])
        c2.exec(s2["id"], command=["true"])
        records = db_records(d2)
        assert len(records) == 6, records
        # The new daemon's outbox tries (and fails) against the down receiver
        # before it comes back: retries after a restart are what is tested.
        tried = len(recv.attempts)
        wait_until(lambda: len(recv.attempts) > tried, 60, interval=0.2,
                   what="a delivery attempt by the restarted daemon")
        with recv.lock:
            recv.down = False
        wait_until(lambda: set(recv.accepted) == set(records), 90, interval=0.2,
                   what="every record delivered")
        wait_until(lambda: all(r[0] == "delivered" for r in db_records(d2).values()), 30,
                   what="records marked delivered")
        # Exactly once per key; every attempt carried the same body.
        for k, bodies in recv.bodies.items():
            assert all(b == bodies[0] for b in bodies), k
            assert bodies[0]["id"] == k
        assert sorted(k for k, st in recv.attempts if st == 200) == sorted(records)
        body = recv.accepted[next(k for k, r in records.items() if r[2] == e["id"])]
        assert body["kind"] == "execution" and body["tenant"] == "acme", body
        assert body["metadata"] == {"project": "fin"} and body["profile"] == PROFILE
        assert set(body) >= {"cpu_seconds", "memory_mb_seconds", "duration_seconds",
                             "created_at", "status", "tenant_id", "source_id"}
        execs = [recv.accepted[k] for k, r in records.items() if r[2] == s["id"]]
        assert len(execs) == 3 and all(b["metadata"]["agent"] == "a1" for b in execs)
        # Nothing more is sent once all is delivered.
        n = len(recv.attempts)
        time.sleep(2.5)  # the sleep is the test: time passes, nothing is sent
        assert len(recv.attempts) == n
    finally:
        recv.close()
