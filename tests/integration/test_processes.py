"""Background processes: background:true → 202 {pid};
list/get; output replay from byte offsets (JSON and SSE follow, re-attachable);
stdin with a way to close it; signals by name; bounded per-process buffers
that never block the process; killed with their session."""
import time

import pytest

from sbxsse import SSE, chunk_bytes, collect, events
from sbxtest import assert_error, marker, proc_status, sleeper, wait_until, workload_procs


def start(client, sid, expect=202, **body):
    r = client.post(f"/v1/sandbox/sessions/{sid}/exec", json=dict(body, background=True))
    assert r.status_code == expect, r.text
    return r.json()["pid"] if expect == 202 else r


def proc_url(sid, pid, tail=""):
    return f"/v1/sandbox/sessions/{sid}/processes/{pid}{tail}"


def wait_exited(client, sid, pid, timeout=30):
    def done():
        p = client.get(proc_url(sid, pid)).json()
        return p if p["status"] == "exited" else None
    return wait_until(done, timeout, interval=0.1, what=f"process {pid} to exit")


def test_start_list_get(alice, session):
    sid = session["id"]
    pid = start(alice, sid, command=["sh", "-c", "echo started; sleep 30"])
    assert isinstance(pid, int) and pid > 0
    procs = alice.get(f"/v1/sandbox/sessions/{sid}/processes").json()["processes"]
    mine = [p for p in procs if p["pid"] == pid]
    assert mine and mine[0]["status"] == "running" and mine[0]["command"][0] == "sh"
    assert mine[0]["pty"] is False and mine[0]["exit_code"] is None
    p = alice.get(proc_url(sid, pid)).json()
    assert p["status"] == "running" and p["started_at"] and p["finished_at"] is None
    wait_until(lambda: alice.get(proc_url(sid, pid, "/output")).json()["stdout"], 10)
    r = alice.post(proc_url(sid, pid, "/signal"), json={"signal": "TERM"})
    assert r.status_code == 200, r.text
    p = wait_exited(alice, sid, pid)
    assert p["signal"] == 15 and p["exit_code"] is None and p["finished_at"]
    assert p["usage"]["cpu_seconds"] >= 0
    out = alice.get(proc_url(sid, pid, "/output")).json()
    assert out["stdout"] == "started\n" and out["stdout_next_offset"] == 8


def test_unknown_process_and_command(alice, session):
    sid = session["id"]
    assert_error(alice.get(proc_url(sid, 999999)), 404, "not_found")
    assert_error(alice.get(proc_url(sid, "abc")), 404, "not_found")
    r = start(alice, sid, expect=400, command=["no-such-program-xyz"])
    e = assert_error(r, 400, "invalid_request", "command")
    assert "not found" in e["message"]


def test_stdin_round_trip_and_eof(alice, session):
    sid = session["id"]
    pid = start(alice, sid, command=["cat"])
    r = alice.post(proc_url(sid, pid, "/stdin"), data=b"hello ")
    assert r.status_code == 200 and r.json()["written"] == 6
    wait_until(lambda: alice.get(proc_url(sid, pid, "/output")).json()["stdout"] == "hello ", 10)
    assert alice.get(proc_url(sid, pid)).json()["status"] == "running"
    r = alice.post(proc_url(sid, pid, "/stdin") + "?eof=true", data=b"world\n")
    assert r.status_code == 200, r.text
    p = wait_exited(alice, sid, pid)  # cat saw EOF and exited
    assert p["exit_code"] == 0
    assert alice.get(proc_url(sid, pid, "/output")).json()["stdout"] == "hello world\n"
    assert_error(alice.post(proc_url(sid, pid, "/stdin"), data=b"late"), 409, "conflict")


def test_stdin_full_pipe_is_409_not_a_hang(alice, session):
    sid = session["id"]
    pid = start(alice, sid, command=["sleep", "60"])  # never reads stdin
    t0 = time.monotonic()
    r = alice.post(proc_url(sid, pid, "/stdin"), data=b"x" * (4 << 20))
    assert time.monotonic() - t0 < 15
    e = assert_error(r, 409, "conflict")
    assert "full" in e["message"]
    alice.post(proc_url(sid, pid, "/signal"), json={"signal": "KILL"})


