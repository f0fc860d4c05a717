"""One-shot executions: create/get, wait_s long-poll, input files (utf-8
and base64), collect globs with sha256, statuses and reasons, cancel, list
with filters and pagination."""
import base64
import hashlib
import os
import time

import pytest

from sbxtest import assert_error, marker, name_self, sleeper, wait_until, workload_procs

EXEC_KEYS = {"id", "status", "reason", "profile", "exit_code", "signal", "stdout", "stderr",
             "stdout_truncated", "stderr_truncated", "files", "usage", "created_at",
             "started_at", "finished_at", "error", "metadata"}


def test_create_and_get(alice, profile):
    r = alice.post("/v1/sandbox/executions",
                   json={"profile": profile, "command": ["sh", "-c", "echo hello; echo e >&2"],
                         "metadata": {"job": "42"}})
    assert r.status_code == 202, r.text
    c = r.json()
    assert c["id"].startswith("exe_")
    assert c["status"] in ("queued", "running")
    assert c["profile"] == profile
    assert r.headers.get("Location", "").endswith(f"/v1/sandbox/executions/{c['id']}")
    e = alice.wait_execution(c["id"])
    assert set(e) >= EXEC_KEYS, EXEC_KEYS - set(e)
    assert e["id"] == c["id"]
    assert e["status"] == "succeeded"
    assert e["reason"] == "exit"
    assert e["exit_code"] == 0 and e["signal"] is None
    assert e["stdout"] == "hello\n" and e["stderr"] == "e\n"
    assert e["files"] == []
    assert e["metadata"] == {"job": "42"}
    assert e["error"] is None
    assert e["created_at"] and e["started_at"] and e["finished_at"]
    assert e["created_at"] <= e["started_at"] <= e["finished_at"]
    assert set(e["usage"]) >= {"cpu_seconds", "memory_mb_seconds", "duration_seconds"}
    assert e["usage"]["duration_seconds"] >= 0


def test_language_code(alice, profile):
    e = alice.wait_execution(alice.new_execution(profile, language="python",
                                                 code="import sys; print(sum(range(10)))")["id"])
    assert e["status"] == "succeeded" and e["stdout"] == "45\n"


def test_failed_and_signal(alice, profile):
    f = alice.wait_execution(alice.new_execution(profile, command=["sh", "-c", "exit 9"])["id"])
    assert (f["status"], f["reason"], f["exit_code"]) == ("failed", "exit", 9)
    k = alice.wait_execution(alice.new_execution(profile, command=["sh", "-c", "kill -9 $$"])["id"])
    assert (k["status"], k["reason"], k["signal"], k["exit_code"]) == ("killed", "signal", 9, None)


def test_timeout_partial_output_and_tree_killed(daemon, alice, profile):
    mark = marker()
    script = (f"trap '' TERM; echo early; "
              f"(setsid python3 -c \"{name_self(mark)}import time; time.sleep(300)\" {mark} "
              "</dev/null "
              ">/dev/null 2>&1 &); sleep 60")
    e = alice.new_execution(profile, command=["sh", "-c", script], limits={"timeout_s": 1})
    f = alice.wait_execution(e["id"], timeout=30)
    assert f["status"] == "timeout", f
    assert f["reason"] == "timeout"
    assert f["stdout"] == "early\n"
    assert f["error"]["reason"] == "timeout"
    wait_until(lambda: workload_procs(daemon, mark) == [], 30,
               what="the timed-out tree to be gone")


def test_stdin_and_env(alice, profile):
    e = alice.new_execution(profile, command=["sh", "-c", "cat; echo $V"], stdin="from stdin\n",
                            env={"V": "from env"})
    f = alice.wait_execution(e["id"])
    assert f["stdout"] == "from stdin\nfrom env\n"


