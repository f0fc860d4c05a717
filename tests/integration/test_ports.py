"""Ports (Upstream): HTTP proxied to a server listening inside a
session's own network (container: its netns; gvisor: gVisor's netstack) —
files, bodies, headers, streamed responses — while the sandbox still cannot
connect out, the API key never reaches it, and the route cannot be bent to
reach host services.

The servers inside are started from a Python context (a thread of its
interpreter), so they live as long as the context and need no other
feature."""
import json
import socket
import threading
import time

import pytest

from sbxtest import assert_error

SERVER = r'''
import http.server, json, os, threading, time
os.makedirs('/work/site', exist_ok=True)
with open('/work/site/hello.txt', 'w') as f:
    f.write('hello from inside\n')

class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def __init__(self, *a, **k):
        super().__init__(*a, directory='/work/site', **k)
    def log_message(self, *a):
        pass
    def echo(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n).decode('latin-1')
        out = json.dumps({'method': self.command, 'path': self.path, 'body': body,
                          'headers': {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(201)
        self.send_header('Content-Type', 'application/json')
        self.send_header('X-Upstream', 'yes')
        self.send_header('Set-Cookie', 'a=1')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_POST = do_PUT = do_PATCH = do_DELETE = echo
    def do_GET(self):
        if self.path.startswith('/stream'):
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for i in range(3):
                data = ('chunk%d\n' % i).encode()
                self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
                self.wfile.flush()
                time.sleep(1)
            self.wfile.write(b'0\r\n\r\n')
            return
        if self.path.startswith('/big'):
            size = 8 << 20
            self.send_response(200)
            self.send_header('Content-Length', str(size))
            self.end_headers()
            block = b'x' * 65536
            for _ in range(size // len(block)):
                self.wfile.write(block)
            return
        if self.path.startswith('/echo'):
            return self.echo()
        return super().do_GET()

srv = http.server.ThreadingHTTPServer(('127.0.0.1', PORT), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
'''


@pytest.fixture
def served(alice, capable):
    """A session with an HTTP server on 127.0.0.1:8000 inside (started from
    a python context)."""
    capable("contexts")
    s = alice.new_session(capable("upstream"))
    sid = s["id"]
    assert "upstream" in s["capabilities"]
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts", json={"language": "python"})
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = alice.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run",
                   json={"code": SERVER.replace("PORT", "8000")})
    assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
    yield {"sid": sid, "cid": cid, "base": f"/v1/sandbox/sessions/{sid}/ports/8000"}
    alice.delete(f"/v1/sandbox/sessions/{sid}")


def run(client, sid, cid, code):
    r = client.post(f"/v1/sandbox/sessions/{sid}/contexts/{cid}/run", json={"code": code})
    assert r.status_code == 200, r.text
    return r.json()


def test_get_a_file(alice, served, gvisor_gap, microvm_gap):
    # fd-in CONNECT hands the proxy an AF_UNIX socketpair end; libcurl
    # fails it at once ("Failed to connect ... after 0 ms")
    gvisor_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    microvm_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    r = alice.get(served["base"] + "/hello.txt")
    assert r.status_code == 200, r.text
    assert r.text == "hello from inside\n"
    assert r.headers["Content-Type"].startswith("text/plain")
    assert r.headers["Server"].startswith("SimpleHTTP")
    # the directory listing, with and without the trailing slash
    assert "hello.txt" in alice.get(served["base"] + "/").text
    assert "hello.txt" in alice.get(served["base"]).text
    assert alice.get(served["base"] + "/missing.txt").status_code == 404


def test_post_body_headers_and_query(alice, served, keys, gvisor_gap, microvm_gap):
    # fd-in CONNECT hands the proxy an AF_UNIX socketpair end; libcurl
    # fails it at once ("Failed to connect ... after 0 ms")
    gvisor_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    microvm_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    r = alice.post(served["base"] + "/echo/a%20b/c?x=1&y=%26z&flag",
                   data=b"payload \x00\xff bytes",
                   headers={"Content-Type": "application/octet-stream", "X-Custom": "yes",
                            "Connection": "keep-alive, X-Hop", "X-Hop": "must-go"})
    assert r.status_code == 201, r.text
    assert r.headers["X-Upstream"] == "yes" and r.headers["Set-Cookie"] == "a=1"
    e = r.json()
    assert e["method"] == "POST"
    assert e["path"] == "/echo/a%20b/c?x=1&y=%26z&flag"
    assert e["body"].encode("latin-1") == b"payload \x00\xff bytes"
    h = e["headers"]
    assert h["x-custom"] == "yes" and h["content-type"] == "application/octet-stream"
    # the API key never reaches the sandbox; hop-by-hop headers stop here
    assert "authorization" not in h
    assert keys["alice"] not in json.dumps(e)
    assert "x-hop" not in h
    assert h["x-forwarded-proto"] == "http"
    assert h["x-forwarded-prefix"] == served["base"]
    assert h["x-forwarded-for"] == "127.0.0.1"
    for method in ("PUT", "PATCH", "DELETE"):
        r = alice.request(method, served["base"] + "/echo", data=b"m")
        assert r.status_code == 201 and r.json()["method"] == method, r.text


