"""Watch: GET …/watch?path=D[&recursive=true] streams SSE events
from an inotify watcher inside the sandbox — create, modify, delete, move
(one event with from/to), new subdirectories followed when recursive;
escapes (`..`, a symlink to /) refused or contained; the stream ends when
the directory goes or the session is deleted; the watcher never outlives
the stream; 409 where the driver lacks the capability."""
import http.client
import queue
import socket
import threading
import urllib.parse

import pytest

import sbxsse

from sbxtest import assert_error, wait_until


@pytest.fixture
def csession(alice, capable):
    s = alice.new_session(capable("watch"))
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def wpath(sid):
    return f"/v1/sandbox/sessions/{sid}/watch"


class Stream:
    """Reads an SSE response on a thread (http.client, so close() drops
    the socket at once instead of draining the stream); events land in a
    queue as (event, data)."""

    def __init__(self, alice, sid, **params):
        u = urllib.parse.urlsplit(alice.base)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.conn.request("GET", wpath(sid) + "?" + urllib.parse.urlencode(params),
                          headers=alice.headers({"Accept": "text/event-stream"}))
        self.r = self.conn.getresponse()
        self.status = self.r.status
        self.headers = self.r.headers
        self.q = queue.Queue()
        if self.status != 200:
            self.text = self.r.read().decode()
            self.q.put(("<eof>", None))
            return
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        sbxsse.pump(self.r, self.q)

    def until(self, pred, timeout=10, what="event"):
        return sbxsse.until(self.q, pred, timeout, what)

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self.conn.close()


def sh(alice, sid, script):
    r = alice.exec(sid, command=["sh", "-c", script])
    assert r["exit_code"] == 0, (r["stdout"], r["stderr"])


def has(ev_type, path, **extra):
    return lambda ev, d: (ev == ev_type and d and d.get("path") == path and
                          all(d.get(k) == v for k, v in extra.items()))


def test_watch_create_modify_delete_move(alice, csession):
    sid = csession["id"]
    sh(alice, sid, "mkdir -p /work/w")
    s = Stream(alice, sid, path="/work/w")
    try:
        assert s.status == 200, s.text
        assert s.headers["Content-Type"].startswith("text/event-stream")
        s.until(lambda ev, d: ev == "ready" and d["path"] == "/work/w", what="ready")
        sh(alice, sid, "echo one > /work/w/a.txt")
        s.until(has("create", "/work/w/a.txt", dir=False), what="create")
        s.until(has("modify", "/work/w/a.txt"), what="modify")
        sh(alice, sid, "echo two >> /work/w/a.txt")
        s.until(has("modify", "/work/w/a.txt"), what="second modify")
        sh(alice, sid, "mv /work/w/a.txt /work/w/b.txt")
        s.until(lambda ev, d: ev == "move" and d["from"] == "/work/w/a.txt" and
                d["to"] == "/work/w/b.txt", what="move")
        sh(alice, sid, "rm /work/w/b.txt")
        s.until(has("delete", "/work/w/b.txt"), what="delete")
        sh(alice, sid, "mkdir /work/w/d")
        s.until(has("create", "/work/w/d", dir=True), what="mkdir")
        # moved out of the watched tree: a delete; moved in: a create
        sh(alice, sid, "echo z > /work/w/out && mv /work/w/out /tmp/out")
        s.until(has("delete", "/work/w/out"), what="moved-out delete")
        sh(alice, sid, "mv /tmp/out /work/w/in")
        s.until(has("create", "/work/w/in"), what="moved-in create")
    finally:
        s.close()


def test_watch_recursive_follows_new_dirs(alice, csession, gvisor_gap):
    gvisor_gap("watch: a recursive watch reports nothing from existing subdirectories")
    sid = csession["id"]
    sh(alice, sid, "mkdir -p /work/r/old/deeper")
    s = Stream(alice, sid, path="/work/r", recursive="true")
    try:
        s.until(lambda ev, d: ev == "ready", what="ready")
        sh(alice, sid, "touch /work/r/old/deeper/f1")
        s.until(has("create", "/work/r/old/deeper/f1"), what="create in existing subdir")
        sh(alice, sid, "mkdir -p /work/r/new/sub && touch /work/r/new/sub/f2")
        s.until(has("create", "/work/r/new/sub/f2"), what="create in a new subdir")
        sh(alice, sid, "mv /work/r/new /work/r/renamed && touch /work/r/renamed/sub/f3")
        s.until(has("create", "/work/r/renamed/sub/f3"), what="create in a renamed subdir")
    finally:
        s.close()
    # non-recursive: nothing from below
    s = Stream(alice, sid, path="/work/r")
    try:
        s.until(lambda ev, d: ev == "ready", what="ready")
        sh(alice, sid, "touch /work/r/old/deeper/nope /work/r/top")
        seen = s.until(has("create", "/work/r/top"), what="top-level create")
        assert not any(d and "nope" in d.get("path", "") for _, d in seen)
    finally:
        s.close()


