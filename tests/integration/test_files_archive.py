"""Files and archives: stat, mkdir, move, recursive listing;
GET|PUT …/archive as tar with a round trip of a tree with symlinks and
modes; hostile tars refused (absolute names, "..", a symlink out and a file
written through it, device nodes, entry counts, hard links out of the
archive), each leaving the host untouched, the sandbox's directory empty
and the daemon healthy; `sbx cp` of a directory both ways through the
archive routes.  Against every wanted profile; what needs the archive
capability skips, with the reason, where the profile lacks it (process)."""
import io
import os
import stat
import subprocess
import tarfile
import tempfile
import time
import uuid

import pytest

from sbxtest import assert_error, sbx_bin


def fpath(sid, suffix=""):
    return f"/v1/sandbox/sessions/{sid}/files{suffix}"


def apath(sid):
    return f"/v1/sandbox/sessions/{sid}/archive"


@pytest.fixture
def csession(alice, capable):
    s = alice.new_session(capable("archive"))
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def sh(alice, sid, script):
    r = alice.exec(sid, command=["sh", "-c", script])
    assert r["exit_code"] == 0, (r["stdout"], r["stderr"])
    return r["stdout"]


# ---- stat, mkdir, move, recursive list -------------------------------------

def test_stat_file_dir_symlink(alice, session):
    sid = session["id"]
    sh(alice, sid, "mkdir -p s/d && printf hello > s/f && chmod 640 s/f"
                   " && ln -s ../../etc/passwd s/l")
    r = alice.get(fpath(sid), params={"path": "/work/s/f", "stat": "true"})
    assert r.status_code == 200, r.text
    st = r.json()
    assert st == {"name": "f", "path": "/work/s/f", "type": "file", "size": 5, "mode": "0640",
                  "mtime": st["mtime"]}
    assert abs(st["mtime"] - time.time()) < 120
    st = alice.get(fpath(sid), params={"path": "/work/s/d/", "stat": "true"}).json()
    assert (st["name"], st["path"], st["type"]) == ("d", "/work/s/d", "dir")
    # lstat: the link itself, its target verbatim, never followed
    st = alice.get(fpath(sid), params={"path": "/work/s/l", "stat": "true"}).json()
    assert st["type"] == "symlink" and st["link_target"] == "../../etc/passwd"
    assert_error(alice.get(fpath(sid), params={"path": "/work/s/none", "stat": "true"}), 404,
                 "not_found")
    assert_error(alice.get(fpath(sid), params={"path": "/work/../etc", "stat": "true"}), 400,
                 "invalid_request")


def test_mkdir(alice, session):
    sid = session["id"]
    r = alice.post(fpath(sid, "/mkdir"), params={"path": "/work/m"})
    assert r.status_code == 201, r.text
    assert r.json()["type"] == "dir" and r.json()["path"] == "/work/m"
    # exists → 409; parents=true makes it idempotent
    assert_error(alice.post(fpath(sid, "/mkdir"), params={"path": "/work/m"}), 409, "conflict")
    assert alice.post(fpath(sid, "/mkdir"), params={"path": "/work/m", "parents": "true"}
                      ).status_code == 201
    # missing parent without parents → 404; with → the chain
    assert_error(alice.post(fpath(sid, "/mkdir"), params={"path": "/work/x/y/z"}), 404,
                 "not_found")
    r = alice.post(fpath(sid, "/mkdir"),
                   params={"path": "/work/x/y/z", "parents": "true", "mode": "0750"})
    assert r.status_code == 201, r.text
    assert r.json()["mode"] == "0750"
    assert sh(alice, sid, PSTAT + "pstat a x/y/z") == "750\n"
    # a file in the way → 409
    sh(alice, sid, "touch file")
    assert_error(alice.post(fpath(sid, "/mkdir"), params={"path": "/work/file"}), 409,
                 "conflict")
    assert_error(alice.post(fpath(sid, "/mkdir"), params={"path": "/work/q", "mode": "9"}), 400,
                 "invalid_request", field="mode")


