"""caps.py — issue 4's benchmark rows: time to the first byte of a streamed
exec, throughput of a streamed `yes | head -c 100M`, and a context `run` of
`1+1` against starting `python3 -c` fresh.  Each function returns samples
in microseconds for Bench.row().  Plain sockets and http.client on one
keep-alive connection: the numbers are the daemon's, not a client library's."""
import http.client
import json
import time
import urllib.parse


class Failed(Exception):
    pass


def _conn(d):
    u = urllib.parse.urlparse(d.url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=120)


def _headers(d, sse=False):
    h = {"Authorization": "Bearer " + d.key, "Content-Type": "application/json"}
    if sse:
        h["Accept"] = "text/event-stream"
    return h


def stream_ttfb(d, sid, n=40):
    """Request sent → first `stdout` event read, for `echo x; sleep 0.05`."""
    body = json.dumps({"command": ["sh", "-c", "echo x; sleep 0.05"]})
    out = []
    for i in range(n + 3):
        c = _conn(d)
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandbox/sessions/%s/exec" % sid, body, _headers(d, True))
        r = c.getresponse()
        if r.status != 200:
            raise Failed("stream exec: HTTP %d %s" % (r.status, r.read()[:200]))
        first = None
        buf = b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            if first is None and b"event: stdout" in buf:
                first = time.perf_counter()
        c.close()
        if first is None or b"event: exit" not in buf:
            raise Failed("stream exec: no stdout or exit event")
        if i >= 3:
            out.append((first - t0) * 1e6)
    return out


def stream_throughput(d, sid, n=3, size=100 * 1024 * 1024):
    """Wall time of streaming `yes | head -c 100M` (all bytes read raw)."""
    body = json.dumps({"command": ["sh", "-c", "yes | head -c %d" % size],
                       "timeout_s": 600})
    out, facts = [], {}
    for _ in range(n):
        c = _conn(d)
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandbox/sessions/%s/exec" % sid, body, _headers(d, True))
        r = c.getresponse()
        if r.status != 200:
            raise Failed("stream exec: HTTP %d" % r.status)
        total, tail, seen_exit = 0, b"", False
        while True:
            chunk = r.read1(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            seen_exit = seen_exit or b"event: exit" in tail + chunk
            tail = chunk[-16:]
        dt = time.perf_counter() - t0
        c.close()
        if not seen_exit:
            raise Failed("stream exec: no exit event")
        out.append(dt * 1e6)
        facts["stream_bytes_on_wire"] = total
    return out, facts


def context_runs(d, sid, n=50):
    """POST …/contexts/{cid}/run {"code":"1+1"} round trips."""
    c = _conn(d)
    c.request("POST", "/v1/sandbox/sessions/%s/contexts" % sid,
              json.dumps({"language": "python"}), _headers(d))
    r = c.getresponse()
    js = json.loads(r.read() or b"{}")
    if r.status != 201:
        raise Failed("context create: HTTP %d %s" % (r.status, js))
    cid = js["id"]
    out = []
    for i in range(n + 3):
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandbox/sessions/%s/contexts/%s/run" % (sid, cid),
                  json.dumps({"code": "1+1"}), _headers(d))
        r = c.getresponse()
        js = json.loads(r.read() or b"{}")
        if r.status != 200 or js.get("result") != "2":
            raise Failed("context run: HTTP %d %s" % (r.status, str(js)[:200]))
        if i >= 3:
            out.append((time.perf_counter() - t0) * 1e6)
    c.close()
    return out


def python_fresh(d, sid, n=20):
    """The same `1+1` by starting an interpreter: exec python3 -c 'print(1+1)'."""
    c = _conn(d)
    body = json.dumps({"command": ["python3", "-c", "print(1+1)"]})
    out = []
    for i in range(n + 2):
        t0 = time.perf_counter()
        c.request("POST", "/v1/sandbox/sessions/%s/exec" % sid, body, _headers(d))
        r = c.getresponse()
        js = json.loads(r.read() or b"{}")
        if r.status != 200 or js.get("stdout") != "2\n":
            raise Failed("exec python3: HTTP %d %s" % (r.status, str(js)[:200]))
        if i >= 2:
            out.append((time.perf_counter() - t0) * 1e6)
    c.close()
    return out


def audited_patch(d, sid, n=300):
    """PATCH …/sessions/{id} {metadata}: one store update plus one audit
    append per request (the audit chain's append path)."""
    c = _conn(d)
    out = []
    for i in range(n + 10):
        body = json.dumps({"metadata": {"bench": str(i)}})
        t0 = time.perf_counter()
        c.request("PATCH", "/v1/sandbox/sessions/%s" % sid, body, _headers(d))
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise Failed("PATCH: HTTP %d" % r.status)
        if i >= 10:
            out.append((time.perf_counter() - t0) * 1e6)
    c.close()
    return out


def audit_events(d):
    """Number of events in the chain (admin key needed: d.admin_key)."""
    c = _conn(d)
    c.request("GET", "/v1/audit/verify", headers={"Authorization": "Bearer " + d.admin_key})
    r = c.getresponse()
    js = json.loads(r.read() or b"{}")
    c.close()
    return js.get("events")
