"""Streaming exec: POST …/exec with Accept:
text/event-stream streams stdout/stderr events with byte offsets in the
order read, then `exit` with the same result object as the buffered exec.
Timeouts and output caps hold on this path; a client that disconnects
takes its exec with it (reason cancelled)."""
import time

import pytest

from sbxsse import SSE, chunk_bytes, collect, events
from sbxtest import marker, ticker, wait_until, workload_procs

RESULT_KEYS = {"status", "reason", "exit_code", "signal", "stdout", "stderr", "stdout_truncated",
               "stderr_truncated", "duration_ms", "usage", "error"}


def stream_exec(client, sid, **body):
    r = client.post(f"/v1/sandbox/sessions/{sid}/exec", json=body, headers=SSE, stream=True)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/event-stream")
    return r


def test_order_offsets_and_exit_result(alice, session):
    script = "for i in 1 2 3; do echo out$i; sleep 0.1; echo err$i >&2; sleep 0.1; done; exit 3"
    evs, ex = collect(stream_exec(alice, session["id"], command=["sh", "-c", script]))
    names = [e for e, _ in evs]
    assert names[-1] == "exit" and names.count("exit") == 1
    out = [(e, chunk_bytes(d), d["offset"]) for e, d in evs if e in ("stdout", "stderr")]
    # Order across the two streams is the order read: out1 err1 out2 err2 …
    text = b"".join(b for _, b, _ in out)
    assert text == b"out1\nerr1\nout2\nerr2\nout3\nerr3\n", out
    assert [e for e, _, _ in out] == ["stdout", "stderr"] * 3
    # Offsets are per stream and contiguous.
    pos = {"stdout": 0, "stderr": 0}
    for e, b, off in out:
        assert off == pos[e], out
        pos[e] += len(b)
    assert RESULT_KEYS <= set(ex), ex
    assert ex["status"] == "failed" and ex["exit_code"] == 3 and ex["reason"] == "exit"
    assert ex["stdout"] == "out1\nout2\nout3\n" and ex["stderr"] == "err1\nerr2\nerr3\n"


def test_exit_result_matches_buffered(alice, session):
    body = {"command": ["sh", "-c", "echo hi; echo oops >&2; exit 7"]}
    buffered = alice.exec(session["id"], **body)
    _, ex = collect(stream_exec(alice, session["id"], **body))
    for k in ("status", "reason", "exit_code", "signal", "stdout", "stderr", "stdout_encoding",
              "stdout_truncated", "stderr_truncated", "error"):
        assert ex[k] == buffered[k], (k, ex, buffered)
    assert set(ex) == set(buffered)


def test_timeout_on_stream(alice, session):
    t0 = time.monotonic()
    evs, ex = collect(stream_exec(alice, session["id"], command=["sh", "-c", "echo go; sleep 60"],
                                  timeout_s=1))
    assert time.monotonic() - t0 < 15
    assert ex["status"] == "timeout" and ex["reason"] == "timeout", ex
    assert ex["stdout"] == "go\n"
    assert ("stdout", {"data": "go\n", "offset": 0}) in evs


def test_output_cap_holds_and_stream_sees_everything(alice, profile):
    s = alice.new_session(profile, limits={"output_bytes": 1000})
    try:
        evs, ex = collect(stream_exec(alice, s["id"], command=["sh", "-c", "head -c 20000 /dev/zero | tr '\\0' x"]))
        streamed = sum(len(chunk_bytes(d)) for e, d in evs if e == "stdout")
        assert streamed == 20000  # the stream is not the capture: nothing dropped here
        assert ex["stdout_truncated"] is True and ex["stdout_dropped_bytes"] == 19000
        assert len(ex["stdout"]) == 1000
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_non_utf8_chunk_is_base64(alice, session):
    evs, ex = collect(stream_exec(alice, session["id"], command=["printf", "\\377\\376"]))
    outs = [d for e, d in evs if e == "stdout"]
    assert outs and "data_base64" in outs[0] and chunk_bytes(outs[0]) == b"\xff\xfe"
    assert ex["stdout_encoding"] == "base64"


def test_disconnect_kills_the_exec(daemon, alice, session):
    mark = marker()
    r = stream_exec(alice, session["id"], command=ticker(mark))
    seen = 0
    # keep the generator referenced: dropping it mid-stream makes urllib3
    # close the connection at once, i.e. disconnect before the check below
    it = events(r)
    for e, _ in it:
        if e == "stdout":
            seen += 1
        if seen >= 3:
            break
    assert workload_procs(daemon, mark), "the exec should be running while streamed"
    r.close()  # the client goes away mid-stream
    wait_until(lambda: not workload_procs(daemon, mark), 10,
               what="the exec killed after the disconnect")
    # The session is still usable.
    assert alice.exec(session["id"], command=["true"])["status"] == "succeeded"


def test_validation_errors_are_plain_json(alice, session):
    r = alice.post(f"/v1/sandbox/sessions/{session['id']}/exec", json={"command": []},
                   headers=SSE)
    assert r.status_code == 400 and r.headers["Content-Type"].startswith("application/json")
    r = alice.post("/v1/sandbox/sessions/ses_nope/exec", json={"command": ["true"]}, headers=SSE)
    assert r.status_code == 404


def test_code_that_cannot_be_written_ends_with_a_named_cause(alice, profile, profile_table):
    """Long code goes to a file in the sandbox first: on a full disk the
    streamed result is error/disk (not a status-less, reason-less one)."""
    if profile_table[profile]["class"] == "none":
        pytest.skip(f"profile {profile} enforces no disk limit")
    s = alice.new_session(profile, limits={"disk": "4Mi"})
    try:
        alice.exec(s["id"], command=["sh", "-c", "cat /dev/zero > /tmp/fill; true"])
        code = "# " + "x" * 200000 + "\nprint(1)"
        _, ex = collect(stream_exec(alice, s["id"], language="python", code=code))
        assert (ex["status"], ex["reason"]) == ("error", "disk"), ex
        assert ex["error"]["reason"] == "disk" and ex["exit_code"] is None, ex
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")
