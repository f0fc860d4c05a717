"""Sessions: create, get, list (filters, pagination), patch, delete, TTL."""
import time
from datetime import datetime


from sbxtest import assert_error, wait_until


def ts(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()


def test_create_shape(alice, profile, profile_table):
    r = alice.post("/v1/sandbox/sessions",
                   json={"profile": profile, "metadata": {"owner": "it", "n": "1"},
                         "ttl_s": 600, "limits": {"memory": "128Mi", "cpu": "500m"},
                         "env": {"GREETING": "bonjour"}, "network": {"egress": "none"}})
    assert r.status_code == 201, r.text
    s = r.json()
    try:
        assert s["id"].startswith("ses_")
        assert r.headers.get("Location", "").endswith(f"/v1/sandbox/sessions/{s['id']}")
        assert s["status"] == "ready"
        assert s["reason"] is None
        assert s["profile"] == profile
        assert s["runtime"] == profile_table[profile]["driver"]
        assert isinstance(s["image"], str) and s["image"]
        assert s["network"] == {"egress": "none"}
        assert s["metadata"] == {"owner": "it", "n": "1"}
        assert s["ttl_s"] == 600
        assert s["limits"]["memory"] == "128Mi"
        assert s["limits"]["cpu"] == "500m"
        assert set(s["capabilities"]) == set(profile_table[profile]["capabilities"])
        assert "exec" in s["capabilities"]
        assert ts(s["expires_at"]) - ts(s["created_at"]) == 600
        assert abs(ts(s["created_at"]) - time.time()) < 60
        assert s["updated_at"]
        # the session's env reaches its commands
        out = alice.exec(s["id"], command=["sh", "-c", "echo $GREETING"])
        assert out["stdout"] == "bonjour\n"
        g = alice.get(f"/v1/sandbox/sessions/{s['id']}")
        assert g.status_code == 200
        assert g.json()["id"] == s["id"] and g.json()["metadata"] == s["metadata"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_create_defaults(alice, profile, profile_table):
    s = alice.new_session(profile)
    try:
        assert s["network"] == {"egress": "none"}
        assert s["metadata"] == {}
        lim = profile_table[profile]["limits"]
        assert s["limits"]["memory"] == lim["memory"]
        assert s["limits"]["pids"] == lim["pids"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_default_profile_used_when_omitted(fresh_tenant, profile_table):
    default = [p for p in profile_table.values() if p["default"]][0]
    r = fresh_tenant.post("/v1/sandbox/sessions", json={})
    if default["available"]:
        assert r.status_code == 201, r.text
        assert r.json()["profile"] == default["name"]
        fresh_tenant.delete(f"/v1/sandbox/sessions/{r.json()['id']}")
    else:
        assert_error(r, 503, "runtime_unavailable")


def test_limits_above_ceiling(fresh_tenant, profile, profile_table):
    r = fresh_tenant.post("/v1/sandbox/sessions",
                          json={"profile": profile, "limits": {"memory": "1024Gi"}})
    e = assert_error(r, 400, "invalid_request", field="limits.memory")
    assert profile_table[profile]["max_limits"]["memory"] in e["message"]
    r = fresh_tenant.post("/v1/sandbox/sessions",
                          json={"profile": profile, "limits": {"cpu": "512"}})
    assert_error(r, 400, "invalid_request", field="limits.cpu")
    assert fresh_tenant.get("/v1/sandbox/sessions").json()["sessions"] == []


def test_list_and_pagination(fresh_tenant, any_profile):
    c = fresh_tenant
    made = [c.new_session(any_profile)["id"] for _ in range(5)]
    try:
        seen, pages, cursor = [], [], None
        while True:
            params = {"limit": 2}
            if cursor:
                params["cursor"] = cursor
            r = c.get("/v1/sandbox/sessions", params=params)
            assert r.status_code == 200, r.text
            body = r.json()
            pages.append(len(body["sessions"]))
            seen += [s["id"] for s in body["sessions"]]
            cursor = body["next_cursor"]
            if cursor is None:
                break
            assert len(pages) < 10, "pagination does not end"
        assert pages == [2, 2, 1]
        assert sorted(seen) == sorted(made)
        assert len(set(seen)) == 5
        full = c.get("/v1/sandbox/sessions").json()
        assert sorted(s["id"] for s in full["sessions"]) == sorted(made)
        assert full["next_cursor"] is None
        # status filter
        c.delete(f"/v1/sandbox/sessions/{made[0]}")
        term = c.get("/v1/sandbox/sessions", params={"status": "terminated"}).json()
        assert [s["id"] for s in term["sessions"]] == [made[0]]
        ready = c.get("/v1/sandbox/sessions", params={"status": "ready"}).json()
        assert sorted(s["id"] for s in ready["sessions"]) == sorted(made[1:])
    finally:
        for sid in made:
            c.delete(f"/v1/sandbox/sessions/{sid}")


def test_patch(alice, session):
    sid = session["id"]
    r = alice.patch(f"/v1/sandbox/sessions/{sid}", json={"metadata": {"stage": "two"},
                                                         "ttl_s": 120})
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["metadata"] == {"stage": "two"}
    assert s["ttl_s"] == 120
    assert abs(ts(s["expires_at"]) - (time.time() + 120)) < 30
    r = alice.patch(f"/v1/sandbox/sessions/{sid}", json={"network": {"egress": "none"}})
    assert r.status_code == 200 and r.json()["network"] == {"egress": "none"}
    # a bad entry is named and changes nothing (docs/network.md)
    assert_error(alice.patch(f"/v1/sandbox/sessions/{sid}",
                             json={"network": {"egress": "allowlist", "allow": ["x..org"]}}),
                 400, "invalid_request", field="network.allow[0]")
    assert_error(alice.patch(f"/v1/sandbox/sessions/{sid}", json={"profile": "process"}),
                 400, "invalid_request", field="profile")
    assert_error(alice.patch(f"/v1/sandbox/sessions/{sid}", json={"ttl_s": "soon"}),
                 400, "invalid_request", field="ttl_s")
    g = alice.get(f"/v1/sandbox/sessions/{sid}").json()
    assert g["metadata"] == {"stage": "two"} and g["network"] == {"egress": "none"}


def test_delete(alice, profile):
    s = alice.new_session(profile)
    sid = s["id"]
    alice.put(f"/v1/sandbox/sessions/{sid}/files?path=/work/keep.txt", data=b"x")
    r = alice.delete(f"/v1/sandbox/sessions/{sid}")
    assert r.status_code == 204, r.text
    assert r.content == b""
    g = alice.get(f"/v1/sandbox/sessions/{sid}")
    assert g.status_code == 200
    assert g.json()["status"] == "terminated"
    assert g.json()["reason"] == "session_deleted"
    assert_error(alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]}),
                 409, "conflict")
    assert_error(alice.get(f"/v1/sandbox/sessions/{sid}/files?path=/work/keep.txt"), 409,
                 "conflict")
    assert_error(alice.put(f"/v1/sandbox/sessions/{sid}/files?path=/work/x", data=b"x"), 409,
                 "conflict")
    assert_error(alice.patch(f"/v1/sandbox/sessions/{sid}", json={"ttl_s": 5}), 409,
                 "conflict")
    # deleting again is harmless; deleting a missing one is 404
    assert alice.delete(f"/v1/sandbox/sessions/{sid}").status_code in (204, 404, 409)
    assert_error(alice.delete("/v1/sandbox/sessions/ses_000000000000000000000000"), 404,
                 "not_found")


