"""Crashes and restarts, each on a daemon of its own: kill -9 during an
execution, the state-dir lock, SIGTERM during work, queued executions that
survive a restart."""
import threading
import time

import pytest

from sbxtest import assert_error, marker, sleeper, wait_until, workload_procs

pytestmark = pytest.mark.slow


def start_with_key(daemon_factory, extra_args=()):
    d = daemon_factory(extra_args=extra_args).start()
    key = d.create_key("alice")
    return d, d.client(key)


def restart_same_state(daemon_factory, d, extra_args=None):
    """A new daemon process on d's state dir (new port: the old socket may
    linger)."""
    d2 = daemon_factory(state_dir=d.state_dir,
                        extra_args=d.extra_args if extra_args is None else extra_args)
    return d2.start()


def test_kill9_during_execution(daemon_factory, profile):
    d, c = start_with_key(daemon_factory)
    mark = marker()
    e = c.new_execution(profile, command=sleeper(mark, 30))
    wait_until(lambda: c.get(f"/v1/sandbox/executions/{e['id']}").json()["status"] == "running",
               20, what="execution running")
    wait_until(lambda: workload_procs(d, mark), 20, what="the sleeper to start")
    s = c.new_session(profile)
    c.put(f"/v1/sandbox/sessions/{s['id']}/files?path=/work/f", data=b"x")

    d.kill9()
    d2 = restart_same_state(daemon_factory, d)
    c2 = d2.client(c.key)  # keys survive: they live in the store
    f = c2.get(f"/v1/sandbox/executions/{e['id']}").json()
    assert f["status"] == "error", f
    assert f["reason"] == "daemon_restarted"
    assert f["finished_at"]
    assert f["error"] and f["error"]["reason"] == "daemon_restarted"
    # nothing of the killed daemon's sandbox survives the restart
    wait_until(lambda: not workload_procs(d, mark), 10, what="the orphaned sleeper to be killed")
    g = c2.get(f"/v1/sandbox/sessions/{s['id']}").json()
    assert g["status"] == "lost", g
    assert_error(c2.post(f"/v1/sandbox/sessions/{s['id']}/exec", json={"command": ["true"]}),
                 409, "conflict")
    # and the restarted daemon works
    n = c2.new_execution(profile, command=["echo", "again"])
    assert c2.wait_execution(n["id"])["stdout"] == "again\n"
    assert c2.get(f"/v1/sandbox/executions/{e['id']}").json()["status"] == "error"
    assert d2.stop() == 0


def test_kill9_during_session_exec(daemon_factory, profile):
    d, c = start_with_key(daemon_factory)
    mark = marker()
    s = c.new_session(profile)

    def run():
        try:
            c.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                   json={"command": sleeper(mark, 30), "timeout_s": 60}, timeout=60)
        except Exception:
            pass  # the daemon died under the request: expected

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: workload_procs(d, mark), 20, what="the sleeper")
    d.kill9()
    t.join(20)
    d2 = restart_same_state(daemon_factory, d)
    wait_until(lambda: not workload_procs(d, mark), 10, what="the orphaned exec to be killed")
    g = d2.client(c.key).get(f"/v1/sandbox/sessions/{s['id']}").json()
    assert g["status"] == "lost"
    assert d2.stop() == 0


def test_second_daemon_refuses_same_state_dir(daemon_factory):
    d, c = start_with_key(daemon_factory)
    other = daemon_factory(state_dir=d.state_dir)
    with pytest.raises(RuntimeError) as ei:
        other.start(timeout=20)
    assert "exited" in str(ei.value), "the second daemon did not exit by itself"
    assert other.proc.returncode != 0
    assert "state dir" in other.log_tail() or "lock" in other.log_tail().lower()
    # the first one is unharmed
    assert d.healthy()
    assert c.get("/v1/sandbox/sessions").status_code == 200
    assert d.stop() == 0


def test_lock_released_after_kill9(daemon_factory):
    d, c = start_with_key(daemon_factory)
    d.kill9()
    d2 = restart_same_state(daemon_factory, d)
    assert d2.client(c.key).get("/v1/sandbox/sessions").status_code == 200
    assert d2.stop() == 0


