"""What one tenant can take from the daemon itself: CPU charged from the
sandbox's cgroup whatever ran it (background processes, contexts), the
output the daemon keeps in memory (a per-tenant budget: RSS stays bounded),
the daemon's file descriptors per session and per tenant, and streams that
end with their session (`end` {reason} at once, not when the client gives
up)."""
import http.client
import json
import os
import queue
import socket
import tempfile
import threading
import time
import urllib.parse

import pytest

import sbxsse

from sbxtest import assert_error, wait_until


def write_config(text):
    fd, path = tempfile.mkstemp(prefix="sbx-res-", suffix=".ini")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def own_daemon(daemon_factory, text):
    path = write_config(text)
    d = daemon_factory(extra_args=["--config", path])
    d.start()
    os.unlink(path)
    return d


def client(d, tenant):
    return d.client(d.create_key(tenant))


def start(c, sid, expect=202, **body):
    r = c.post(f"/v1/sandbox/sessions/{sid}/exec", json=dict(body, background=True))
    assert r.status_code == expect, r.text
    return r.json()["pid"] if expect == 202 else r


def proc_url(sid, pid, tail=""):
    return f"/v1/sandbox/sessions/{sid}/processes/{pid}{tail}"


def available(c, name):
    profiles = c.get("/v1/sandbox/profiles").json()["profiles"]
    p = [p for p in profiles if p["name"] == name]
    return p[0] if p and p[0].get("available") else None


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Stream:
    """An SSE response read on a thread into a queue of (event, data);
    "<eof>" when the server closed it."""

    def __init__(self, c, path):
        u = urllib.parse.urlsplit(c.base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.conn.request("GET", path, headers=c.headers({"Accept": "text/event-stream"}))
        self.r = self.conn.getresponse()
        assert self.r.status == 200, self.r.read()
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        sbxsse.pump(self.r, self.q)

    def until(self, pred, timeout, what):
        return sbxsse.until(self.q, pred, timeout, what)[-1]

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self.conn.close()


# ---- CPU: charged from the cgroup, refused and stopped once used up ----

BURN_FOREVER = ["sh", "-c", "while :; do :; done"]


def test_background_cpu_is_charged_then_refused_and_stopped(daemon_factory, profile):
    """Charged from the session's cgroup (cpuacct on v1, cpu.stat on v2; on
    gvisor the cgroup holds runsc's Sentry, which runs the workload)."""
    if profile == "process":
        pytest.skip("the process driver puts a session in no cgroup of its own")
    d = own_daemon(daemon_factory, "[tenant.burner]\nquota_cpu_seconds_per_day = 2\n")
    c = client(d, "burner")
    if not available(c, profile):
        pytest.skip(f"the {profile} driver (cgroup CPU accounting) is not available here")
    s = c.new_session(profile)
    sid = s["id"]
    ctx = None
    if "contexts" in (available(c, profile).get("capabilities") or []):
        r = c.post(f"/v1/sandbox/sessions/{sid}/contexts", json={"language": "python"})
        ctx = r.json()["id"] if r.status_code == 201 else None
    pid = start(c, sid, command=BURN_FOREVER)

    # The daemon stops the burner itself once the day's CPU is used up.
    def stopped():
        p = c.get(proc_url(sid, pid)).json()
        return p if p["status"] == "exited" else None
    p = wait_until(stopped, 60, interval=0.2, what="the burner to be stopped by the quota")
    assert p["reason"] == "quota", p
    assert p["result_status"] == "killed", p

    # Charged: the usage report shows at least the quota's worth of CPU.
    total = c.get("/v1/sandbox/usage").json()["total"]["cpu_seconds"]
    assert total >= 2.0, total

    # Refused from now on, with the quota envelope.
    r = start(c, sid, expect=429, command=["true"])
    e = assert_error(r, 429, "quota_exceeded")
    assert e["details"]["limit"] == "cpu_seconds_per_day", e
    r = c.post(f"/v1/sandbox/sessions/{sid}/contexts", json={"language": "python"})
    assert_error(r, 429, "quota_exceeded")
    if ctx:
        r = c.post(f"/v1/sandbox/sessions/{sid}/contexts/{ctx}/run", json={"code": "1"})
        assert_error(r, 429, "quota_exceeded")
    # Another tenant is not affected.
    o = client(d, "other")
    osid = o.new_session(profile)["id"]
    start(o, osid, command=["true"])


def test_context_run_is_charged_and_stopped(daemon_factory):
    d = own_daemon(daemon_factory, "[tenant.ctxburner]\nquota_cpu_seconds_per_day = 2\n")
    c = client(d, "ctxburner")
    prof = available(c, "container")
    if not prof or "contexts" not in (prof.get("capabilities") or []):
        pytest.skip("no container profile with contexts here")
    sid = c.new_session("container")["id"]
    r = c.post(f"/v1/sandbox/sessions/{sid}/contexts", json={"language": "python"})
    if r.status_code != 201:
        pytest.skip(f"no python interpreter for contexts: {r.text}")
    cid = r.json()["id"]
    # A run that would burn CPU for ten minutes: the quota ends it first.
    t0 = time.monotonic()
    r = c.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run",
               json={"code": "while True: pass", "timeout_s": 600})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] == "killed" and res["reason"] == "quota", res
    assert time.monotonic() - t0 < 60
    assert c.get("/v1/sandbox/usage").json()["total"]["cpu_seconds"] >= 2.0
    for path in (f"contexts/{cid}/run", f"contexts/{cid}/restart"):
        r = c.post(f"/v1/sandbox/sessions/{sid}/{path}", json={"code": "1"}
                   if path.endswith("run") else None)
        assert_error(r, 429, "quota_exceeded")