def test_mkdir_through_symlink_stays_inside(alice, session):
    """A symlink to / planted by the sandbox resolves to the sandbox's root."""
    sid = session["id"]
    sh(alice, sid, "ln -s / root")
    marker = "sbxmk" + uuid.uuid4().hex[:8]
    r = alice.post(fpath(sid, "/mkdir"), params={"path": f"/work/root/tmp/{marker}"})
    assert r.status_code in (201, 400, 404), r.text
    assert not os.path.exists(f"/tmp/{marker}"), "mkdir escaped to the host"


def test_move(alice, session):
    sid = session["id"]
    sh(alice, sid, "mkdir -p a/sub && echo 1 > a/sub/f && echo 2 > b && ln -s /etc link")
    r = alice.post(fpath(sid, "/move"), json={"from": "/work/a", "to": "/work/c"})
    assert r.status_code == 200, r.text
    assert r.json()["path"] == "/work/c" and r.json()["type"] == "dir"
    assert sh(alice, sid, "cat c/sub/f; test ! -e a && echo gone") == "1\ngone\n"
    # existing target: 409 unless overwrite
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/work/b", "to": "/work/c/sub/f"}),
                 409, "conflict")
    r = alice.post(fpath(sid, "/move"),
                   json={"from": "/work/b", "to": "/work/c/sub/f", "overwrite": True})
    assert r.status_code == 200, r.text
    assert sh(alice, sid, "cat c/sub/f") == "2\n"
    # a symlink moves as itself (never followed)
    r = alice.post(fpath(sid, "/move"), json={"from": "/work/link", "to": "/work/link2"})
    assert r.status_code == 200 and r.json()["type"] == "symlink", r.text
    assert r.json()["link_target"] == "/etc"
    # the root, "..", missing source, bad body
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/", "to": "/work/r"}), 400,
                 "invalid_request", field="from")
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/work/c", "to": "/work/../x"}),
                 400, "invalid_request")
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/work/nope", "to": "/work/y"}),
                 404, "not_found")
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/work/c"}), 400,
                 "invalid_request", field="to")
    assert_error(alice.post(fpath(sid, "/move"), json={"from": "/work/c", "to": "/work/d",
                                                      "bogus": 1}), 400, "invalid_request")


def test_recursive_list(alice, session):
    sid = session["id"]
    sh(alice, sid, "mkdir -p t/a/b/c && touch t/top t/a/x t/a/b/c/deep && ln -s / t/a/root")
    r = alice.get(fpath(sid), params={"path": "/work/t", "list": "true", "recursive": "true"})
    assert r.status_code == 200, r.text
    paths = {e["path"]: e["type"] for e in r.json()["entries"]}
    assert paths == {"/work/t/top": "file", "/work/t/a": "dir", "/work/t/a/x": "file",
                     "/work/t/a/root": "symlink", "/work/t/a/b": "dir",
                     "/work/t/a/b/c": "dir", "/work/t/a/b/c/deep": "file"}
    r = alice.get(fpath(sid), params={"path": "/work/t", "list": "true", "recursive": "true",
                                      "max_depth": "2"})
    paths = {e["path"] for e in r.json()["entries"]}
    assert "/work/t/a/b" in paths and "/work/t/a/b/c" not in paths
    assert_error(alice.get(fpath(sid), params={"path": "/work/t", "list": "true",
                                               "recursive": "true", "max_depth": "0"}),
                 400, "invalid_request", field="max_depth")


def test_recursive_list_limit(alice, session):
    sid = session["id"]
    sh(alice, sid, "for d in $(seq 1 11); do mkdir -p many/$d;"
                   " seq -f \"many/$d/%g\" 1 1000 | xargs touch; done")
    r = alice.get(fpath(sid), params={"path": "/work/many", "list": "true", "recursive": "true"})
    assert_error(r, 413, "payload_too_large")
    assert alice.get("/healthz").status_code == 200


# ---- archives -------------------------------------------------------------