def test_sigterm_during_execution(daemon_factory, profile):
    d, c = start_with_key(daemon_factory)
    mark = marker()
    e = c.new_execution(profile, command=sleeper(mark, 60))
    wait_until(lambda: workload_procs(d, mark), 20, what="the sleeper")
    s = c.new_session(profile)
    box = {}

    def run():
        try:
            box["r"] = c.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                              json={"command": sleeper(mark + "-x", 60), "timeout_s": 60},
                              timeout=60)
        except Exception as ex:  # a closed connection is acceptable
            box["exc"] = ex

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: workload_procs(d, mark + "-x"), 20, what="the session exec")
    t0 = time.monotonic()
    rc = d.stop(timeout=10)
    assert rc == 0, f"SIGTERM with running work: exit {rc}"
    assert time.monotonic() - t0 < 10
    t.join(10)
    if "r" in box:
        r = box["r"]
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "killed" and r.json()["reason"] == "daemon_shutdown", r.json()
    wait_until(lambda: not workload_procs(d, mark) and not workload_procs(d, mark + "-x"), 10,
               what="running work to be killed at shutdown")
    d2 = restart_same_state(daemon_factory, d)
    c2 = d2.client(c.key)
    f = c2.get(f"/v1/sandbox/executions/{e['id']}").json()
    assert f["status"] == "killed", f
    assert f["reason"] == "daemon_shutdown"
    g = c2.get(f"/v1/sandbox/sessions/{s['id']}").json()
    assert g["status"] in ("terminated", "lost"), g
    assert g["status"] != "ready"
    assert d2.stop() == 0


def test_queued_executions_survive_restart(daemon_factory, any_profile):
    d, c = start_with_key(daemon_factory, extra_args=["--workers", "1"])
    mark = marker()
    busy = c.new_execution(any_profile, command=sleeper(mark, 30))
    wait_until(lambda: workload_procs(d, mark), 20, what="the busy worker")
    queued = [c.new_execution(any_profile, command=["sh", "-c", f"echo queued-{i}"])["id"]
              for i in range(3)]
    for q in queued:
        assert c.get(f"/v1/sandbox/executions/{q}").json()["status"] == "queued"
    d.kill9()
    d2 = restart_same_state(daemon_factory, d)
    c2 = d2.client(c.key)
    assert c2.get(f"/v1/sandbox/executions/{busy['id']}").json()["reason"] == "daemon_restarted"
    for i, q in enumerate(queued):
        f = c2.wait_execution(q, timeout=30)
        assert f["status"] == "succeeded", f
        assert f["stdout"] == f"queued-{i}\n"
    wait_until(lambda: not workload_procs(d, mark), 10, what="the orphan to be killed")
    assert d2.stop() == 0


def test_queued_executions_survive_sigterm(daemon_factory, any_profile):
    d, c = start_with_key(daemon_factory, extra_args=["--workers", "1"])
    mark = marker()
    c.new_execution(any_profile, command=sleeper(mark, 30))
    wait_until(lambda: workload_procs(d, mark), 20, what="the busy worker")
    q = c.new_execution(any_profile, command=["echo", "later"])["id"]
    assert d.stop() == 0
    d2 = restart_same_state(daemon_factory, d)
    f = d2.client(c.key).wait_execution(q, timeout=30)
    assert f["status"] == "succeeded" and f["stdout"] == "later\n", f
    assert d2.stop() == 0


def test_nothing_stays_running_after_restarts(daemon_factory, any_profile):
    d, c = start_with_key(daemon_factory)
    ids = [c.new_execution(any_profile, command=sleeper(marker(), 30))["id"] for _ in range(3)]
    wait_until(lambda: all(c.get(f"/v1/sandbox/executions/{i}").json()["status"] == "running"
                           for i in ids), 30, what="the three to be running")
    d.kill9()
    d2 = restart_same_state(daemon_factory, d)
    c2 = d2.client(c.key)
    for i in ids:
        st = c2.get(f"/v1/sandbox/executions/{i}").json()["status"]
        assert st not in ("running",), st
    for i in ids:
        c2.post(f"/v1/sandbox/executions/{i}/cancel")
    running = c2.list_all("/v1/sandbox/executions", "executions", status="running")
    assert running == []
    assert d2.stop() == 0
