"""Every way an exec can end gives a result, never a 500: a workload that
kills its own supervisor (`kill -9 -1`), a whole sandbox lost under a
memory or fork bomb (gvisor), and OOM kills decided from the cgroup's
counter over the exec whatever the process tree looks like (a shell that
survives the kill of its child).  Run on container and gvisor through the
`profile` fixture (SANDBOXD_TEST_PROFILES=container,gvisor).

Never on the process driver: it has no pid namespace, so `kill -9 -1`
there would reach every process of the daemon's uid on the host."""
import threading

import pytest

from sbxsse import SSE, collect
from sbxtest import assert_error, wait_until

BIG = 'python3 -c "x = bytearray(400 << 20)"'


@pytest.fixture
def walled(profile, profile_table):
    """The run's profile if it has a wall of its own (a pid namespace)."""
    if profile_table[profile]["class"] == "none":
        pytest.skip("the process driver has no pid namespace: kill -1 would reach the host")
    return profile


def gvisor(profile_table, profile):
    return profile_table[profile]["class"] == "user-space-kernel"


def brief(r):
    return {k: r.get(k) for k in ("status", "reason", "exit_code", "signal", "error", "usage")}


# ---- item 8: the exec's supervisor dies, the sandbox lives -----------------

def test_kill_minus_one_is_a_typed_result_and_the_session_lives(alice, walled):
    s = alice.new_session(walled)
    try:
        sid = s["id"]
        assert alice.exec(sid, command=["true"])["status"] == "succeeded"
        # sh's builtin kill: every process of the sandbox user but sh itself
        # and PID 1 — its shepherd (and any idle one) included.
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={
            "command": ["sh", "-c", "echo before; kill -9 -1; sleep 5; echo after"],
            "timeout_s": 60})
        assert r.status_code == 200, r.text
        res = r.json()
        assert (res["status"], res["reason"]) == ("killed", "shepherd_lost"), brief(res)
        assert res["error"] and res["error"]["reason"] == "shepherd_lost", res["error"]
        assert "after" not in res["stdout"]
        assert res["exit_code"] is None and res["usage"]["oom_kills"] == 0
        # the session is still usable, and again after a second time
        for _ in range(2):
            ok = alice.exec(sid, command=["sh", "-c", "echo ok"])
            assert (ok["status"], ok["stdout"]) == ("succeeded", "ok\n"), brief(ok)
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec",
                       json={"command": ["sh", "-c", "kill -9 -1"], "timeout_s": 60})
        assert r.status_code == 200 and r.json()["reason"] == "shepherd_lost", r.text
        g = alice.get(f"/v1/sandbox/sessions/{sid}").json()
        assert g["status"] == "ready", g
        assert alice.exec(sid, command=["true"])["status"] == "succeeded"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_kill_minus_one_from_a_background_process(alice, walled):
    """A background process that kills every process of the sandbox user:
    its own final result and that of a neighbour it took down are typed."""
    s = alice.new_session(walled)
    try:
        sid = s["id"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec",
                       json={"command": ["sleep", "300"], "background": True})
        assert r.status_code == 202, r.text
        victim = r.json()["pid"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={
            "command": ["sh", "-c", "sleep 1; kill -9 -1; sleep 5"], "background": True})
        assert r.status_code == 202, r.text
        killer = r.json()["pid"]

        def ended(pid):
            p = alice.get(f"/v1/sandbox/sessions/{sid}/processes/{pid}").json()
            return p if p["status"] == "exited" else None
        for pid in (killer, victim):
            p = wait_until(lambda: ended(pid), 60, interval=0.2, what=f"process {pid}")
            assert (p["result_status"], p["reason"]) == ("killed", "shepherd_lost"), p
        assert alice.exec(sid, command=["true"])["status"] == "succeeded"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- item 8: the whole sandbox goes (gvisor) -------------------------------

def test_gvisor_fork_bomb_is_a_result(alice, profile, profile_table):
    if not gvisor(profile_table, profile):
        pytest.skip("a fork bomb costs only the exec on a shared-kernel sandbox (test_exec)")
    s = alice.new_session(profile, limits={"pids": 64})
    try:
        r = alice.post(f"/v1/sandbox/sessions/{s['id']}/exec", json={
            "command": ["sh", "-c", "for i in $(seq 3000); do sleep 30 & done; wait"],
            "timeout_s": 30})
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["status"] != "succeeded", brief(res)
        if res["reason"] not in ("timeout", "exit"):
            # the sandbox went: the result names the limit that took it
            assert (res["status"], res["reason"]) == ("killed", "pids"), brief(res)
            assert res["error"] and "pids" in res["error"]["message"], brief(res)
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


TYPED_AFTER_BOMB = {("succeeded", "exit"), ("failed", "pids"), ("killed", "pids"),
                    ("error", "sandbox_lost")}


