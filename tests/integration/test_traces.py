"""Traces: W3C traceparent in, spans out over OTLP/HTTP JSON to a
real local receiver (python http.server on 127.0.0.1), TRACEPARENT inside
the sandbox, and an exporter that never slows requests when the collector
is down or hangs (spans are dropped, and counted, only when its queue is
full)."""
import http.server
import json
import re
import socket
import statistics
import threading
import time
import uuid

import pytest

from sbxtest import free_port, wait_until

PROFILE = "process"  # own daemons run with the process driver enabled


class Receiver:
    """An OTLP/HTTP JSON collector: keeps every POST (path, headers, body)."""

    def __init__(self, host="127.0.0.1"):
        self.posts = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    outer.posts.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.port = self.srv.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()

    def spans(self):
        """Every span received, each with its resource attributes under '_resource'."""
        out = []
        with self.lock:
            posts = list(self.posts)
        for _, _, body in posts:
            doc = json.loads(body)
            for rs in doc["resourceSpans"]:
                res = attrs(rs["resource"])
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        out.append(dict(s, _resource=res, _scope=ss["scope"]))
        return out

    def wait_span(self, pred, timeout=15, what="span"):
        def find():
            for s in self.spans():
                if pred(s):
                    return s
            return None
        return wait_until(find, timeout, interval=0.05, what=what)


def attrs(obj):
    out = {}
    for a in obj.get("attributes", []):
        v = a["value"]
        if "stringValue" in v:
            out[a["key"]] = v["stringValue"]
        elif "intValue" in v:
            out[a["key"]] = int(v["intValue"])
        else:
            out[a["key"]] = v
    return out


def new_ids():
    return uuid.uuid4().hex, uuid.uuid4().hex[:16]


def tp(tid, pid, flags="01"):
    return f"00-{tid}-{pid}-{flags}"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def traced_daemon(daemon_factory, monkeypatch, endpoint, **env):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    d = daemon_factory()
    d.start()
    return d


def env_of(stdout):
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def test_spans_attributes_parent_and_traceparent_in_sandbox(daemon_factory, monkeypatch,
                                                           receiver):
    d = traced_daemon(daemon_factory, monkeypatch, receiver.url)
    c = d.client(d.create_key("tracer"))
    tid, pid = new_ids()
    r = c.post("/v1/sandbox/sessions", headers={"traceparent": tp(tid, pid)},
               json={"profile": PROFILE, "metadata": {"agent": "planner", "tool": "python"}})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    pid2 = uuid.uuid4().hex[:16]
    r = c.post(f"/v1/sandbox/sessions/{sid}/exec", headers={"traceparent": tp(tid, pid2)},
               json={"command": ["env"]})
    assert r.status_code == 200, r.text
    inside = env_of(r.json()["stdout"])

    create_req = receiver.wait_span(lambda s: s["name"] == "POST /v1/sandbox/sessions"
                                    and s["traceId"] == tid, what="session create request span")
    assert create_req["parentSpanId"] == pid
    assert create_req["kind"] == 2  # SERVER
    a = attrs(create_req)
    assert a["http.request.method"] == "POST"
    assert a["http.route"] == "/v1/sandbox/sessions"
    assert a["http.response.status_code"] == 201
    assert a["sandbox.tenant"] == "tracer"
    assert create_req["_resource"]["service.name"] == "sandboxd"
    assert int(create_req["endTimeUnixNano"]) >= int(create_req["startTimeUnixNano"]) > 0

    create = receiver.wait_span(lambda s: s["name"] == "sandbox.session.create"
                                and s["traceId"] == tid, what="session create span")
    assert create["parentSpanId"] == create_req["spanId"]
    a = attrs(create)
    assert a["sandbox.session.id"] == sid
    assert a["sandbox.profile"] == PROFILE
    assert a["sandbox.tenant"] == "tracer"
    assert a["sandbox.status"] == "ready"

    exec_req = receiver.wait_span(lambda s: s["name"] == "POST /v1/sandbox/sessions/{id}/exec"
                                  and s["traceId"] == tid, what="exec request span")
    assert exec_req["parentSpanId"] == pid2
    assert attrs(exec_req)["http.route"] == "/v1/sandbox/sessions/{id}/exec"
    assert attrs(exec_req)["http.response.status_code"] == 200
    ex = receiver.wait_span(lambda s: s["name"] == "sandbox.exec" and s["traceId"] == tid,
                            what="exec span")
    assert ex["parentSpanId"] == exec_req["spanId"]
    a = attrs(ex)
    assert a["sandbox.session.id"] == sid
    assert a["sandbox.status"] == "succeeded"
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.agent.name"] == "planner"
    assert a["gen_ai.tool.name"] == "python"

    # The workload sees the exec span's context: same trace, parent = the exec span.
    assert inside["TRACEPARENT"] == f"00-{tid}-{ex['spanId']}-01"

    # The wire format: POST /v1/traces, JSON.
    path, headers, _ = receiver.posts[0]
    assert path == "/v1/traces"
    assert {k.lower(): v for k, v in headers.items()}["content-type"] == "application/json"