TREE = r"""
set -e
mkdir -p /work/src/dir/sub /work/src/empty /work/src/ro
printf 'hello\n' > /work/src/a.txt
head -c 300000 /dev/urandom > /work/src/dir/blob.bin
printf '#!/bin/sh\necho hi\n' > /work/src/dir/run.sh && chmod 755 /work/src/dir/run.sh
printf 'secret' > /work/src/dir/sub/private && chmod 600 /work/src/dir/sub/private
ln -s a.txt /work/src/link-rel
ln -s ../a.txt /work/src/dir/up
ln -s /etc/passwd /work/src/abs-link
ln -s dir/sub /work/src/dirlink
echo x > /work/src/ro/f && chmod 555 /work/src/ro
touch -d '2020-01-02 03:04:05' /work/src/a.txt
"""

# `pstat a|h|Y PATH`: mode (octal), link count, mtime — coreutils `stat -c`
# without its statx, which gVisor 2022 answers EINVAL (python's os.stat is
# a plain stat).
PSTAT = ("pstat() { python3 -c 'import os, sys; s = os.stat(sys.argv[2]); "
         "print({\"a\": format(s.st_mode & 0o7777, \"o\"), \"h\": s.st_nlink, "
         "\"Y\": int(s.st_mtime)}[sys.argv[1]])' \"$1\" \"$2\"; }; ")

SNAPSHOT = (PSTAT + "cd {d} && find . -mindepth 1 | sort | while read p; do "
            "if [ -L \"$p\" ]; then echo \"$p L $(readlink \"$p\")\"; "
            "elif [ -d \"$p\" ]; then echo \"$p D $(pstat a \"$p\")\"; "
            "else echo \"$p F $(pstat a \"$p\") $(md5sum < \"$p\" | cut -c1-32)\"; fi; done")


def snapshot(alice, sid, d):
    return sh(alice, sid, SNAPSHOT.replace("{d}", d))  # PSTAT has braces: no format()


def test_archive_round_trip(alice, csession):
    sid = csession["id"]
    sh(alice, sid, TREE)
    r = alice.get(apath(sid), params={"path": "/work/src"}, stream=True)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/x-tar"
    data = r.raw.read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        members = {m.name: m for m in tf.getmembers()}
    assert members["a.txt"].isfile() and members["a.txt"].mtime == int(
        time.mktime(time.strptime("2020-01-02 03:04:05", "%Y-%m-%d %H:%M:%S")))
    assert members["link-rel"].issym() and members["link-rel"].linkname == "a.txt"
    assert members["abs-link"].issym() and members["abs-link"].linkname == "/etc/passwd"
    assert members["dirlink"].issym(), "a symlink to a directory is stored as a link"
    assert not any(n.startswith("dirlink/") for n in members), "links are never followed"
    assert members["dir/run.sh"].mode & 0o777 == 0o755
    assert members["dir/sub/private"].mode & 0o777 == 0o600
    assert members["ro"].isdir() and members["ro"].mode & 0o777 == 0o555
    assert not any(n.startswith("/") or ".." in n.split("/") for n in members)
    # back in elsewhere (the absolute link is refused on the way in: it goes)
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tw:
            for m in tf.getmembers():
                if m.name != "abs-link":
                    tw.addfile(m, tf.extractfile(m) if m.isfile() else None)
    r = alice.put(apath(sid), params={"path": "/work/dst"}, data=out.getvalue())
    assert r.status_code == 201, r.text
    assert r.json()["path"] == "/work/dst"
    assert r.json()["entries"] == len(members) - 1
    sh(alice, sid, "rm /work/src/abs-link")
    assert snapshot(alice, sid, "/work/src") == snapshot(alice, sid, "/work/dst")
    assert sh(alice, sid, PSTAT + "pstat Y /work/dst/a.txt") == \
        sh(alice, sid, PSTAT + "pstat Y /work/src/a.txt")


