"""The hash-chained audit log: every mutation and refusal appends an
event; appends from many parallel requests form one unforked chain; an edit,
a deletion or an insertion made directly in the database is named by its
sequence number by both `sandboxd audit verify` and GET /v1/audit/verify;
the routes are admin-only; a flood of bad keys is rate-limited.

Each test runs a daemon of its own (the chain is tampered with)."""
import concurrent.futures
import hashlib
import json
import os
import sqlite3
import subprocess

import pytest

from sbxtest import assert_error, sandboxd_bin

PROFILE = "process"  # the subject is the daemon's bookkeeping, not isolation


@pytest.fixture
def env(daemon_factory):
    d = daemon_factory().start()
    user = d.client(d.create_key("alice"))
    admin = d.client(d.create_key("root", admin=True))
    return d, user, admin


def db_path(d):
    return os.path.join(d.state_dir, "sandboxd.db")


def on_postgres(d):
    return bool(getattr(d, "database_url", None))


def sql(d, *stmts):
    """Writes straight into the database, behind the daemon's back (WAL on
    SQLite; as the superuser on PostgreSQL, where the daemon's own role may
    not even UPDATE audit rows)."""
    if on_postgres(d):
        import sbxpg
        sbxpg.query(d.database_url, "; ".join(stmts))  # one session: TEMP tables live
        return
    db = sqlite3.connect(db_path(d), timeout=30)
    try:
        for s in stmts:
            db.execute(s)
        db.commit()
    finally:
        db.close()


def rows(d):
    q = ("SELECT seq, time_ms, tenant_id, actor, action, target, outcome,"
         " details_json, prev_hash, hash FROM audit_events ORDER BY seq")
    if on_postgres(d):
        import sbxpg
        return [(int(r[0]), int(r[1]), int(r[2])) + tuple(r[3:])
                for r in sbxpg.query(d.database_url, q)]
    db = sqlite3.connect(db_path(d), timeout=30)
    try:
        return db.execute(q).fetchall()
    finally:
        db.close()


