"""The API under connection floods: more than 1024 daemon fds (select()
could not watch them: every new connection was reset, /healthz included),
a thousand sockets that each send half a request head (they held a thread
each for up to 120 s), tricklers that keep an idle timeout from ever
firing, and the per-client-address limit (an IPv6 client counted by its
/64, in a network namespace of its own).

The floods come from 127.0.0.2… (every 127/8 address is local on lo), the
other tenants from 127.0.0.1, as a flood from elsewhere would.  Settings
are given through the environment, so that on a daemon that lacks them the
tests still run and fail on what they check."""
import contextlib
import ctypes
import os
import resource
import select
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

from sbxtest import Daemon, wait_until

SOURCES = [f"127.0.0.{i}" for i in range(2, 22)]  # 20 addresses
PER_SOURCE = 55                                     # under the default 64 per client
HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "


def setup_module():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))


def nfds(d):
    import os
    return len(os.listdir(f"/proc/{d.pid}/fd"))


def connect_from(src, port, send=b""):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    try:
        s.sendall(send)
    except OSError:
        pass  # refused at once: the caller sees the socket closed
    s.setblocking(False)
    return s


def flood(port, send, per_source=PER_SOURCE):
    socks = []
    for src in SOURCES:
        for _ in range(per_source):
            socks.append((connect_from(src, port, send), time.monotonic()))
    return socks


def closed_by_peer(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset


def close_all(socks):
    for s, _ in socks:
        s.close()


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return r, time.monotonic() - t0


def test_more_than_1024_daemon_fds_keep_the_api_serving(daemon_factory):
    d = daemon_factory(env={"SANDBOXD_REQUEST_HEAD_TIMEOUT": "120"}).start()
    bob = d.client(d.create_key("bob"))
    socks = flood(d.port, b"")
    try:
        wait_until(lambda: nfds(d) > 1024 + 64, 30, 0.1,
                   what="the daemon to hold more than 1024 fds (1100 idle connections)")
        r = requests.get(d.url + "/healthz", timeout=20)
        assert r.status_code == 200, r.text
        sid = bob.new_session("process")["id"]
        out = bob.exec(sid, command=["sh", "-c", "echo fd-ok"])
        assert out["status"] == "succeeded" and out["stdout"] == "fd-ok\n", out
        assert bob.delete(f"/v1/sandbox/sessions/{sid}").status_code in (200, 204)
        assert nfds(d) > 1024, "the idle connections were dropped while the checks ran"
    finally:
        close_all(socks)


def test_flood_of_half_heads_starves_nobody_and_is_cut_at_the_deadline(daemon_factory):
    deadline = 8
    d = daemon_factory(env={"SANDBOXD_REQUEST_HEAD_TIMEOUT": str(deadline)}).start()
    bob = d.client(d.create_key("bob"))
    bob.get("/v1/sandbox/sessions")  # the key is known and the client warm
    socks = flood(d.port, HALF_HEAD)
    # a few tricklers too: a byte every half second resets an idle timeout
    tricklers = [(connect_from(src, d.port, HALF_HEAD), time.monotonic())
                 for src in SOURCES[:5]]
    try:
        h, th = timed(lambda: requests.get(d.url + "/healthz", timeout=30))
        assert h.status_code == 200, h.text
        b, tb = timed(lambda: bob.get("/v1/sandbox/sessions", timeout=30))
        assert b.status_code == 200, b.text
        assert th < 5 and tb < 5, f"served, but slowly: /healthz {th:.1f} s, bob {tb:.1f} s"
        held = sum(not closed_by_peer(s) for s, _ in socks)
        assert held > 1000, f"only {held} slow sockets were still open: no flood was measured"

        pending = {s: t for s, t in socks + tricklers}
        cut = {}
        end = time.monotonic() + deadline + 20
        while pending and time.monotonic() < end:
            for s, _ in tricklers:
                if s in pending:
                    try:
                        s.send(b"x")
                    except OSError:
                        pass
            p = select.poll()
            by_fd = {s.fileno(): s for s in pending}
            for fd in by_fd:
                p.register(fd, select.POLLIN)
            for fd, _ in p.poll(500):
                s = by_fd[fd]
                if closed_by_peer(s):
                    cut[s] = time.monotonic() - pending.pop(s)
        assert not pending, f"{len(pending)} slow sockets still open {deadline + 20} s after " \
                            f"connecting (head deadline {deadline} s)"
        early = [t for t in cut.values() if t < deadline - 1]
        assert not early, f"{len(early)} sockets were cut before the deadline, e.g. {early[:3]}"
        assert all(s in cut for s, _ in tricklers), "a trickler outlived the deadline"
        assert d.healthy()
    finally:
        close_all(socks + tricklers)


def test_per_client_address_connection_limit(daemon_factory):
    d = daemon_factory(env={"SANDBOXD_MAX_CONNECTIONS_PER_CLIENT": "8",
                            "SANDBOXD_REQUEST_HEAD_TIMEOUT": "60"}).start()
    get = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    held = []
    try:
        for _ in range(8):  # each answered: the daemon counts it as open
            s = connect_from("127.0.0.9", d.port, get)
            s.setblocking(True)
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), "a connection under the limit"
            held.append(s)
        extra = connect_from("127.0.0.9", d.port, get)
        extra.setblocking(True)
        try:
            got = extra.recv(4096)
        except ConnectionResetError:
            got = b""
        assert got == b"", f"the 9th connection from one address was served: {got[:60]!r}"
        extra.close()
        # other addresses are not affected
        assert requests.get(d.url + "/healthz", timeout=10).status_code == 200
        other = connect_from("127.0.0.10", d.port, get)
        other.setblocking(True)
        assert other.recv(4096).startswith(b"HTTP/1.1 200")
        other.close()
        # and a freed slot is usable again
        held.pop().close()

        def served():
            s = connect_from("127.0.0.9", d.port, get)
            s.setblocking(True)
            try:
                return s.recv(4096).startswith(b"HTTP/1.1 200")
            except OSError:
                return False
            finally:
                s.close()
        wait_until(served, 10, 0.1, what="a freed per-address slot to be usable")
    finally:
        for s in held:
            s.close()