def test_gvisor_bash_fork_bomb_then_the_session(alice, profile, profile_table):
    """A self-replicating bomb under the profile's default limits: its exec
    and every exec after it are results (or 409 once the session ended),
    never a 500 — whether the leftovers fill the pids limit or not."""
    if not gvisor(profile_table, profile):
        pytest.skip("gvisor only: the container's freezer kill ends the bomb (test_exec)")
    s = alice.new_session(profile)
    try:
        sid = s["id"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={
            "command": ["bash", "-c", "b(){ b|b& }; b; sleep 60"], "timeout_s": 15})
        assert r.status_code == 200, r.text
        assert r.json()["status"] in ("timeout", "killed", "failed"), brief(r.json())
        for _ in range(3):
            r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]})
            assert r.status_code in (200, 409), r.text
            if r.status_code == 200:
                assert (r.json()["status"], r.json()["reason"]) in TYPED_AFTER_BOMB, r.text
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_gvisor_memory_bomb_is_a_result(alice, profile, profile_table):
    if not gvisor(profile_table, profile):
        pytest.skip("gvisor only: a container's OOM costs only the exec (test_exec)")
    s = alice.new_session(profile, limits={"memory": "128Mi"})
    try:
        sid = s["id"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec",
                       json={"command": ["sh", "-c", BIG], "timeout_s": 60})
        assert r.status_code == 200, r.text
        res = r.json()
        assert (res["status"], res["reason"]) == ("oom_killed", "memory"), brief(res)
        assert res["usage"]["oom_kills"] >= 1
        # the Sentry went with it: a later exec is a typed result or a 409
        # once the reaper marked the session, never a 500
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]})
        assert r.status_code in (200, 409), r.text
        if r.status_code == 200:
            assert (r.json()["status"], r.json()["reason"]) == ("error", "sandbox_lost"), r.text

        def gone():
            g = alice.get(f"/v1/sandbox/sessions/{sid}").json()
            return g if g["status"] != "ready" else None
        g = wait_until(gone, 15, what="the session to end")
        assert (g["status"], g["reason"]) == ("failed", "sandbox_lost"), g
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


# Forks sleepers until the pids limit says no, and keeps it full.
FILLER = ("import os, time\n"
          "while True:\n"
          "    try:\n"
          "        if os.fork() == 0:\n"
          "            time.sleep(300)\n"
          "            os._exit(0)\n"
          "    except OSError:\n"
          "        time.sleep(0.02)\n")


