"""Session files: PUT/GET/list/DELETE, and hostile paths (.., absolute
escapes, symlinks planted by the sandbox) that must stay inside the sandbox:
a clear 4xx or a path resolved inside, never host content, and a healthy
daemon."""
import os
import uuid

import pytest

from sbxtest import assert_error


def fpath(sid):
    return f"/v1/sandbox/sessions/{sid}/files"


def test_put_get_list_delete(alice, session):
    sid = session["id"]
    blob = os.urandom(200_000)
    r = alice.put(fpath(sid), params={"path": "/work/data/blob.bin"}, data=blob)
    assert r.status_code == 201, r.text
    assert r.json() == {"path": "/work/data/blob.bin", "size": len(blob)}
    r = alice.get(fpath(sid), params={"path": "/work/data/blob.bin"})
    assert r.status_code == 200
    assert r.content == blob
    alice.put(fpath(sid), params={"path": "/work/data/small.txt"}, data=b"hi")
    r = alice.get(fpath(sid), params={"path": "/work/data", "list": "true"})
    assert r.status_code == 200, r.text
    ents = {e["name"]: e for e in r.json()["entries"]}
    assert set(ents) == {"blob.bin", "small.txt"}
    e = ents["blob.bin"]
    assert e["path"] == "/work/data/blob.bin"
    assert e["type"] == "file"
    assert e["size"] == len(blob)
    assert isinstance(e["mode"], str) and isinstance(e["mtime"], int)
    r = alice.get(fpath(sid), params={"path": "/work", "list": "true"})
    ents = {e["name"]: e for e in r.json()["entries"]}
    assert ents["data"]["type"] == "dir"
    # the sandbox sees the file where the API put it
    out = alice.exec(sid, command=["cat", "data/small.txt"])
    assert out["stdout"] == "hi"
    # overwrite
    alice.put(fpath(sid), params={"path": "/work/data/small.txt"}, data=b"bye")
    assert alice.get(fpath(sid), params={"path": "/work/data/small.txt"}).content == b"bye"
    r = alice.delete(fpath(sid), params={"path": "/work/data/small.txt"})
    assert r.status_code == 204
    assert_error(alice.get(fpath(sid), params={"path": "/work/data/small.txt"}), 404,
                 "not_found")
    assert_error(alice.delete(fpath(sid), params={"path": "/work/data/small.txt"}), 404,
                 "not_found")


def test_empty_file(alice, session):
    sid = session["id"]
    r = alice.put(fpath(sid), params={"path": "/work/empty"}, data=b"")
    assert r.status_code == 201 and r.json()["size"] == 0
    r = alice.get(fpath(sid), params={"path": "/work/empty"})
    assert r.status_code == 200 and r.content == b""


def test_file_written_by_command_is_readable(alice, session):
    sid = session["id"]
    alice.exec(sid, command=["sh", "-c", "mkdir -p out && printf 'made inside' > out/r.txt"])
    r = alice.get(fpath(sid), params={"path": "/work/out/r.txt"})
    assert r.status_code == 200 and r.content == b"made inside"


def test_missing_path_param(alice, session):
    assert_error(alice.get(fpath(session["id"])), 400, "invalid_request", field="path")
    assert_error(alice.put(fpath(session["id"]), data=b"x"), 400, "invalid_request",
                 field="path")
    assert_error(alice.get(fpath(session["id"]) + "?path="), 400, "invalid_request",
                 field="path")


def test_get_directory_without_list(alice, session):
    r = alice.get(fpath(session["id"]), params={"path": "/work"})
    assert 400 <= r.status_code < 500, r.status_code


def test_list_missing_dir(alice, session):
    assert_error(alice.get(fpath(session["id"]), params={"path": "/work/nope", "list": "true"}),
                 404, "not_found")


HOSTILE = [
    "/work/../etc/passwd",
    "/work/../../../../../../etc/passwd",
    "../../../../etc/passwd",
    "/work/./../../etc/passwd",
    "/work/a/../../../etc/shadow",
    "/etc/passwd",
    "/proc/1/environ",
    "//etc/passwd",
    "/work/%2e%2e/%2e%2e/etc/passwd",
    "/work/\u2025/etc/passwd",
]

HOST_PASSWD = open("/etc/passwd", "rb").read()
# A sandbox may have an /etc/passwd of its own (root, sandbox, nobody); the
# host's has system users no sandbox image here synthesises.
HOST_ONLY_LINES = {l for l in HOST_PASSWD.splitlines()
                   if l.split(b":")[0] not in (b"root", b"nobody", b"sandbox")}
HOST_ETC = set(os.listdir("/etc"))


