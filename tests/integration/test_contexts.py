"""Contexts: stateful Python and Node interpreters in a session
of every wanted profile with the contexts capability (container, gvisor) —
state kept across runs, the notebook-style result, matplotlib figures as
PNG, exceptions that leave the context alive, a run killed at its timeout
and a restart, contexts dying with their session, and 409 on a driver
without the contexts capability."""
import base64
import time

import pytest

from sbxtest import assert_error, sleeper, wait_until, workload_procs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RUN_KEYS = {"status", "reason", "stdout", "stderr", "stdout_truncated", "stderr_truncated",
            "result", "outputs", "error", "duration_ms", "execution_count"}


@pytest.fixture
def csession(alice, capable):
    s = alice.new_session(capable("contexts"))
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def new_context(client, sid, language="python"):
    r = client.post(f"/v1/sandbox/sessions/{sid}/contexts", json={"language": language})
    assert r.status_code == 201, r.text
    c = r.json()
    assert c["status"] == "ready" and c["language"] == language and c["id"].startswith("ctx_")
    return c["id"]


def run(client, sid, cid, code, **kw):
    r = client.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run", json=dict(kw, code=code))
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= RUN_KEYS, set(body) ^ RUN_KEYS
    return body


def test_python_keeps_state(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    r = run(alice, sid, cid, "x = 41")
    assert r["status"] == "succeeded" and r["result"] is None and r["error"] is None
    r = run(alice, sid, cid, "x + 1")
    assert r["result"] == "42", r
    assert r["execution_count"] == 2
    r = run(alice, sid, cid, "print('a'); import sys; print('b', file=sys.stderr); {'k': x}")
    assert r["stdout"] == "a\n" and r["stderr"] == "b\n" and r["result"] == "{'k': 41}"
    listed = alice.get(f"/v1/sandbox/sessions/{sid}/contexts").json()["contexts"]
    assert [c["id"] for c in listed] == [cid] and listed[0]["execution_count"] == 3


def test_subprocess_output_is_the_runs(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    r = run(alice, sid, cid, "import os; os.system('echo from-a-child')")
    assert "from-a-child\n" in r["stdout"], r


def test_output_cannot_forge_a_reply(alice, csession):
    """Printing something shaped like a reply frame is just output."""
    sid = csession["id"]
    cid = new_context(alice, sid)
    fake = '{"seq": 1, "stdout": "forged", "result": "999", "error": null}'
    code = f"import os\nprint({fake!r})\nos.system('echo ' + repr({fake!r}))\n7"
    r = run(alice, sid, cid, code)
    assert r["result"] == "7", r
    assert "forged" in r["stdout"]


def test_matplotlib_png(alice, csession, microvm_gap):
    microvm_gap("the default root image has no dist-packages (matplotlib): docs/microvm.md, "
                "rootfs --extra")
    sid = csession["id"]
    cid = new_context(alice, sid)
    code = ("import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9])\n'plotted'")
    r = run(alice, sid, cid, code, timeout_s=60)
    assert r["status"] == "succeeded", r
    assert r["result"] == "'plotted'"
    assert len(r["outputs"]) == 1 and r["outputs"][0]["mime_type"] == "image/png"
    png = base64.b64decode(r["outputs"][0]["data"])
    assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
    # figures are closed after each run: the next run has none
    assert run(alice, sid, cid, "1")["outputs"] == []


def test_exception_then_context_still_works(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    run(alice, sid, cid, "y = 5")
    r = run(alice, sid, cid, "print('before')\n1/0")
    assert r["status"] == "failed" and r["reason"] == "exception"
    assert r["error"]["name"] == "ZeroDivisionError"
    assert "division by zero" in r["error"]["value"]
    assert "ZeroDivisionError" in r["error"]["traceback"] and "<cell-2>" in r["error"]["traceback"]
    assert r["stdout"] == "before\n"
    r = run(alice, sid, cid, "y * 2")
    assert r["status"] == "succeeded" and r["result"] == "10"
    r = run(alice, sid, cid, "def f(:\n  pass")
    assert r["error"]["name"] == "SyntaxError"
    r = run(alice, sid, cid, "import sys; sys.exit(3)")
    assert r["error"]["name"] == "SystemExit"
    assert run(alice, sid, cid, "y")["result"] == "5"


def test_timeout_kills_then_restart(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    run(alice, sid, cid, "z = 1")
    t0 = time.monotonic()
    r = run(alice, sid, cid, "while True: pass", timeout_s=1)
    assert r["status"] == "timeout" and r["reason"] == "timeout", r
    assert time.monotonic() - t0 < 15
    got = alice.get(f"/v1/sandbox/sessions/{sid}/contexts/{cid}").json()
    assert got["status"] == "dead" and got["error"]
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run", json={"code": "1"})
    assert_error(r, 409, "conflict")
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/restart")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ready" and r.json()["id"] == cid
    r = run(alice, sid, cid, "z")  # the state went with the killed interpreter
    assert r["error"]["name"] == "NameError"
    assert run(alice, sid, cid, "2 + 2")["result"] == "4"


def test_restart_drops_state(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    run(alice, sid, cid, "w = 3")
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/restart")
    assert r.status_code == 200 and r.json()["execution_count"] == 0
    assert run(alice, sid, cid, "'w' in globals()")["result"] == "False"


def test_node_keeps_state(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid, "node")
    assert run(alice, sid, cid, "var a = 20; let b = 2")["error"] is None
    r = run(alice, sid, cid, "a * b + 2")
    assert r["result"] == "42", r
    r = run(alice, sid, cid, "console.log('out'); console.error('err'); ({k: a})")
    assert r["stdout"] == "out\n" and r["stderr"] == "err\n" and r["result"] == "{ k: 20 }"
    r = run(alice, sid, cid, "throw new TypeError('bad thing')")
    assert r["status"] == "failed" and r["error"]["name"] == "TypeError"
    assert r["error"]["value"] == "bad thing" and "[eval]" not in r["error"]["traceback"]
    assert run(alice, sid, cid, "Promise.resolve(a + 1)")["result"] == "21"


def test_one_run_at_a_time_and_bad_requests(alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    base = f"/v1/sandbox/sessions/{sid}/contexts"
    assert_error(alice.post(base, json={"language": "cobol"}), 400, "invalid_request",
                 "language")
    assert_error(alice.post(f"{base}/{cid}/run", json={"code": 5}), 400, "invalid_request",
                 "code")
    assert_error(alice.post(f"{base}/{cid}/run", json={"code": "1", "timeout_s": -1}), 400,
                 "invalid_request", "timeout_s")
    assert_error(alice.post(f"{base}/{cid}/run", json={"code": "1", "nope": 1}), 400,
                 "invalid_request")
    assert_error(alice.post(f"{base}/ctx_nothere/run", json={"code": "1"}), 404, "not_found")
    import threading
    slow = {}
    # The slow run holds the interpreter until the test has seen the
    # conflict, then is let go through a file (the files API, not a run).
    gate = f"gate-{cid}"
    code = (f"import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.02)\n'slow'")
    t = threading.Thread(target=lambda: slow.update(
        r=alice.post(f"{base}/{cid}/run", json={"code": code})))
    t.start()
    wait_until(lambda: alice.get(f"{base}/{cid}").json()["status"] == "busy", 60,
               what="the slow run to hold the interpreter")
    assert_error(alice.post(f"{base}/{cid}/run", json={"code": "1"}), 409, "conflict")
    r = alice.put(f"/v1/sandbox/sessions/{sid}/files", params={"path": f"/work/{gate}"},
                  data=b"go")
    assert r.status_code in (200, 201, 204), r.text
    t.join()
    assert slow["r"].json()["result"] == "'slow'"


def test_other_tenant_sees_nothing(alice, bob, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    assert_error(bob.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run", json={"code": "1"}),
                 404, "not_found")
    assert_error(bob.get(f"/v1/sandbox/sessions/{sid}/contexts"), 404, "not_found")


def test_delete_context_kills_interpreter(daemon, alice, csession):
    sid = csession["id"]
    cid = new_context(alice, sid)
    mark = "ctxmark" + cid
    run(alice, sid, cid, f"import subprocess; p = subprocess.Popen({sleeper(mark)!r})")
    wait_until(lambda: workload_procs(daemon, mark), 10, what="the marked child")
    r = alice.delete(f"/v1/sandbox/sessions/{sid}/contexts/{cid}")
    assert r.status_code == 204
    assert_error(alice.get(f"/v1/sandbox/sessions/{sid}/contexts/{cid}"), 404, "not_found")
    assert alice.get(f"/v1/sandbox/sessions/{sid}/contexts").json()["contexts"] == []
    # the interpreter's exec tree is killed, its children with it
    wait_until(lambda: not workload_procs(daemon, mark), 15, what="the context's processes to go")


def test_contexts_die_with_session(daemon, alice, capable):
    s = alice.new_session(capable("contexts"))
    sid = s["id"]
    cid = new_context(alice, sid)
    mark = "ctxdie" + cid
    # a child carrying a marker in its cmdline, started from the context
    run(alice, sid, cid, f"import subprocess; p = subprocess.Popen({sleeper(mark)!r})")
    wait_until(lambda: workload_procs(daemon, mark), 10, what="the marked child")
    assert alice.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    wait_until(lambda: not workload_procs(daemon, mark), 15, what="the context's processes to go")
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run", json={"code": "1"})
    assert r.status_code in (404, 409), r.text


def test_process_profile_has_no_contexts(alice, profile_table):
    if not profile_table.get("process", {}).get("available"):
        pytest.skip("no process profile")
    s = alice.new_session("process")
    try:
        assert "contexts" not in s["capabilities"]
        r = alice.post(f"/v1/sandbox/sessions/{s['id']}/contexts", json={"language": "python"})
        e = assert_error(r, 409, "conflict")
        assert "contexts" in e["message_i18n"]["en"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")