def test_sigint_to_a_busy_loop(alice, session):
    sid = session["id"]
    pid = start(alice, sid, command=["python3", "-c", "print('ready', flush=True)\nwhile True: pass"])
    wait_until(lambda: "ready" in alice.get(proc_url(sid, pid, "/output")).json()["stdout"], 20)
    r = alice.post(proc_url(sid, pid, "/signal"), json={"signal": "SIGINT"})
    assert r.status_code == 200 and r.json()["signal"] == 2
    p = wait_exited(alice, sid, pid)
    res = alice.get(proc_url(sid, pid, "/output")).json()["result"]
    assert "KeyboardInterrupt" in res["stderr"], res
    # Python ends an uncaught KeyboardInterrupt by re-raising SIGINT on itself.
    assert (p["signal"] == 2 and res["status"] == "killed") or \
        (p["exit_code"] == 1 and res["status"] == "failed"), res


def test_signal_names(alice, session):
    sid = session["id"]
    pid = start(alice, sid, command=["sleep", "30"])
    for bad in ("SIGNOPE", "", 9, None):
        assert_error(alice.post(proc_url(sid, pid, "/signal"), json={"signal": bad}), 400,
                     "invalid_request", "signal")
    assert_error(alice.post(proc_url(sid, pid, "/resize"), json={"cols": 80, "rows": 24}), 409,
                 "conflict")
    assert alice.post(proc_url(sid, pid, "/signal"), json={"signal": "kill"}).status_code == 200
    p = wait_exited(alice, sid, pid)
    assert p["signal"] == 9
    assert_error(alice.post(proc_url(sid, pid, "/signal"), json={"signal": "TERM"}), 409,
                 "conflict")


def test_replay_from_offset_after_reconnect(alice, session):
    sid = session["id"]
    script = "for i in $(seq 1 40); do echo line$i; echo e$i >&2; sleep 0.05; done"
    pid = start(alice, sid, command=["sh", "-c", script])
    expected = "".join(f"line{i}\n" for i in range(1, 41)).encode()
    r = alice.get(proc_url(sid, pid, "/output"), headers=SSE, stream=True)
    assert r.status_code == 200
    got = b""
    for e, d in events(r):
        if e == "stdout":
            assert d["offset"] == len(got)
            got += chunk_bytes(d)
            if len(got) > 30:
                break
    r.close()  # the process keeps running without a reader: it writes on
    wait_until(lambda: alice.get(proc_url(sid, pid)).json()["stdout_bytes"] > len(got) + 20, 30,
               what="output written with no reader attached")
    r = alice.get(proc_url(sid, pid, "/output"), params={"stdout_offset": len(got),
                                                         "stderr_offset": 10 ** 9},
                  headers=SSE, stream=True)
    evs, ex = collect(r)
    for e, d in evs:
        if e == "stdout":
            assert d["offset"] == len(got), (d, len(got))
            got += chunk_bytes(d)
    assert got == expected
    assert not [d for e, d in evs if e == "stderr"], "stderr was asked from its end"
    assert ex["status"] == "succeeded" and ex["stdout"] == expected.decode()
    # Re-attaching after the end replays from any offset and ends with exit.
    evs, ex = collect(alice.get(proc_url(sid, pid, "/output") + "?offset=5", headers=SSE,
                                stream=True))
    assert b"".join(chunk_bytes(d) for e, d in evs if e == "stdout") == expected[5:]
    assert ex["exit_code"] == 0