def test_archive_limits_and_errors(alice, csession):
    sid = csession["id"]
    sh(alice, sid, "mkdir -p /work/l && cd /work/l && seq 1 20 | xargs touch"
                   " && head -c 5000 /dev/zero > big")
    assert_error(alice.get(apath(sid), params={"path": "/work/l", "max_entries": "10"}), 413,
                 "payload_too_large")
    assert_error(alice.get(apath(sid), params={"path": "/work/l", "max_bytes": "4000"}), 413,
                 "payload_too_large")
    assert_error(alice.get(apath(sid), params={"path": "/work/l", "max_entries": "99999999"}),
                 400, "invalid_request", field="max_entries")
    assert_error(alice.get(apath(sid), params={"path": "/work/nope"}), 404, "not_found")
    assert_error(alice.get(apath(sid), params={"path": "/work/l/big"}), 400, "invalid_request")
    assert_error(alice.put(apath(sid), params={"path": "/work/x"}, data=b"not a tar" * 100),
                 400, "invalid_request")
    assert_error(alice.put(apath(sid), params={"path": "/work/x"}, data=b""), 400,
                 "invalid_request")


def test_archive_needs_capability(alice, profile_table):
    p = profile_table.get("process")
    if not p or not p["available"]:
        pytest.skip("process profile unavailable")
    s = alice.new_session("process")
    try:
        assert "archive" not in s["capabilities"]
        r = alice.get(apath(s["id"]), params={"path": "/work"})
        assert_error(r, 409, "conflict")
        assert "archive" in r.json()["error"]["message"]
        assert_error(alice.put(apath(s["id"]), params={"path": "/work"}, data=b"x"), 409,
                     "conflict")
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def tar_of(*members):
    """members: (TarInfo, bytes|None)"""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tw:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
                tw.addfile(ti, io.BytesIO(data))
            else:
                tw.addfile(ti)
    return out.getvalue()


def reg(name, data=b"x"):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.REGTYPE
    ti.mode = 0o644
    return ti, data


def link(name, target, kind=tarfile.SYMTYPE):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = target
    return ti, None


def special(name, kind):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.devmajor, ti.devminor = 1, 3
    return ti, None