# ---- streams end with their session ----

def test_follower_and_watch_end_at_once_on_session_delete(alice, capable):
    s = alice.new_session(capable("watch"))
    sid = s["id"]
    pid = start(alice, sid, command=["sh", "-c", "echo hi; exec sleep 300"])
    follow = Stream(alice, proc_url(sid, pid, "/output"))
    follow.until(lambda e, d: e == "stdout", 10, "the first output")
    alice.exec(sid, command=["mkdir", "-p", "/work/w"])
    watch = Stream(alice, f"/v1/sandbox/sessions/{sid}/watch?path=/work/w")
    watch.until(lambda e, d: e == "ready", 10, "watch ready")
    try:
        t0 = time.monotonic()
        assert alice.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
        _, d = follow.until(lambda e, d: e == "end", 5, "the follower's end event")
        assert d == {"reason": "session_deleted"}, d
        follow.until(lambda e, d: e == "<eof>", 5, "the follower to close")
        _, d = watch.until(lambda e, d: e == "end", 5, "the watch's end event")
        assert d["reason"] == "session_deleted", d
        watch.until(lambda e, d: e == "<eof>", 5, "the watch to close")
        assert time.monotonic() - t0 < 4.0
    finally:
        follow.close()
        watch.close()


def test_streamed_exec_ends_with_its_session(alice, profile):
    s = alice.new_session(profile)
    sid = s["id"]
    u = urllib.parse.urlsplit(alice.base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("POST", f"/v1/sandbox/sessions/{sid}/exec",
                 body=json.dumps({"command": ["sh", "-c", "echo hi; exec sleep 300"]}),
                 headers=alice.headers({"Accept": "text/event-stream",
                                        "Content-Type": "application/json"}))
    st = Stream.__new__(Stream)
    st.conn, st.r, st.q = conn, conn.getresponse(), queue.Queue()
    assert st.r.status == 200
    threading.Thread(target=st._read, daemon=True).start()
    try:
        st.until(lambda e, d: e == "stdout", 10, "the first output")
        assert alice.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
        _, r = st.until(lambda e, d: e == "exit", 5, "the exit event")
        assert r["reason"] == "session_deleted", r
        _, d = st.until(lambda e, d: e == "end", 5, "the end event")
        assert d == {"reason": "session_deleted"}, d
        st.until(lambda e, d: e == "<eof>", 5, "the stream to close")
    finally:
        st.close()


def test_follower_ends_when_the_session_expires(alice, profile):
    s = alice.new_session(profile, ttl_s=3)
    sid = s["id"]
    pid = start(alice, sid, command=["sh", "-c", "echo hi; exec sleep 300"])
    follow = Stream(alice, proc_url(sid, pid, "/output"))
    try:
        follow.until(lambda e, d: e == "stdout", 10, "the first output")
        # TTL 3 s, reaper tick 1 s: generous for a loaded machine.
        _, d = follow.until(lambda e, d: e == "end", 20, "the follower's end event")
        assert d == {"reason": "session_expired"}, d
        follow.until(lambda e, d: e == "<eof>", 5, "the follower to close")
    finally:
        follow.close()


# ---- fds: bounded per tenant, the others unaffected ----

def test_fd_bound_refuses_one_tenant_cleanly(daemon_factory):
    d = own_daemon(daemon_factory, "[server]\nfds_per_tenant = 36\n")
    hog, other = client(d, "hog"), client(d, "other")
    sid = hog.new_session("process")["id"]
    pids = [start(hog, sid, command=["sleep", "300"]) for _ in range(6)]  # 6 x 6 fds
    r = start(hog, sid, expect=429, command=["sleep", "300"])
    e = assert_error(r, 429, "quota_exceeded")
    assert e["details"] == {"limit": "fds_per_tenant", "value": 36}, e
    # A follower needs an fd too: refused the same way, not a hang.
    r = hog.get(proc_url(sid, pids[0], "/output"), headers={"Accept": "text/event-stream"})
    assert_error(r, 429, "quota_exceeded")
    # Closing a process's stdin closes the daemon's end of the pipe: that fd
    # is given back, and now the follower fits.
    r = hog.post(proc_url(sid, pids[1], "/stdin") + "?eof=true", data=b"")
    assert r.status_code == 200, r.text
    follow = Stream(hog, proc_url(sid, pids[1], "/output"))
    follow.close()
    # The other tenant works.
    osid = other.new_session("process")["id"]
    assert other.exec(osid, command=["echo", "ok"])["stdout"] == "ok\n"
    start(other, osid, command=["true"])
    # An ended process gives its fds back.
    hog.post(proc_url(sid, pids[0], "/signal"), json={"signal": "KILL"})
    wait_until(lambda: hog.get(proc_url(sid, pids[0])).json()["status"] == "exited", 30,
               interval=0.2, what="the killed process to end")
    wait_until(lambda: hog.post(f"/v1/sandbox/sessions/{sid}/exec", json={
        "command": ["sleep", "300"], "background": True}).status_code == 202, 30,
        interval=0.2, what="room after a process ended")


def test_fds_per_session_bounds_one_session_and_counts_buffered_execs(daemon_factory):
    """fds_per_session holds one session to its share, whatever holds the
    fds: two background processes take 12, so a third and a buffered exec
    (5: its pipes, control socket, cancel token, connection) are refused
    with the limit named; the tenant's other session is unaffected, and the
    exec fits again once a process has ended."""
    d = own_daemon(daemon_factory, "[server]\nfds_per_session = 12\n")
    c = client(d, "busy")
    sid, other = (c.new_session("process")["id"] for _ in range(2))
    pids = [start(c, sid, command=["sleep", "300"]) for _ in range(2)]  # 2 x 6 fds
    e = assert_error(start(c, sid, expect=429, command=["sleep", "300"]), 429, "quota_exceeded")
    assert e["details"] == {"limit": "fds_per_session", "value": 12}, e
    r = c.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["echo", "hi"]})
    e = assert_error(r, 429, "quota_exceeded")
    assert e["details"] == {"limit": "fds_per_session", "value": 12}, e
    assert c.exec(other, command=["echo", "ok"])["stdout"] == "ok\n"
    c.post(proc_url(sid, pids[0], "/signal"), json={"signal": "KILL"})
    wait_until(lambda: c.post(f"/v1/sandbox/sessions/{sid}/exec", json={
        "command": ["echo", "hi"]}).status_code == 200, 30, interval=0.2,
        what="room for a buffered exec after a process ended")
    assert d.healthy()