def canonical(seq, time_ms, tenant, actor, action, target, outcome, details):
    """docs/audit.md's canonical encoding, written independently of the C code."""
    return json.dumps({"action": action, "actor": actor, "details": json.loads(details),
                       "outcome": outcome, "seq": seq, "target": target, "tenant": tenant,
                       "time_ms": time_ms}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def python_verify(d):
    """First broken seq per docs/audit.md, or 0 when intact."""
    prev, want = "0" * 64, 1
    for seq, t, tenant, actor, action, target, outcome, details, prev_hash, h in rows(d):
        if seq != want:
            return want
        if prev_hash != prev:
            return seq
        c = canonical(seq, t, tenant, actor, action, target, outcome, details)
        if hashlib.sha256((prev + c).encode()).hexdigest() != h:
            return seq
        prev, want = h, want + 1
    return 0


def cli_verify(d):
    where = (["--database", d.database_url] if on_postgres(d)
             else ["--state-dir", d.state_dir])
    r = subprocess.run([sandboxd_bin(), "audit", "verify"] + where,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def assert_broken_at(d, admin, seq):
    rc, out = cli_verify(d)
    assert rc == 1, out
    assert f"BROKEN at sequence {seq}:" in out, out
    r = admin.get("/v1/audit/verify")
    assert r.status_code == 200, r.text
    v = r.json()
    assert v["ok"] is False and v["first_broken_seq"] == seq, v
    assert v["problem"], v
    assert python_verify(d) == seq


def assert_intact(d, admin):
    rc, out = cli_verify(d)
    assert rc == 0, out
    assert "audit chain intact" in out, out
    v = admin.get("/v1/audit/verify").json()
    assert v["ok"] is True and v["first_broken_seq"] is None, v
    assert python_verify(d) == 0
    return v


def all_events(admin, after=0, **params):
    out = []
    while True:
        r = admin.get("/v1/audit", params=dict(params, after=after, limit=1000))
        assert r.status_code == 200, r.text
        page = r.json()
        out += page["events"]
        if page["next_cursor"] is None:
            return out
        after = page["next_cursor"]


def test_parallel_mutations_form_one_chain(env):
    d, user, admin = env
    sessions = [user.new_session(PROFILE, metadata={"project": "audit"})["id"] for _ in range(4)]

    def work(i):
        sid = sessions[i % len(sessions)]
        if i % 3 == 0:
            r = user.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]})
        elif i % 3 == 1:
            r = user.put(f"/v1/sandbox/sessions/{sid}/files", params={"path": f"/work/f{i}"},
                         data=b"x" * i)
        else:
            r = user.patch(f"/v1/sandbox/sessions/{sid}", json={"metadata": {"i": str(i)}})
        return r.status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(work, range(60)))
    assert all(c in (200, 201, 204) for c in codes), codes

    v = assert_intact(d, admin)
    events = all_events(admin)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert v["events"] == len(events) and v["last_seq"] == len(events)
    assert events[-1]["hash"] == v["head_hash"]
    by_action = {}
    for e in events:
        by_action.setdefault(e["action"], []).append(e)
    assert len(by_action["sandbox.session.create"]) == 4
    assert len(by_action["sandbox.execute"]) == 20
    assert len(by_action["sandbox.files.write"]) == 20
    assert len(by_action["sandbox.session.patch"]) == 20
    assert len(by_action["auth.key.create"]) == 2  # from `sandboxd key create`
    created = {e["target"] for e in by_action["sandbox.session.create"]}
    assert created == set(sessions)
    w = by_action["sandbox.files.write"][0]
    assert w["outcome"] == "ok" and w["target"] in sessions
    assert w["details"]["path"].startswith("/work/f") and w["details"]["source"] == "127.0.0.1"
    ex = by_action["sandbox.execute"][0]
    assert ex["details"]["status"] == "succeeded" and ex["details"]["exit_code"] == 0
    assert ex["actor"].startswith("k") and ex["tenant_id"] >= 1

    # A delete and a policy change (network) are recorded too.
    sid = sessions[0]
    assert user.patch(f"/v1/sandbox/sessions/{sid}",
                      json={"network": {"egress": "none"}}).status_code == 200
    assert user.delete(f"/v1/sandbox/sessions/{sid}").status_code in (200, 204)
    tail = all_events(admin, after=len(events))
    assert [e["action"] for e in tail] == ["sandbox.session.patch", "sandbox.session.delete"]
    assert tail[0]["details"]["fields"] == ["network"] and "network" in tail[0]["details"]
    assert tail[1]["target"] == sid
    assert_intact(d, admin)


def test_executions_and_filters(env):
    d, user, admin = env
    e = user.new_execution(PROFILE, command=["sleep", "30"])
    r = user.post(f"/v1/sandbox/executions/{e['id']}/cancel")
    assert r.status_code == 200, r.text
    events = all_events(admin, action="sandbox.execution.create")
    assert [x["target"] for x in events] == [e["id"]]
    cancels = all_events(admin, action="sandbox.execution.cancel")
    assert [x["target"] for x in cancels] == [e["id"]]
    # Tenant filter: alice's events only (her key's tenant).
    alice_tenant = events[0]["tenant_id"]
    mine = all_events(admin, tenant=alice_tenant)
    assert mine and all(x["tenant_id"] == alice_tenant for x in mine)
    # Cursor + limit.
    page = admin.get("/v1/audit", params={"limit": 2}).json()
    assert [x["seq"] for x in page["events"]] == [1, 2] and page["next_cursor"] == 2
    nxt = admin.get("/v1/audit", params={"limit": 2, "after": 2}).json()
    assert nxt["events"][0]["seq"] == 3
    assert_error(admin.get("/v1/audit", params={"limit": "-1"}), 400, "invalid_request", "limit")
    # A request beyond the profile's policy is a recorded policy decision.
    r = user.post("/v1/sandbox/sessions", json={"profile": PROFILE, "limits": {"memory": "64Gi"}})
    assert_error(r, 400, "invalid_request", "limits.memory")
    pol = all_events(admin, action="policy.denied")
    assert len(pol) == 1 and pol[0]["details"]["field"] == "limits.memory", pol
    assert pol[0]["outcome"] == "invalid_request" and pol[0]["tenant_id"] == alice_tenant