def test_files_in_and_collect_out(alice, profile):
    binary = os.urandom(5000)
    text = "h\u00e9llo w\u00f6rld\n"
    script = ("set -e; mkdir -p out/sub; "
              "cat in/text.txt > out/copy.txt; cat in/data.bin > out/data.bin; "
              "wc -c < in/data.bin | tr -d ' \\n' > out/sub/size.txt; "
              "echo not-collected > other.txt")
    e = alice.new_execution(
        profile, command=["sh", "-c", script],
        files=[{"path": "/work/in/text.txt", "content": text, "encoding": "utf-8"},
               {"path": "/work/in/data.bin", "content": base64.b64encode(binary).decode(),
                "encoding": "base64"},
               {"path": "/work/in/default-enc.txt", "content": "plain"}],
        collect=["/work/out/*", "/work/out/sub/*.txt", "/work/nothing-matches/*"])
    f = alice.wait_execution(e["id"])
    assert f["status"] == "succeeded", f
    files = {x["path"]: x for x in f["files"]}
    want = {"/work/out/copy.txt": text.encode(), "/work/out/data.bin": binary,
            "/work/out/sub/size.txt": b"5000"}
    assert set(files) == set(want), files
    for path, content in want.items():
        assert files[path]["size"] == len(content)
        assert files[path]["sha256"] == hashlib.sha256(content).hexdigest()
        r = alice.get(f"/v1/sandbox/executions/{e['id']}/files", params={"path": path})
        assert r.status_code == 200, r.text
        assert r.content == content
        assert hashlib.sha256(r.content).hexdigest() == files[path]["sha256"]
    assert_error(alice.get(f"/v1/sandbox/executions/{e['id']}/files",
                           params={"path": "/work/other.txt"}), 404, "not_found")
    assert_error(alice.get(f"/v1/sandbox/executions/{e['id']}/files"), 400, "invalid_request",
                 field="path")