def test_buffered_exec_output_is_charged_to_the_budget(daemon_factory):
    """A buffered exec's capture comes out of the same output budget as
    background processes' logs: with 256 KiB for the whole daemon, an exec
    printing 1 MB (under its 1 MiB limits.output) keeps a shorter head and
    tail and counts the rest as dropped, instead of holding the megabyte."""
    d = own_daemon(daemon_factory, "[server]\noutput_memory = 256Ki\n")
    c = client(d, "chatty")
    sid = c.new_session("process")["id"]
    r = c.exec(sid, command=["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x"])
    assert r["exit_code"] == 0, r
    assert r["stdout_truncated"] is True, len(r["stdout"])
    assert len(r["stdout"]) <= 64 * 1024, len(r["stdout"])
    assert len(r["stdout"]) + r["stdout_dropped_bytes"] == 1000000, r["stdout_dropped_bytes"]
    assert set(r["stdout"]) == {"x"}
    # An execution's capture is charged the same way.
    e = c.new_execution("process", command=["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' y"])
    e = c.wait_execution(e["id"])
    assert e["status"] == "succeeded", e
    assert e["stdout_truncated"] is True and len(e["stdout"]) <= 64 * 1024, len(e["stdout"])


def test_followers_end_on_daemon_shutdown(daemon_factory):
    """SIGTERM ends every session: a follower gets `end` {daemon_shutdown}
    before the daemon exits, not a reset connection."""
    d = own_daemon(daemon_factory, "")
    c = client(d, "stopping")
    sid = c.new_session("process")["id"]
    pid = start(c, sid, command=["sh", "-c", "echo hi; exec sleep 300"])
    follow = Stream(c, proc_url(sid, pid, "/output"))
    try:
        follow.until(lambda e, d: e == "stdout", 10, "the first output")
        d.stop()
        _, got = follow.until(lambda e, d: e == "end", 10, "the follower's end event")
        assert got == {"reason": "daemon_shutdown"}, got
    finally:
        follow.close()