def test_full_pids_limit_is_a_result(alice, walled):
    """Background sleepers fill the session's pids limit; an exec then cannot
    be forked at all: a failed/pids result naming the limit, not a 500.
    Once they are gone, execs run again."""
    s = alice.new_session(walled, limits={"pids": 16})
    try:
        sid = s["id"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={
            "command": ["python3", "-c", FILLER],
            "background": True})
        assert r.status_code == 202, r.text
        filler = r.json()["pid"]

        def full():
            r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["true"]})
            assert r.status_code == 200, r.text
            return r.json() if r.json()["status"] != "succeeded" else None
        res = wait_until(full, 60, interval=0.5, what="the pids limit to fill")
        assert (res["status"], res["reason"]) == ("failed", "pids"), brief(res)
        assert "pids" in res["error"]["message"] and res["exit_code"] == 126, brief(res)
        r = alice.post(f"/v1/sandbox/sessions/{sid}/processes/{filler}/signal",
                       json={"signal": "KILL"})
        assert r.status_code == 200, r.text
        ok = wait_until(lambda: alice.exec(sid, command=["true"])["status"] == "succeeded",
                        60, interval=0.5, what="execs to run again")
        assert ok
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_dev_tty_is_a_client_error(alice, walled):
    s = alice.new_session(walled)
    try:
        r = alice.get(f"/v1/sandbox/sessions/{s['id']}/files", params={"path": "/dev/tty"})
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
        assert_error(r, r.status_code, r.json()["error"]["code"])
        assert alice.exec(s["id"], command=["true"])["status"] == "succeeded"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_sbx_init_environ_shows_nothing(alice, walled):
    """docs/isolation.md: a workload learns nothing from sbx-init's
    /proc/1/environ — EACCES on container (non-dumpable), and on gvisor
    (which does not check dumpability there) sbx-init has wiped it."""
    s = alice.new_session(walled, env={"SBX_OUTCOME_MARK": "m4rk"})
    try:
        r = alice.exec(s["id"], command=["python3", "-c", (
            "import sys\n"
            "try:\n"
            "    d = open('/proc/1/environ', 'rb').read()\n"
            "except PermissionError:\n"
            "    print('EACCES'); sys.exit(0)\n"
            "print('BYTES', len(d.strip(bytes(1))))\n")])
        assert r["status"] == "succeeded", brief(r)
        assert r["stdout"] in ("EACCES\n", "BYTES 0\n"), r["stdout"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- item 9: OOM from the cgroup's counter ---------------------------------

def test_oom_under_a_surviving_shell(alice, walled):
    s = alice.new_session(walled, limits={"memory": "128Mi"})
    try:
        r = alice.exec(s["id"], command=["sh", "-c", BIG], timeout_s=60)
        assert (r["status"], r["reason"]) == ("oom_killed", "memory"), brief(r)
        assert r["usage"]["oom_kills"] >= 1
        assert r["error"] and r["error"]["reason"] == "memory" and "128Mi" in r["error"]["message"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_oom_of_a_child_but_exit_zero_succeeds(alice, walled, profile_table):
    if gvisor(profile_table, walled):
        pytest.skip("gvisor: the host OOM killer takes the Sentry, nothing exits 0 after it")
    s = alice.new_session(walled, limits={"memory": "128Mi"})
    try:
        r = alice.exec(s["id"], command=["sh", "-c", BIG + "; echo survived"], timeout_s=60)
        assert (r["status"], r["reason"], r["exit_code"]) == ("succeeded", "exit", 0), brief(r)
        assert r["stdout"] == "survived\n" and r["usage"]["oom_kills"] >= 1, brief(r)
        # the next exec starts from a clean count
        r = alice.exec(s["id"], command=["sh", "-c", "exit 3"])
        assert (r["status"], r["usage"]["oom_kills"]) == ("failed", 0), brief(r)
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_oom_attribution_across_concurrent_execs(alice, walled, profile_table):
    """The documented rule (docs/isolation.md, "OOM"): execs of a session
    share its cgroup, so an OOM kill counts in every exec running at that
    moment; those that exit 0 stay succeeded, those that fail are
    oom_killed; an exec that starts after it sees 0."""
    if gvisor(profile_table, walled):
        pytest.skip("gvisor: the OOM takes the whole sandbox, every exec in it")
    s = alice.new_session(walled, limits={"memory": "128Mi"})
    try:
        sid = s["id"]
        out = {}

        def bystander(name, code):
            # running before the hog allocates, ended only after its OOM
            script = (f"touch /work/up-{name}; "
                      f"while [ ! -e /work/hog-done ]; do sleep 0.05; done; exit {code}")
            out[name] = alice.exec(sid, command=["sh", "-c", script], timeout_s=90)
        threads = [threading.Thread(target=bystander, args=a) for a in (("ok", 0), ("bad", 1))]
        for t in threads:
            t.start()
        hog = alice.exec(sid, command=["sh", "-c", (
            "while [ ! -e /work/up-ok ] || [ ! -e /work/up-bad ]; do sleep 0.05; done; "
            + BIG + "; rc=$?; touch /work/hog-done; exit $rc")], timeout_s=90)
        for t in threads:
            t.join(90)
        assert (hog["status"], hog["reason"]) == ("oom_killed", "memory"), brief(hog)
        ok, bad = out["ok"], out["bad"]
        assert (ok["status"], ok["exit_code"]) == ("succeeded", 0), brief(ok)
        assert ok["usage"]["oom_kills"] >= 1, brief(ok)
        assert (bad["status"], bad["reason"]) == ("oom_killed", "memory"), brief(bad)
        assert bad["exit_code"] == 1 and bad["usage"]["oom_kills"] >= 1, brief(bad)
        after = alice.exec(sid, command=["sh", "-c", "exit 1"])
        assert (after["status"], after["usage"]["oom_kills"]) == ("failed", 0), brief(after)
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_oom_in_a_one_shot_execution(alice, walled):
    e = alice.new_execution(walled, command=["sh", "-c", BIG],
                            limits={"memory": "128Mi", "timeout_s": 60})
    f = alice.wait_execution(e["id"], timeout=120)
    assert (f["status"], f["error"]["reason"]) == ("oom_killed", "memory"), f
    assert f["usage"]["oom_kills"] >= 1, f
    # and a listing's summary rows carry it too
    r = alice.get("/v1/sandbox/executions", params={"limit": 100})
    listed = [x for x in r.json()["executions"] if x["id"] == e["id"]]
    assert listed and listed[0]["usage"]["oom_kills"] >= 1, listed


def test_oom_in_a_background_process(alice, walled):
    """The final result of a background process, as its output stream's
    `exit` event carries it: under gvisor the session ends with the Sentry
    a moment later, and the stream (attached before) still gets it."""
    s = alice.new_session(walled, limits={"memory": "128Mi"})
    try:
        sid = s["id"]
        r = alice.post(f"/v1/sandbox/sessions/{sid}/exec", json={
            "command": ["sh", "-c", "read go; " + BIG], "background": True})
        assert r.status_code == 202, r.text
        pid = r.json()["pid"]
        url = f"/v1/sandbox/sessions/{sid}/processes/{pid}"
        stream = alice.get(url + "/output", headers=SSE, stream=True)
        assert stream.status_code == 200, stream.text
        r = alice.post(url + "/stdin", data=b"go\n")
        assert r.status_code in (200, 204), r.text
        _, ex = collect(stream)
        assert ex, "no exit event"
        assert (ex["status"], ex["reason"]) == ("oom_killed", "memory"), brief(ex)
        assert ex["usage"]["oom_kills"] >= 1, brief(ex)
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")