# ---- IPv6: a client is its /64 ----------------------------------------------

V6_NET = "2001:db8:1:2::"          # the flooding client's /64
V6_LISTEN = V6_NET + "1"
V6_SOURCES = [V6_NET + h for h in ("10", "20", "30", "40")]
V6_LATE = V6_NET + "50"            # one more address of that /64
V6_OTHER = "2001:db8:1:3::10"      # another client, another /64
CLONE_NEWNET = 0x40000000


def _setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


@contextlib.contextmanager
def v6_netns():
    """A network namespace whose lo holds the daemon's address and the
    clients' (all from 2001:db8::/32); this thread is in it meanwhile, so
    the daemon it starts and the sockets it opens are too."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and ip(8) for a network namespace")
    ns = f"sbx-v6-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        for a in [V6_LISTEN] + V6_SOURCES + [V6_LATE, V6_OTHER]:
            subprocess.run(["ip", "-n", ns, "addr", "add", a + "/64", "dev", "lo", "nodad"],
                           check=True)
        there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            _setns(there)
        finally:
            os.close(there)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
        subprocess.run(["ip", "netns", "del", ns], check=False)


class V6Daemon(Daemon):
    """A daemon listening on V6_LISTEN (started from inside v6_netns)."""

    def __init__(self, *a, **kw):
        # Its namespace has no route to a PostgreSQL run's server; the
        # connection limit does not depend on the store.
        super().__init__(*a, sqlite=True, **kw)
        self.url = f"http://[{V6_LISTEN}]:{self.port}"

    def argv(self):
        argv = super().argv()
        argv[argv.index("--listen") + 1] = f"[{V6_LISTEN}]:{self.port}"
        return argv


def v6_get(src, port):
    """A GET /healthz from src; the socket and whether it was answered 200."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(10)
    s.connect((V6_LISTEN, port))
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: sbx\r\n\r\n")
        return s, s.recv(4096).startswith(b"HTTP/1.1 200")
    except OSError:
        return s, False  # refused at once: closed or reset