def test_non_admin_is_refused_and_recorded(env):
    d, user, admin = env
    assert_error(user.get("/v1/audit"), 403, "forbidden")
    assert_error(user.get("/v1/audit/verify"), 403, "forbidden")
    denied = all_events(admin, action="auth.denied")
    assert len(denied) == 2, denied
    assert all(x["outcome"] == "forbidden" and x["actor"].startswith("k") for x in denied)
    assert {x["details"]["route"] for x in denied} == {"audit_list", "audit_verify"}
    anon = d.client(None)
    assert_error(anon.get("/v1/audit"), 401, "unauthenticated")


def test_auth_failure_flood_is_rate_limited(env):
    d, user, admin = env
    bad = d.client("sbx_k0000000000000000_" + "0" * 48)
    for _ in range(30):
        assert bad.get("/v1/sandbox/sessions").status_code == 401
    denied = [x for x in all_events(admin, action="auth.denied")
              if x["outcome"] == "unauthenticated"]
    # 10 per minute per source; the flood may straddle a minute boundary.
    assert 1 <= len(denied) <= 20, len(denied)
    assert all(x["tenant_id"] == 0 and x["actor"] == "anonymous" for x in denied)
    m = d.client(None).get("/metrics").text
    supp = [l for l in m.splitlines() if l.startswith("sandboxd_audit_suppressed_total ")]
    assert supp and int(float(supp[0].split()[1])) == 30 - len(denied), supp
    assert_intact(d, admin)


def test_tampering_is_named(env):
    d, user, admin = env
    sid = user.new_session(PROFILE)["id"]
    for i in range(8):
        user.exec(sid, command=["true"])
    n = len(rows(d))
    assert n >= 11
    assert_intact(d, admin)

    # 1. An edited row (its content no longer matches its hash).
    sql(d, "UPDATE audit_events SET outcome = 'denied' WHERE seq = 5")
    assert_broken_at(d, admin, 5)
    sql(d, "UPDATE audit_events SET outcome = 'ok' WHERE seq = 5")
    assert_intact(d, admin)

    # 2. A deleted row (a gap in the sequence).
    saved = [r for r in rows(d) if r[0] == 7][0]
    sql(d, "DELETE FROM audit_events WHERE seq = 7")
    assert_broken_at(d, admin, 7)
    sql(d, "INSERT INTO audit_events (seq, time_ms, tenant_id, actor, action, target, outcome,"
        " details_json, prev_hash, hash) VALUES (%s, %s, %s, '%s', '%s', '%s', '%s', '%s',"
        " '%s', '%s')" % tuple(str(v).replace("'", "''") for v in saved))
    assert_intact(d, admin)

    # 3. An inserted row: later rows renumbered to make room, the forged row
    # chained to its predecessor with a made-up hash.
    sql(d, "UPDATE audit_events SET seq = -seq WHERE seq >= 9",
        "UPDATE audit_events SET seq = 1 - seq WHERE seq < 0",
        "INSERT INTO audit_events VALUES (9, 0, 1, 'kforged', 'auth.key.create', 'k1', 'ok',"
        " '{}', (SELECT hash FROM audit_events WHERE seq = 8), '" + "ab" * 32 + "')")
    assert_broken_at(d, admin, 9)

    # 3b. Even with a hash computed the documented way, the row after it no
    # longer matches: its seq changed under it.
    forged = rows(d)[8]
    prev = rows(d)[7][9]
    good = hashlib.sha256((prev + canonical(*forged[:8])).encode()).hexdigest()
    sql(d, f"UPDATE audit_events SET hash = '{good}' WHERE seq = 9")
    assert_broken_at(d, admin, 10)

    # With the daemon stopped, the CLI still says the same.
    assert d.stop() == 0
    rc, out = cli_verify(d)
    assert rc == 1 and "BROKEN at sequence 10:" in out, out