def test_big_writer_nobody_reading_is_not_blocked(daemon, alice, session):
    sid = session["id"]
    rss0 = proc_status(daemon.pid, "VmRSS")
    t0 = time.monotonic()
    pid = start(alice, sid, command=["sh", "-c", "head -c 100000000 /dev/zero; echo done >&2"])
    p = wait_exited(alice, sid, pid, timeout=120)
    assert p["exit_code"] == 0 and p["stdout_bytes"] == 100000000
    out = alice.get(proc_url(sid, pid, "/output")).json()
    assert out["stderr"] == "done\n"
    kept = 1 << 20  # the session's output_bytes (default 1 MiB) per stream
    assert out["stdout_dropped_bytes"] == 100000000 - kept
    assert out["result"]["stdout_truncated"] is True
    # The head and the tail are kept; the middle is dropped and said so.
    assert out["stdout_gap_at"] == kept // 2
    mid = alice.get(proc_url(sid, pid, "/output"), params={"stdout_offset": 50000000}).json()
    assert mid["stdout_skipped"] is True and mid["stdout_offset"] == 100000000 - kept // 2
    rss1 = proc_status(daemon.pid, "VmRSS")
    assert rss1 - rss0 < 64 << 20, f"daemon RSS grew by {(rss1 - rss0) >> 20} MiB"
    print(f"100 MB through a background process in {time.monotonic() - t0:.2f}s")


def test_follow_with_gap_event(alice, profile):
    s = alice.new_session(profile, limits={"output_bytes": 1000})
    try:
        sid = s["id"]
        pid = start(alice, sid, command=["sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a"])
        wait_exited(alice, sid, pid)
        evs, ex = collect(alice.get(proc_url(sid, pid, "/output"), headers=SSE, stream=True))
        gaps = [d for e, d in evs if e == "gap"]
        assert gaps == [{"stream": "stdout", "from": 500, "to": 4500, "dropped_bytes": 4000}]
        data = [d for e, d in evs if e == "stdout"]
        assert data[0]["offset"] == 0 and data[-1]["offset"] + len(chunk_bytes(data[-1])) == 5000
        assert ex["stdout_dropped_bytes"] == 4000
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_killed_with_the_session(daemon, alice, profile):
    s = alice.new_session(profile)
    mark = marker()
    pid = start(alice, s["id"], command=sleeper(mark))
    assert pid
    wait_until(lambda: workload_procs(daemon, mark), 10, what="the background process")
    assert alice.delete(f"/v1/sandbox/sessions/{s['id']}").status_code == 204
    wait_until(lambda: not workload_procs(daemon, mark), 10, what="the background process killed")
    assert alice.get(f"/v1/sandbox/sessions/{s['id']}/processes").status_code == 409


def test_other_tenant_cannot_see(alice, bob, session):
    pid = start(alice, session["id"], command=["sleep", "5"])
    assert_error(bob.get(proc_url(session["id"], pid)), 404, "not_found")
    assert_error(bob.post(proc_url(session["id"], pid, "/signal"), json={"signal": "KILL"}),
                 404, "not_found")


def test_keeps_the_session_from_idling(alice, session):
    """A background process counts as activity: listed while running."""
    pid = start(alice, session["id"], command=["sleep", "2"])
    p = wait_exited(alice, session["id"], pid)
    assert p["exit_code"] == 0


def test_quota_of_running_processes(alice, profile):
    # 64 processes are 128+ tasks (each has its shepherd): within the
    # default pids limit (256).
    s = alice.new_session(profile)
    try:
        sid = s["id"]
        for _ in range(64):
            start(alice, sid, command=["sleep", "60"])
        r = start(alice, sid, expect=429, command=["sleep", "60"])
        assert_error(r, 429, "quota_exceeded")
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_pty_needs_a_terminal_driver(alice, profile_table):
    if not profile_table.get("process", {}).get("available"):
        pytest.skip("process profile unavailable")
    s = alice.new_session("process")
    try:
        r = start(alice, s["id"], expect=409, command=["bash"], pty={"cols": 80, "rows": 24})
        e = assert_error(r, 409, "conflict")
        assert "terminal" in e["message"]
        assert "terminal" not in s["capabilities"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_pty_needs_background(alice, session):
    r = alice.post(f"/v1/sandbox/sessions/{session['id']}/exec",
                   json={"command": ["bash"], "pty": {"cols": 80, "rows": 24}})
    e = assert_error(r, 400, "invalid_request", "pty")
    assert "background" in e["message"]