def test_execution_span_continues_the_create_request(daemon_factory, monkeypatch, receiver):
    d = traced_daemon(daemon_factory, monkeypatch, receiver.url, OTEL_SERVICE_NAME="sbx-test")
    c = d.client(d.create_key("tracer"))
    tid, pid = new_ids()
    r = c.post("/v1/sandbox/executions", headers={"traceparent": tp(tid, pid)},
               json={"profile": PROFILE, "command": ["env"], "metadata": {"tool": "shell"}})
    assert r.status_code == 202, r.text
    eid = r.json()["id"]
    e = c.wait_execution(eid)
    assert e["status"] == "succeeded", e
    req = receiver.wait_span(lambda s: s["name"] == "POST /v1/sandbox/executions"
                             and s["traceId"] == tid, what="execution create request span")
    assert req["parentSpanId"] == pid and attrs(req)["http.response.status_code"] == 202
    assert req["_resource"]["service.name"] == "sbx-test"
    ex = receiver.wait_span(lambda s: s["name"] == "sandbox.execution" and s["traceId"] == tid,
                            what="execution span")
    assert ex["parentSpanId"] == req["spanId"]
    a = attrs(ex)
    assert a["sandbox.execution.id"] == eid
    assert a["sandbox.tenant"] == "tracer"
    assert a["sandbox.profile"] == PROFILE
    assert a["sandbox.status"] == "succeeded"
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == "shell"
    assert "gen_ai.agent.name" not in a
    assert env_of(e["stdout"])["TRACEPARENT"] == f"00-{tid}-{ex['spanId']}-01"


@pytest.mark.parametrize("bad", [
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero parent id
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # unknown version
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # uppercase
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",     # no flags
    "garbage",
])
def test_bad_traceparent_starts_a_new_trace(daemon_factory, monkeypatch, receiver, bad):
    d = traced_daemon(daemon_factory, monkeypatch, receiver.url)
    c = d.client(d.create_key("tracer"))
    mark = uuid.uuid4().hex
    r = c.get(f"/v1/sandbox/sessions?status=ready&x={mark}", headers={"traceparent": bad})
    assert r.status_code == 200, r.text
    s = receiver.wait_span(lambda s: s["name"] == "GET /v1/sandbox/sessions", what="list span")
    assert "parentSpanId" not in s or not s["parentSpanId"]
    assert s["traceId"] not in bad.lower() and s["traceId"] != "0" * 32
    assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16


def test_unmatched_and_failed_requests_are_traced(daemon_factory, monkeypatch, receiver):
    d = traced_daemon(daemon_factory, monkeypatch, receiver.url)
    c = d.client(d.create_key("tracer"))
    tid, pid = new_ids()
    assert c.get("/v1/nope", headers={"traceparent": tp(tid, pid)}).status_code == 404
    s = receiver.wait_span(lambda s: s["traceId"] == tid, what="404 span")
    assert s["name"] == "GET" and attrs(s)["http.response.status_code"] == 404
    assert "http.route" not in attrs(s)