HOSTILE = {
    "absolute": ([reg("ok.txt"), reg("/tmp/{m}-abs")], "absolute"),
    "dotdot": ([reg("ok.txt"), reg("../../../../tmp/{m}-dotdot")], ".."),
    "dotdot-inner": ([reg("a/../../{m}")], ".."),
    "symlink-out-then-write": ([link("etc", "/etc"), reg("etc/{m}-through")], "symlink"),
    "symlink-climb": ([link("up", "../../.."), reg("up/tmp/{m}-climb")], "symlink"),
    "symlink-chain": ([link("s", "sub"), reg("sub/x"), reg("s/x2")], "symlink"),
    "chardev": ([special("null", tarfile.CHRTYPE)], "device"),
    "blockdev": ([special("sda", tarfile.BLKTYPE)], "device"),
    "fifo": ([special("fifo", tarfile.FIFOTYPE)], "FIFO"),
    "hardlink-passwd": ([link("pw", "/etc/passwd", tarfile.LNKTYPE)], "hard link"),
    "hardlink-rel-out": ([link("pw", "../../etc/passwd", tarfile.LNKTYPE)], "hard link"),
    "long-component": ([reg("d/" + "n" * 300)], "255"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tar_refused(alice, csession, daemon, case):
    sid = csession["id"]
    m = "sbxh" + uuid.uuid4().hex[:10]
    members, word = HOSTILE[case]
    members = [(ti, d) for ti, d in members]
    for ti, _ in members:
        ti.name = ti.name.replace("{m}", m)
    body = tar_of(*members)
    host_before = set(os.listdir("/tmp"))
    r = alice.put(apath(sid), params={"path": "/work/in"}, data=body)
    assert_error(r, 400, "invalid_request", field="body")
    assert word.lower() in r.json()["error"]["message"].lower(), r.json()
    # nothing written: the target directory was not even created
    assert sh(alice, sid, "test -e /work/in && echo there || echo absent") == "absent\n"
    assert sh(alice, sid, f"ls /tmp /etc | grep -c {m} || true") == "0\n"
    assert not [n for n in set(os.listdir("/tmp")) - host_before if m in n]
    assert not os.path.exists(f"/tmp/{m}-abs") and not os.path.exists(f"/etc/{m}-through")
    assert daemon.healthy()


def test_hostile_tar_entry_count(alice, csession, daemon):
    sid = csession["id"]
    body = tar_of(*[reg(f"f{i}", b"") for i in range(1001)])
    r = alice.put(apath(sid), params={"path": "/work/in", "max_entries": "1000"}, data=body)
    assert_error(r, 413, "payload_too_large")
    assert sh(alice, sid, "test -e /work/in && echo there || echo absent") == "absent\n"
    # and the byte limit
    r = alice.put(apath(sid), params={"path": "/work/in", "max_bytes": "100"},
                  data=tar_of(reg("big", b"y" * 200)))
    assert_error(r, 413, "payload_too_large")
    assert daemon.healthy()


def test_extract_into_planted_symlink_stays_inside(alice, csession):
    """The sandbox planted /work/in/evil -> /etc: a tar entry evil/x lands
    in the sandbox's own /etc (read-only in a container) — never the host."""
    sid = csession["id"]
    m = "sbxp" + uuid.uuid4().hex[:8]
    sh(alice, sid, "mkdir -p /work/in && ln -s /tmp /work/in/evil")
    r = alice.put(apath(sid), params={"path": "/work/in"}, data=tar_of(reg(f"evil/{m}", b"z")))
    assert r.status_code in (201, 400, 500), r.text
    assert not os.path.exists(f"/tmp/{m}")
    if r.status_code == 201:
        assert sh(alice, sid, f"cat /tmp/{m}") == "z"


def test_hard_link_to_earlier_entry_is_copied(alice, csession):
    sid = csession["id"]
    body = tar_of(reg("orig", b"same bytes"), link("copy", "orig", tarfile.LNKTYPE))
    r = alice.put(apath(sid), params={"path": "/work/hl"}, data=body)
    assert r.status_code == 201, r.text
    assert sh(alice, sid, PSTAT + "cat /work/hl/copy; echo; pstat h /work/hl/copy") == \
        "same bytes\n1\n"


# ---- sbx cp of directories ----------------------------------------------------

def run_cp(daemon, keys, *args):
    env = dict(os.environ, SANDBOXD_URL=daemon.url, SANDBOXD_API_KEY=keys["alice"])
    return subprocess.run([sbx_bin(), "cp", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def local_snapshot(root):
    out = []
    for dp, dns, fns in os.walk(root):
        for n in sorted(dns + fns):
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out.append((rel, "L", os.readlink(p)))
            elif stat.S_ISDIR(st.st_mode):
                out.append((rel, "D", oct(st.st_mode & 0o777)))
            else:
                with open(p, "rb") as f:
                    out.append((rel, "F", oct(st.st_mode & 0o777), f.read()))
    return sorted(out)


def test_cp_directory_both_ways(alice, csession, daemon, keys):
    sid = csession["id"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "proj")
        os.makedirs(os.path.join(src, "pkg", "deep"))
        with open(os.path.join(src, "main.py"), "w") as f:
            f.write("print('hi')\n")
        with open(os.path.join(src, "pkg", "deep", "data.bin"), "wb") as f:
            f.write(os.urandom(100_000))
        os.chmod(os.path.join(src, "main.py"), 0o750)
        os.symlink("pkg/deep/data.bin", os.path.join(src, "shortcut"))
        r = run_cp(daemon, keys, src, f"{sid}:/work/")
        assert r.returncode == 0, r.stderr
        assert sh(alice, sid, PSTAT + "readlink /work/proj/shortcut; pstat a /work/proj/main.py"
                              "; python3 /work/proj/main.py") == \
            "pkg/deep/data.bin\n750\nhi\n"
        back = os.path.join(tmp, "back")
        r = run_cp(daemon, keys, f"{sid}:/work/proj", back)
        assert r.returncode == 0, r.stderr
        assert local_snapshot(back) == local_snapshot(src)