def test_collect_is_recorded_before_final_status(alice, profile):
    """A client that sees the final status can always fetch the files."""
    e = alice.new_execution(profile, command=["sh", "-c", "echo x > r.txt"],
                            collect=["/work/r.txt"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        g = alice.get(f"/v1/sandbox/executions/{e['id']}").json()
        if g["status"] not in ("queued", "running"):
            assert [x["path"] for x in g["files"]] == ["/work/r.txt"], g
            return
    pytest.fail("never finished")


def test_wait_s_returns_early(alice, profile):
    e = alice.new_execution(profile, command=["sh", "-c", "sleep 1; echo done"])
    t0 = time.monotonic()
    r = alice.get(f"/v1/sandbox/executions/{e['id']}", params={"wait_s": 30})
    took = time.monotonic() - t0
    assert r.status_code == 200
    assert r.json()["status"] == "succeeded", r.json()
    assert r.json()["stdout"] == "done\n"
    assert took < 6, f"wait_s=30 took {took:.1f}s for a 1 s job"
    assert took >= 0.8


def test_wait_s_times_out_on_running(alice, profile):
    mark = marker()
    e = alice.new_execution(profile, command=sleeper(mark, 30))
    try:
        t0 = time.monotonic()
        r = alice.get(f"/v1/sandbox/executions/{e['id']}", params={"wait_s": 1.5})
        took = time.monotonic() - t0
        assert r.json()["status"] in ("queued", "running")
        assert 1.2 <= took < 5
        r = alice.get(f"/v1/sandbox/executions/{e['id']}")  # no wait: immediate
        assert r.json()["status"] in ("queued", "running")
    finally:
        alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")


def test_cancel_running(daemon, alice, profile):
    mark = marker()
    e = alice.new_execution(profile, command=sleeper(mark, 60))
    wait_until(lambda: workload_procs(daemon, mark), 20, what="the sleeper to start")
    t0 = time.monotonic()
    r = alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")
    assert r.status_code == 200, r.text
    c = r.json()
    assert c["id"] == e["id"]
    f = alice.wait_execution(e["id"], timeout=15)
    assert f["status"] == "killed", f
    assert f["reason"] == "cancelled"
    assert f["finished_at"]
    assert time.monotonic() - t0 < 10
    wait_until(lambda: not workload_procs(daemon, mark), 10, what="the cancelled process to die")
    # cancelling a finished one changes nothing
    r = alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")
    assert r.status_code in (200, 409), r.text
    assert alice.get(f"/v1/sandbox/executions/{e['id']}").json()["reason"] == "cancelled"


def test_cancel_right_after_create(daemon, alice, any_profile):
    """A cancel sent the moment an execution is accepted lands whether the
    worker has not taken it yet, is taking it, or has started it."""
    mark = marker()
    ids = []
    for _ in range(20):
        e = alice.new_execution(any_profile, command=sleeper(mark, 60))
        r = alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")
        assert r.status_code == 200, r.text
        ids.append(e["id"])
    for i in ids:
        f = alice.wait_execution(i, timeout=15)
        assert (f["status"], f["reason"]) == ("killed", "cancelled"), f
    wait_until(lambda: not workload_procs(daemon, mark), 10, what="every cancelled sleeper gone")


def test_cancel_finished_keeps_result(alice, any_profile):
    e = alice.new_execution(any_profile, command=["true"])
    alice.wait_execution(e["id"])
    r = alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")
    assert r.status_code in (200, 409), r.text
    g = alice.get(f"/v1/sandbox/executions/{e['id']}").json()
    assert g["status"] == "succeeded"


def test_cancel_queued(daemon_factory, any_profile):
    """With one worker busy, a queued execution is cancelled before it runs."""
    d = daemon_factory(extra_args=["--workers", "1"]).start()
    c = d.client(d.create_key("alice"))
    mark, mark2 = marker(), marker()
    busy = c.new_execution(any_profile, command=sleeper(mark, 60))
    wait_until(lambda: workload_procs(d, mark), 20, what="the busy worker")
    q = c.new_execution(any_profile, command=sleeper(mark2, 60))
    assert c.get(f"/v1/sandbox/executions/{q['id']}").json()["status"] == "queued"
    r = c.post(f"/v1/sandbox/executions/{q['id']}/cancel")
    assert r.status_code == 200, r.text
    f = c.get(f"/v1/sandbox/executions/{q['id']}").json()
    assert f["status"] == "killed" and f["reason"] == "cancelled", f
    assert f["started_at"] is None
    c.post(f"/v1/sandbox/executions/{busy['id']}/cancel")
    c.wait_execution(busy["id"], timeout=15)
    # The one worker is free: a later execution runs to its end only if
    # nothing (the cancelled one) took the worker before it.
    after = c.wait_execution(c.new_execution(any_profile, command=["echo", "next"])["id"],
                             timeout=30)
    assert after["status"] == "succeeded", after
    assert workload_procs(d, mark2) == [], "a cancelled queued execution ran anyway"
    assert c.get(f"/v1/sandbox/executions/{q['id']}").json()["status"] == "killed"
    assert d.stop() == 0


def test_list_filter_and_pagination(fresh_tenant, any_profile):
    c = fresh_tenant
    ok = [c.new_execution(any_profile, command=["true"])["id"] for _ in range(3)]
    bad = [c.new_execution(any_profile, command=["false"])["id"] for _ in range(2)]
    for i in ok + bad:
        c.wait_execution(i)
    seen, pages, cursor = [], [], None
    while True:
        params = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        r = c.get("/v1/sandbox/executions", params=params)
        assert r.status_code == 200, r.text
        b = r.json()
        pages.append(len(b["executions"]))
        seen += [x["id"] for x in b["executions"]]
        cursor = b["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 10
    assert pages == [2, 2, 1]
    assert sorted(seen) == sorted(ok + bad)
    failed = c.get("/v1/sandbox/executions", params={"status": "failed"}).json()["executions"]
    assert sorted(x["id"] for x in failed) == sorted(bad)
    assert all(x["status"] == "failed" for x in failed)
    succ = c.get("/v1/sandbox/executions", params={"status": "succeeded"}).json()["executions"]
    assert sorted(x["id"] for x in succ) == sorted(ok)
    assert c.get("/v1/sandbox/executions", params={"status": "running"}).json()[
        "executions"] == []


def test_missing_execution(alice):
    for method, path in (("GET", ""), ("GET", "/files?path=/work/a"), ("POST", "/cancel")):
        r = alice.request(method, f"/v1/sandbox/executions/exe_000000000000000000000000{path}")
        assert_error(r, 404, "not_found")


def test_many_concurrent_executions(alice, any_profile):
    ids = [alice.new_execution(any_profile, command=["sh", "-c", f"echo {i}"])["id"]
           for i in range(12)]
    outs = [alice.wait_execution(i)["stdout"] for i in ids]
    assert outs == [f"{i}\n" for i in range(12)]


def assert_named_cause(e):
    """Every final result names its cause: a non-empty reason, and the
    error object (when there is one) gives the same one."""
    assert e["status"] not in ("queued", "running"), e
    assert isinstance(e["reason"], str) and e["reason"], e
    if e["error"] is not None:
        assert e["error"]["reason"] == e["reason"], e
        assert e["error"]["message"], e


def test_every_final_result_names_its_cause(daemon, alice, profile):
    """Each path to a final status that a client can trigger, with the
    specific reason it must give."""
    mark = marker()
    cases = {
        "succeeded": ({"command": ["true"]}, "succeeded", "exit"),
        "failed": ({"command": ["sh", "-c", "exit 3"]}, "failed", "exit"),
        "not_found": ({"command": ["/nonexistent/cmd"]}, "failed", "exit"),
        "signal": ({"command": ["sh", "-c", "kill -9 $$"]}, "killed", "signal"),
        "timeout": ({"command": ["sleep", "30"], "limits": {"timeout_s": 1}}, "timeout",
                    "timeout"),
        # the second file's parent is the first file: it cannot be written
        "input_files": ({"command": ["true"],
                         "files": [{"path": "/work/f", "content": "x"},
                                   {"path": "/work/f/g", "content": "y"}]},
                        "error", "input_files"),
        # a directory matched by collect is not collected: a warning, not a new cause
        "collect_warning": ({"command": ["mkdir", "-p", "out/d"],
                             "collect": ["/work/out/*"]}, "succeeded", "exit"),
        # output past output_bytes truncates; the program's own exit is the cause
        "output": ({"command": ["sh", "-c", "head -c 200000 /dev/zero"],
                    "limits": {"output_bytes": 1024}}, "succeeded", "exit"),
        "cancelled": ({"command": sleeper(mark, 60)}, "killed", "cancelled"),
    }
    ids = {k: alice.new_execution(profile, **body)["id"] for k, (body, _, _) in cases.items()}
    wait_until(lambda: workload_procs(daemon, mark), 60, what="the sleeper to start")
    assert alice.post(f"/v1/sandbox/executions/{ids['cancelled']}/cancel").status_code == 200
    for k, (_, status, reason) in cases.items():
        e = alice.wait_execution(ids[k], timeout=90)
        assert_named_cause(e)
        assert (k, e["status"], e["reason"]) == (k, status, reason), e
    o = alice.get(f"/v1/sandbox/executions/{ids['output']}").json()
    assert o["stdout_truncated"] and o["stdout_dropped_bytes"] > 0, o
    f = alice.get(f"/v1/sandbox/executions/{ids['input_files']}").json()
    assert "/work/f/g" in f["error"]["message"], f
    assert f["started_at"] and f["exit_code"] is None, f


def test_cancelled_while_queued_names_its_cause(daemon_factory, any_profile):
    d = daemon_factory(extra_args=["--workers", "1"]).start()
    c = d.client(d.create_key("cause"))
    mark = marker()
    busy = c.new_execution(any_profile, command=sleeper(mark, 60))["id"]
    wait_until(lambda: workload_procs(d, mark), 30, what="the busy worker")
    q = c.new_execution(any_profile, command=["true"])["id"]
    for eid in (q, busy):
        assert c.post(f"/v1/sandbox/executions/{eid}/cancel").status_code == 200
    for eid in (q, busy):
        e = c.wait_execution(eid, timeout=30)
        assert_named_cause(e)
        assert (e["status"], e["reason"]) == ("killed", "cancelled"), e
    assert d.stop() == 0


def test_unpullable_image_is_image_unavailable(alice, profile, profile_table):
    """An image that can be neither found nor pulled (a registry on a
    loopback port nobody listens on) ends the execution with status error,
    reason image_unavailable, and the pull's failure as the message."""
    if "images" not in profile_table[profile]["capabilities"]:
        pytest.skip(f"profile {profile} runs no images")
    e = alice.new_execution(profile, image="127.0.0.1:1/nope:latest", command=["true"])
    f = alice.wait_execution(e["id"], timeout=120)
    assert_named_cause(f)
    assert (f["status"], f["reason"]) == ("error", "image_unavailable"), f
    assert f["error"] and f["error"]["reason"] == "image_unavailable", f
    assert "127.0.0.1:1" in f["error"]["message"] or "nope" in f["error"]["message"], f
    assert f["exit_code"] is None, f


def test_input_files_past_the_disk_limit_are_disk(alice, profile, profile_table):
    """Input files that fill the sandbox's disk end it with reason disk (the
    command never ran), not a reason-less error."""
    if profile_table[profile]["class"] == "none":
        pytest.skip(f"profile {profile} enforces no disk limit")
    big = base64.b64encode(os.urandom(12 << 20)).decode()
    e = alice.new_execution(profile, command=["sh", "-c", "echo ran"], limits={"disk": "4Mi"},
                            files=[{"path": "/work/big", "content": big, "encoding": "base64"}])
    f = alice.wait_execution(e["id"], timeout=120)
    assert_named_cause(f)
    assert (f["status"], f["reason"]) == ("error", "disk"), f
    assert "/work/big" in f["error"]["message"] and f["stdout"] == "", f