def test_ipv6_client_is_limited_by_its_64_not_by_each_address():
    # 2 connections from each of 4 addresses of one /64: under a per-address
    # limit of 8 each address is far from it, yet together they are the
    # client's 8, and a 9th from yet another of its addresses is refused.
    # A client from another /64 is served all along.
    state = tempfile.mkdtemp(prefix="sbx-it-v6-")
    held = []
    with v6_netns():
        d = V6Daemon(state, env={"SANDBOXD_MAX_CONNECTIONS_PER_CLIENT": "8",
                                 "SANDBOXD_REQUEST_HEAD_TIMEOUT": "60"})
        try:
            d.start()
            for src in V6_SOURCES:
                for _ in range(2):
                    s, ok = v6_get(src, d.port)
                    held.append(s)
                    assert ok, f"connection {len(held)} (from {src}) is under the limit"
            for src in (V6_SOURCES[0], V6_LATE):
                s, ok = v6_get(src, d.port)
                s.close()
                assert not ok, f"a 9th connection of the /64 (from {src}) was served"
            s, ok = v6_get(V6_OTHER, d.port)
            s.close()
            assert ok, "a client from another /64 was refused"

            held.pop().close()  # a freed slot serves any address of the /64

            def served():
                s, ok = v6_get(V6_SOURCES[1], d.port)
                s.close()
                return ok
            wait_until(served, 10, 0.1, what="a freed slot of the /64 to be usable")
        except BaseException:
            print(d.log_tail())
            raise
        finally:
            for s in held:
                s.close()
            d.stop(timeout=10)
            d.kill9()
            shutil.rmtree(state, ignore_errors=True)


def test_head_deadline_spares_long_polls_streams_and_tenant_uploads(daemon_factory):
    # The deadline covers the request, never its handling: with a 3 s
    # deadline, a 5 s long-poll, a 5 s event stream and a tenant's upload
    # trickled over 5 s all complete; a stranger's trickled body is cut.
    import json
    from sbxsse import SSE, collect
    d = daemon_factory(env={"SANDBOXD_REQUEST_HEAD_TIMEOUT": "3"}).start()
    bob = d.client(d.create_key("bob"))
    sid = bob.new_session("process")["id"]
    e = bob.new_execution("process", command=["sh", "-c", "sleep 5; echo polled"])
    r = requests.get(f"{d.url}/v1/sandbox/executions/{e['id']}", params={"wait_s": "20"},
                     headers=bob.headers(), timeout=60)
    assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
    r = requests.post(f"{d.url}/v1/sandbox/sessions/{sid}/exec", headers=bob.headers(SSE),
                      json={"command": ["sh", "-c", "sleep 5; echo streamed"]}, stream=True,
                      timeout=60)
    evs, ex = collect(r)
    assert ex and ex["status"] == "succeeded", evs
    assert b"streamed" in b"".join(json.dumps(dd).encode() for _, dd in evs)

    def trickle(key):
        body = b"0123456789"
        head = (f"PUT /v1/sandbox/sessions/{sid}/files?path=/work/slow HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
                + (f"Authorization: Bearer {key}\r\n" if key else "") + "\r\n").encode()
        s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
        t0 = time.monotonic()
        try:
            s.sendall(head)
            for i in range(len(body)):
                time.sleep(0.5)  # the sleep is the test: a client this slow
                s.sendall(body[i:i + 1])
            got = s.recv(4096)
        except OSError:
            got = b""
        finally:
            s.close()
        return got, time.monotonic() - t0
    got, took = trickle(bob.key)
    assert got.startswith(b"HTTP/1.1 201"), (got[:200], took)
    assert took > 4, "the upload was not slow: it tested nothing"
    got, took = trickle(None)
    assert got == b"", f"a stranger's trickled body was read to the end: {got[:200]!r}"
    assert bob.get(f"/v1/sandbox/sessions/{sid}/files",
                   params={"path": "/work/slow"}).content == b"0123456789"