# ---- memory: the output kept for one tenant is bounded ----

def test_rss_bounded_under_heavy_output(daemon_factory):
    """The heaviest load the defaults allow one tenant: background processes
    until fds_per_tenant (1024) refuses the next (170 of them, over three
    sessions: at most 64 per session), each printing 3 MB to stdout and to
    stderr (more than its 1 MiB per stream) and staying alive.  What the
    daemon keeps is bounded by the per-tenant budget (64 MiB by default),
    not 170 x 2 x 2 MiB."""
    d = own_daemon(daemon_factory, "[server]\nquota_sessions = 3\n")
    c = client(d, "heavy")
    sids = [c.new_session("process")["id"] for _ in range(3)]
    base = vm_rss_kib(d.pid)
    script = ("head -c 3000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2;"
              " exec sleep 300")
    started, refused = [], None
    for sid in sids:
        for _ in range(64):
            r = c.post(f"/v1/sandbox/sessions/{sid}/exec",
                       json={"command": ["sh", "-c", script], "background": True})
            if r.status_code != 202:
                refused = r
                break
            started.append((sid, r.json()["pid"]))
        if refused is not None:
            break
    e = assert_error(refused, 429, "quota_exceeded")
    assert e["details"] == {"limit": "fds_per_tenant", "value": 1024}, e
    assert len(started) == 1024 // 6, len(started)

    def all_written():
        for sid, pid in started:
            p = c.get(proc_url(sid, pid)).json()
            if p["stdout_bytes"] < 3000000 or p["stderr_bytes"] < 3000000:
                return False
        return True
    wait_until(all_written, 180, interval=0.5, what="every writer to finish writing")
    grown_mib = (vm_rss_kib(d.pid) - base) / 1024
    print(f"daemon RSS: {base // 1024} MiB before, grew by {grown_mib:.0f} MiB with "
          f"{len(started)} processes; fds: {len(os.listdir(f'/proc/{d.pid}/fd'))}")
    # The bound stated in docs/configuration.md: the per-tenant budget plus
    # 48 MiB for threads, allocator slack and the store.
    assert grown_mib <= 64 + 48, f"daemon RSS grew by {grown_mib:.0f} MiB"
    # What is kept still reads back with correct offsets and counts.
    for sid, pid in (started[0], started[-1]):
        out = c.get(proc_url(sid, pid, "/output")).json()
        assert out["stdout_next_offset"] == 3000000
        assert len(out["stdout"]) + out["stdout_dropped_bytes"] == 3000000
        assert set(out["stdout"]) <= {"x"} and set(out["stderr"]) <= {"y"}
    assert d.healthy()


def test_ended_logs_give_their_memory_back(daemon_factory):
    """Ended processes' logs are retained too, within the same budget: when
    it runs short the oldest ended ones are dropped (counted, offsets kept),
    and a follower replaying one is told about the gap."""
    d = own_daemon(daemon_factory, "[server]\noutput_memory_per_tenant = 8Mi\n")
    c = client(d, "logs")
    sid = c.new_session("process")["id"]
    script = "head -c 3000000 /dev/zero | tr '\\0' x"
    pids = []
    for _ in range(20):
        pids.append(start(c, sid, command=["sh", "-c", script]))
        pid = pids[-1]
        wait_until(lambda: c.get(proc_url(sid, pid)).json()["status"] == "exited", 30,
                   interval=0.1, what="the writer to end")
    first = c.get(proc_url(sid, pids[0], "/output")).json()
    assert first["stdout"] == "" and first["stdout_dropped_bytes"] == 3000000, \
        len(first["stdout"])
    assert first["stdout_next_offset"] == 3000000
    last = c.get(proc_url(sid, pids[-1], "/output")).json()
    assert len(last["stdout"]) > 0 and last["stdout_next_offset"] == 3000000
    follow = Stream(c, proc_url(sid, pids[0], "/output"))
    try:
        _, g = follow.until(lambda e, d: e == "gap", 10, "the gap event")
        assert g["from"] == 0 and g["to"] == 3000000, g
        _, r = follow.until(lambda e, d: e == "exit", 10, "the exit event")
        assert r["exit_code"] == 0 and r["stdout_dropped_bytes"] == 3000000, r
    finally:
        follow.close()