def test_delete_kills_running_exec(daemon, alice, profile):
    import threading
    from sbxtest import marker, sleeper, workload_procs
    s = alice.new_session(profile)
    mark = marker()
    box = {}

    def run():
        box["r"] = alice.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                              json={"command": sleeper(mark), "timeout_s": 60})

    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: workload_procs(daemon, mark), 20, what="the sleeper to start")
    t0 = time.monotonic()
    assert alice.delete(f"/v1/sandbox/sessions/{s['id']}").status_code == 204
    t.join(30)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 15
    r = box["r"]
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "killed"
    assert r.json()["reason"] == "session_deleted"
    wait_until(lambda: not workload_procs(daemon, mark), 10, what="the sleeper to die")


def test_ttl_expiry(alice, profile):
    s = alice.new_session(profile, ttl_s=2)
    sid = s["id"]
    assert s["status"] == "ready"

    def expired():
        g = alice.get(f"/v1/sandbox/sessions/{sid}").json()
        return g if g["status"] == "expired" else None

    g = wait_until(expired, 8, interval=0.25, what="status expired")
    assert g["reason"]
    assert_error(alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]}),
                 409, "conflict")


def test_patch_ttl_extends_life(alice, profile):
    s = alice.new_session(profile, ttl_s=2)
    sid = s["id"]
    try:
        assert alice.patch(f"/v1/sandbox/sessions/{sid}", json={"ttl_s": 60}).status_code == 200
        time.sleep(3.5)  # the sleep is the test: past the old TTL, still ready
        assert alice.get(f"/v1/sandbox/sessions/{sid}").json()["status"] == "ready"
        assert alice.exec(sid, command=["true"])["status"] == "succeeded"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{sid}")