def test_traceparent_reaches_the_sandbox_without_export(alice, any_profile):
    """No collector configured (the shared daemon): the context still propagates."""
    tid, pid = new_ids()
    s = alice.new_session(any_profile)
    try:
        r = alice.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                       headers={"traceparent": tp(tid, pid)}, json={"command": ["env"]})
        assert r.status_code == 200, r.text
        got = env_of(r.json()["stdout"])["TRACEPARENT"]
        assert re.fullmatch(rf"00-{tid}-[0-9a-f]{{16}}-01", got), got
        assert got.split("-")[2] != pid  # the exec span's id, not the caller's
        # The caller's own TRACEPARENT wins.
        mine = tp(tid, "1" * 16)
        r = alice.post(f"/v1/sandbox/sessions/{s['id']}/exec", headers={"traceparent": tp(tid, pid)},
                       json={"command": ["env"], "env": {"TRACEPARENT": mine}})
        assert env_of(r.json()["stdout"])["TRACEPARENT"] == mine
        # Unsampled: propagated with flags 00.
        r = alice.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                       headers={"traceparent": tp(tid, pid, "00")}, json={"command": ["env"]})
        assert env_of(r.json()["stdout"])["TRACEPARENT"].endswith("-00")
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- a collector that is down or hangs ----------------------------------

def p50(client, n=40):
    sid = client.new_session(PROFILE)["id"]
    times = []
    for _ in range(n):
        t = time.monotonic()
        r = client.get(f"/v1/sandbox/sessions/{sid}")
        assert r.status_code == 200, r.text
        times.append(time.monotonic() - t)
    client.delete(f"/v1/sandbox/sessions/{sid}")
    return statistics.median(times)


def exporter_counts(d):
    d.stop(timeout=15)
    with open(d.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    m = re.findall(r"exporter stopped: exported=(\d+) dropped_queue_full=(\d+) "
                   r"export_failed=(\d+)", log)
    assert m, "no exporter summary in the log:\n" + log[-3000:]
    return tuple(int(x) for x in m[-1])


def test_collector_down_does_not_slow_requests(daemon_factory, monkeypatch):
    plain = daemon_factory()
    plain.start()
    base = p50(plain.client(plain.create_key("t")))
    closed = free_port()  # nothing listens there: connection refused
    d = traced_daemon(daemon_factory, monkeypatch, f"http://127.0.0.1:{closed}")
    traced = p50(d.client(d.create_key("t")))
    assert traced <= base * 3 + 0.02, (base, traced)
    exported, dropped, failed = exporter_counts(d)
    assert exported == 0
    assert dropped == 0  # ~45 spans never fill a queue of 2048
    assert failed > 0


def test_hanging_collector_fills_the_queue_and_drops(daemon_factory, monkeypatch):
    """A collector that accepts connections and never answers: each export
    waits for its timeout, the small queue fills, spans are dropped and
    counted; requests stay fast."""
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(64)  # never accept(): the kernel completes handshakes, nobody answers
    try:
        plain = daemon_factory()
        plain.start()
        base = p50(plain.client(plain.create_key("t")))
        d = traced_daemon(daemon_factory, monkeypatch,
                          f"http://127.0.0.1:{hang.getsockname()[1]}",
                          OTEL_BSP_MAX_QUEUE_SIZE=8, OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4,
                          OTEL_EXPORTER_OTLP_TIMEOUT=2000)
        traced = p50(d.client(d.create_key("t")))
        assert traced <= base * 3 + 0.02, (base, traced)
        t = time.monotonic()
        exported, dropped, failed = exporter_counts(d)
        assert time.monotonic() - t < 8  # shutdown's flush is bounded
        assert exported == 0
        assert dropped > 0
    finally:
        hang.close()


def test_queue_not_full_means_nothing_dropped(daemon_factory, monkeypatch, receiver):
    d = traced_daemon(daemon_factory, monkeypatch, receiver.url)
    c = d.client(d.create_key("t"))
    for _ in range(30):
        assert c.get("/v1/sandbox/sessions").status_code == 200
    wait_until(lambda: len([s for s in receiver.spans()
                            if s["name"] == "GET /v1/sandbox/sessions"]) >= 30, 15,
               what="30 list spans")
    exported, dropped, failed = exporter_counts(d)
    assert dropped == 0 and failed == 0 and exported >= 30