def test_streaming_response(alice, served, gvisor_gap, microvm_gap):
    # fd-in CONNECT hands the proxy an AF_UNIX socketpair end; libcurl
    # fails it at once ("Failed to connect ... after 0 ms")
    gvisor_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    microvm_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    url = alice.base + served["base"] + "/stream"
    t0 = time.monotonic()
    seen = []
    with alice.s.get(url, headers=alice.headers(), stream=True, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            seen.append((line, time.monotonic() - t0))
    assert [s[0] for s in seen] == [b"chunk0", b"chunk1", b"chunk2"]
    # the first chunk arrived long before the last was written: not buffered
    assert seen[0][1] < 1.0 and seen[2][1] > 1.5, seen


def test_big_response_streams(alice, served, gvisor_gap, microvm_gap):
    # fd-in CONNECT hands the proxy an AF_UNIX socketpair end; libcurl
    # fails it at once ("Failed to connect ... after 0 ms")
    gvisor_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    microvm_gap("ports: the proxy's curl refuses the fd-in socketpair (502)")
    r = alice.get(served["base"] + "/big")
    assert r.status_code == 200 and len(r.content) == 8 << 20


def test_nothing_listening_is_502(alice, served):
    r = alice.get(f"/v1/sandbox/sessions/{served['sid']}/ports/8001/")
    assert_error(r, 502, "bad_gateway")


def test_bad_ports(alice, served):
    for bad in ("0", "65536", "abc", "-1", "80a"):
        r = alice.get(f"/v1/sandbox/sessions/{served['sid']}/ports/{bad}/")
        assert_error(r, 400, "invalid_request", "port")
    r = alice.request("TRACE", served["base"] + "/")
    assert r.status_code == 405


def test_cannot_reach_host_services(alice, daemon, served):
    """A port the host listens on (the daemon's own, and a fresh listener)
    but the sandbox does not: 502, never the host's service."""
    r = alice.get(f"/v1/sandbox/sessions/{served['sid']}/ports/{daemon.port}/healthz")
    assert_error(r, 502, "bad_gateway")
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    hit = []
    def accept():
        lst.settimeout(5)
        try:
            hit.append(lst.accept())
        except OSError:
            pass
    t = threading.Thread(target=accept)
    t.start()
    port = lst.getsockname()[1]
    r = alice.get(f"/v1/sandbox/sessions/{served['sid']}/ports/{port}/")
    assert_error(r, 502, "bad_gateway")
    t.join()
    lst.close()
    assert hit == [], "the proxy reached a host listener"


def test_sandbox_still_cannot_connect_out(alice, daemon, served):
    code = ("import socket\nr = 'connected'\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {daemon.port}), timeout=3)\n"
            "except OSError as e:\n"
            "    r = type(e).__name__\nr")
    out = run(alice, served["sid"], served["cid"], code)
    assert out["result"] in ("'ConnectionRefusedError'", "'OSError'", "'TimeoutError'"), out
    code = ("import socket\nr = 'connected'\n"
            "try:\n"
            "    socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
            "except OSError as e:\n"
            "    r = type(e).__name__\nr")
    out = run(alice, served["sid"], served["cid"], code)
    assert out["result"] != "'connected'", out


def test_process_profile_has_no_upstream(alice, profile_table):
    if not profile_table.get("process", {}).get("available"):
        pytest.skip("no process profile")
    s = alice.new_session("process")
    try:
        assert "upstream" not in s["capabilities"]
        r = alice.get(f"/v1/sandbox/sessions/{s['id']}/ports/8000/")
        e = assert_error(r, 409, "conflict")
        assert "upstream" in e["message_i18n"]["en"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_other_tenant_gets_404(bob, served):
    assert_error(bob.get(served["base"] + "/hello.txt"), 404, "not_found")


def test_unauthenticated_is_401(daemon, served):
    import requests
    r = requests.get(daemon.url + served["base"] + "/hello.txt", timeout=30)
    assert r.status_code == 401