def test_watch_ends_when_dir_removed_and_on_session_delete(alice, daemon, capable):
    ses = alice.new_session(capable("watch"))
    sid = ses["id"]
    sh(alice, sid, "mkdir -p /work/gone /work/stay")
    s = Stream(alice, sid, path="/work/gone")
    s.until(lambda ev, d: ev == "ready", what="ready")
    sh(alice, sid, "rm -r /work/gone")
    s.until(lambda ev, d: ev == "end", what="end")
    s.until(lambda ev, d: ev == "<eof>", what="eof")
    s2 = Stream(alice, sid, path="/work/stay")
    s2.until(lambda ev, d: ev == "ready", what="ready")
    assert alice.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    s2.until(lambda ev, d: ev == "end" and "session" in d["reason"], what="end on delete")
    assert daemon.healthy()


def test_watch_client_leaving_stops_watcher(alice, csession):
    sid = csession["id"]
    sh(alice, sid, "mkdir -p /work/c")

    def count():
        r = alice.exec(sid, command=["sh", "-c", "cat /proc/[0-9]*/comm | grep -c sbx-init"
                                                  " || true"])
        return int(r["stdout"].strip() or 0)

    def watchers():
        # watchers are forks of sbx-init; so are PID 1, this exec's shepherd
        # and idle shepherds (its herd): the fewest of three samples leaves
        # out one that is just ending.
        return min(count() for _ in range(3))

    base = watchers()
    streams = [Stream(alice, sid, path="/work/c") for _ in range(3)]
    for s in streams:
        s.until(lambda ev, d: ev == "ready", what="ready")
    assert watchers() >= base + 3
    for s in streams:
        s.close()
    # The server learns the client left when a write fails: after one or
    # two of the SSE stream's 15 s keep-alives.
    # (At most base, not exactly: base may have counted a shepherd that ended.)
    wait_until(lambda: watchers() <= base, 45, interval=0.2, what="the watchers to go")


def test_watch_limit_per_session(alice, csession):
    sid = csession["id"]
    streams = []
    try:
        for _ in range(8):
            s = Stream(alice, sid, path="/work")
            streams.append(s)
            s.until(lambda ev, d: ev == "ready", what="ready")
        r = alice.get(wpath(sid), params={"path": "/work"})
        assert_error(r, 429, "quota_exceeded")
    finally:
        for s in streams:
            s.close()


def test_watch_escapes(alice, csession, gvisor_gap):
    gvisor_gap("watch: a watch on /work/rootlink/tmp (symlink to /) reports no events "
               "from the sandbox's /tmp")
    sid = csession["id"]
    assert_error(alice.get(wpath(sid), params={"path": "/work/../etc"}), 400, "invalid_request")
    assert_error(alice.get(wpath(sid), params={"path": "/work/none"}), 404, "not_found")
    sh(alice, sid, "touch /work/file && ln -s / /work/rootlink")
    assert_error(alice.get(wpath(sid), params={"path": "/work/file"}), 404, "not_found")
    # a symlink to / resolves to the sandbox's own root: events are the sandbox's
    s = Stream(alice, sid, path="/work/rootlink/tmp")
    try:
        assert s.status == 200
        ready = s.until(lambda ev, d: ev == "ready", what="ready")
        assert ready[-1][1]["path"] == "/work/rootlink/tmp"
        sh(alice, sid, "touch /tmp/inside")
        s.until(has("create", "/work/rootlink/tmp/inside"), what="create seen in sandbox /tmp")
    finally:
        s.close()
    # a recursive watch never follows a symlinked subdirectory
    sh(alice, sid, "mkdir -p /work/rw && ln -s /tmp /work/rw/tmplink")
    s = Stream(alice, sid, path="/work/rw", recursive="true")
    try:
        s.until(lambda ev, d: ev == "ready", what="ready")
        sh(alice, sid, "touch /tmp/elsewhere /work/rw/mark")
        seen = s.until(has("create", "/work/rw/mark"), what="mark")
        assert not any(d and "elsewhere" in d.get("path", "") for _, d in seen)
    finally:
        s.close()


def test_watch_needs_capability(alice, profile_table):
    p = profile_table.get("process")
    if not p or not p["available"]:
        pytest.skip("process profile unavailable")
    s = alice.new_session("process")
    try:
        if "watch" in s["capabilities"]:
            pytest.skip("the process driver advertises watch")
        r = alice.get(wpath(s["id"]), params={"path": "/work"})
        assert_error(r, 409, "conflict")
        assert "watch" in r.json()["error"]["message"]
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")