def never_host_content(r):
    assert r.status_code < 500, f"{r.status_code}: {r.text[:300]}"
    if r.status_code == 200:
        assert r.content != HOST_PASSWD, "host /etc/passwd leaked"
        lines = set(r.content.splitlines())
        assert not (HOST_ONLY_LINES and HOST_ONLY_LINES <= lines), "host /etc/passwd leaked"
        assert b"SANDBOXD" not in r.content


def not_host_etc(names):
    """A listing is the host's /etc if it has its secrets or all its names."""
    assert "shadow" not in names and "gshadow" not in names, "host /etc listed"
    assert not (len(HOST_ETC) > 10 and HOST_ETC <= names), "host /etc listed"


@pytest.mark.parametrize("path", HOSTILE)
def test_hostile_read(daemon, alice, session, path):
    r = alice.get(fpath(session["id"]), params={"path": path})
    never_host_content(r)
    if ".." in path:
        assert 400 <= r.status_code < 500, "a path with .. must be refused"
    r = alice.get(fpath(session["id"]), params={"path": os.path.dirname(path) or "/",
                                                "list": "true"})
    assert r.status_code < 500
    if r.status_code == 200:
        not_host_etc({e["name"] for e in r.json()["entries"]})
    assert daemon.healthy()


@pytest.mark.parametrize("path", ["/work/../escape-" + uuid.uuid4().hex,
                                  "/work/../../tmp/escape-" + uuid.uuid4().hex,
                                  "/tmp/escape-" + uuid.uuid4().hex,
                                  "/etc/escape-" + uuid.uuid4().hex])
def test_hostile_write_stays_inside(daemon, alice, session, path):
    r = alice.put(fpath(session["id"]), params={"path": path}, data=b"escaped")
    assert r.status_code < 500, r.text
    if ".." in path:
        assert 400 <= r.status_code < 500
    name = os.path.basename(path)
    for host_dir in ("/", "/tmp", "/etc", daemon.state_dir, os.path.dirname(daemon.state_dir)):
        assert not os.path.exists(os.path.join(host_dir, name)), f"wrote {host_dir}/{name}"
    assert daemon.healthy()


def test_hostile_delete(daemon, alice, session):
    victim = os.path.join(daemon.state_dir, "victim-" + uuid.uuid4().hex)
    open(victim, "w").write("keep")
    rel = os.path.relpath(victim, "/")
    for p in ("/work/../../../../../../" + rel, "/" + rel):
        r = alice.delete(fpath(session["id"]), params={"path": p})
        assert r.status_code < 500
    assert os.path.exists(victim), "DELETE removed a host file"
    r = alice.delete(fpath(session["id"]), params={"path": "/"})
    assert r.status_code < 500
    assert daemon.healthy()


@pytest.mark.parametrize("target", ["/etc", "/etc/passwd", "/", "../../../../etc"])
def test_planted_symlink(daemon, alice, session, target):
    sid = session["id"]
    r = alice.exec(sid, command=["ln", "-sfn", target, "link"])
    assert r["status"] == "succeeded", r
    for p in ("/work/link", "/work/link/passwd", "/work/link/etc/passwd"):
        never_host_content(alice.get(fpath(sid), params={"path": p}))
        r = alice.get(fpath(sid), params={"path": p, "list": "true"})
        assert r.status_code < 500
        if r.status_code == 200:
            not_host_etc({e["name"] for e in r.json()["entries"]})
    # writing through the link must not land on the host
    name = "via-link-" + uuid.uuid4().hex
    r = alice.put(fpath(sid), params={"path": f"/work/link/{name}"}, data=b"x")
    assert r.status_code < 500
    assert not os.path.exists(f"/etc/{name}") and not os.path.exists(f"/{name}")
    # deleting through the link must not touch the host
    r = alice.delete(fpath(sid), params={"path": "/work/link/passwd"})
    assert r.status_code < 500
    assert open("/etc/passwd", "rb").read() == HOST_PASSWD
    assert daemon.healthy()


def test_symlink_swap_in_parent_dir(daemon, alice, session):
    """A directory replaced by a symlink to the host between two calls."""
    sid = session["id"]
    alice.put(fpath(sid), params={"path": "/work/d/f"}, data=b"inside")
    alice.exec(sid, command=["sh", "-c", "rm -rf d && ln -s /etc d"])
    never_host_content(alice.get(fpath(sid), params={"path": "/work/d/passwd"}))
    name = "swap-" + uuid.uuid4().hex
    r = alice.put(fpath(sid), params={"path": f"/work/d/{name}"}, data=b"x")
    assert r.status_code < 500
    assert not os.path.exists(f"/etc/{name}")
    assert daemon.healthy()
