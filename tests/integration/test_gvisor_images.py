"""OCI images under the gvisor driver (issue 7 item 4): the image's layers
as read-only lowers of an overlayfs the daemon mounts at the bundle's
rootfs, the upper on a tmpfs of `disk` bytes, served to gVisor by runsc's
gofer (docs/gvisor.md "Images").

Own daemons with the real runsc (conftest.py hides runsc from the suite's
daemons unless SANDBOXD_TEST_PROFILES names gvisor), a real docker-registry
on loopback and images built from busybox-static rootfs trees
(imgworld.py).  The same assertions as test_image_sessions.py where they
make sense: files, whiteouts and opaque dirs, writes private and gone with
the sandbox, the disk limit on the upper, Env/WorkingDir/User, the layers
untouched, plus: gVisor's kernel is what the code sees, and nothing is left
after a delete, a daemon stop or a kill -9 (mounts, runsc, bundles).

Only 127.0.0.1 is ever contacted."""
import glob
import os
import shutil
import tempfile

import pytest

import imgworld as w
from conftest import REAL_RUNSC
from sbxtest import Daemon, procs_with, wait_until

PROFILE = "gvisor"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="gvisor and images need root"),
    pytest.mark.skipif(shutil.which(REAL_RUNSC) is None and not os.access(REAL_RUNSC, os.X_OK),
                       reason=f"runsc unavailable ({REAL_RUNSC} not found)"),
]


# ---- daemons (as test_gvisor.py: the real runsc, whatever the run hides) ----

def start_daemon(extra_env=None, state_dir=None, daemon=None):
    d = daemon or Daemon(state_dir or tempfile.mkdtemp(prefix="sbx-gvi-"))
    saved = dict(os.environ)
    os.environ["SANDBOXD_RUNSC"] = REAL_RUNSC
    os.environ.update(extra_env or {})
    try:
        d.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return d


def stop_daemon(d):
    rc = d.stop(timeout=30)
    left = procs_with(d.state_dir)
    mounts = mounts_under(d.state_dir)
    tail = d.log_tail(150)
    shutil.rmtree(d.state_dir, ignore_errors=True)
    assert rc == 0, tail
    assert not left, f"processes outlived the daemon: {left}"
    assert not mounts, f"mounts outlived the daemon: {mounts}"


def mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if path in l]


def client_or_skip(d, name):
    c = d.client(d.create_key(name))
    p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}[PROFILE]
    if not p["available"]:
        pytest.skip(f"gvisor unavailable on this host: {p['reason']}")
    return c


# ---- images -----------------------------------------------------------------

def app_image(marker="one"):
    """As test_image_sessions.py: a busybox rootfs with a world-writable
    /data, a file owned by 1234, a setuid-root busybox as /sbin/id (the store
    drops the bit), files
    to delete; then a layer deleting one (whiteout) and making /opq
    opaque; /etc/resolv.conf a dangling symlink (systemd style)."""
    with open(w.BUSYBOX, "rb") as f:
        bb = f.read()
    lower = w.rootfs_entries({"hello.txt": f"hello {marker}\n", "gone.txt": "delete me\n",
                              "opq/old.txt": "lower\n", "etc/hostname": "image-host\n"})
    lower += [("data", "dir", None, 0o1777), ("opq", "dir"), ("sbin", "dir"),
              ("sbin/id", "file", bb, 0o4755),
              ("etc/resolv.conf", "symlink", "../run/systemd/resolve/stub-resolv.conf")]
    upper = [(".wh.gone.txt", "file", ""), ("opq", "dir"), ("opq/.wh..wh..opq", "file", ""),
             ("opq/new.txt", "file", "upper\n")]
    return w.Image([lower, upper], config={"Env": ["PATH=/bin", "GREETING=hello"],
                                           "WorkingDir": "/data",
                                           "Entrypoint": ["/bin/sh", "-c"],
                                           "Cmd": ["echo from-cmd $GREETING; dmesg | head -1"]})


tree_digest = w.tree_digest


# ---- fixtures -----------------------------------------------------------------

@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = w.Registry(tmp_path_factory.mktemp("gvimgreg")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def gvd():
    # no pool: every session is cold and named by its id (test_pool_*
    # checks that images never take a pooled sandbox)
    d = start_daemon({"SANDBOXD_GVISOR_POOL_SIZE": "0"})
    yield d
    stop_daemon(d)


@pytest.fixture(scope="module")
def gv(gvd):
    return client_or_skip(gvd, "gvimg")


@pytest.fixture(scope="module")
def app(registry):
    return registry.push(app_image(), "tests/gvapp:1")


@pytest.fixture(scope="module")
def layers_dir(gvd, gv, app):
    # pulled once (first session); the store's layer dirs
    s = gv.new_session(PROFILE, image=app)
    gv.delete(f"/v1/sandbox/sessions/{s['id']}")
    return os.path.join(gvd.state_dir, "images", "layers")


def sh(c, sid, script, **kw):
    return c.exec(sid, command=["/bin/sh", "-c", script], **kw)


# ---- tests --------------------------------------------------------------------

def test_profile_lists_images(gv):
    ps = {x["name"]: x for x in gv.get("/v1/sandbox/profiles").json()["profiles"]}
    for name in ("gvisor", "gvisor-small"):
        assert "images" in ps[name]["capabilities"], ps[name]


def test_session_on_an_image(gv, gvd, app):
    s = gv.new_session(PROFILE, image=app)
    sid = s["id"]
    try:
        assert s["image"] == app
        r = sh(gv, sid, "cat /hello.txt; echo $GREETING; pwd; cat /etc/passwd; id -u; id -g")
        assert r["exit_code"] == 0, r
        out = r["stdout"]
        assert "hello one" in out and "hello\n" in out
        assert "/data\n" in out                          # WorkingDir
        assert "root:x:0:0:root:/root:/bin/sh" in out    # the image's own /etc
        assert out.endswith("1000\n1000\n"), out         # image User 0 → the sandbox user
        # gVisor's kernel, not the host's
        r = sh(gv, sid, "dmesg | head -3; uname -r")
        assert "Starting gVisor" in r["stdout"], r
        assert os.uname().release not in r["stdout"]
        # whiteout and opaque directory
        r = sh(gv, sid, "ls /gone.txt 2>&1; ls /opq")
        assert "No such file" in r["stdout"] and "new.txt" in r["stdout"], r
        assert "old.txt" not in r["stdout"]
        # image files keep the image's owners; root's are read-only to us
        r = sh(gv, sid, "stat -c '%u %g %a' /hello.txt /data /; echo x >> /hello.txt; "
                        "echo rc=$?; touch /new-in-root; echo rc=$?")
        assert r["stdout"].startswith("0 0 644\n0 0 1777\n0 0 755\n"), r
        assert "rc=0" not in r["stdout"], r
        # the sandbox's own hosts, resolv.conf (over a dangling symlink) and
        # hostname, bound read-only over the image's
        r = sh(gv, sid, "cat /etc/hosts /etc/resolv.conf /etc/hostname; hostname; "
                        "echo x > /etc/hosts || echo ro")
        assert "localhost sandbox" in r["stdout"] and "no network" in r["stdout"], r
        assert "image-host" not in r["stdout"] and r["stdout"].count("sandbox\n") >= 2, r
        assert r["stdout"].endswith("ro\n"), r
        # /tmp and /work are tmpfs as on the host pack; /work is ours
        r = sh(gv, sid, "echo a > /tmp/a && echo b > /work/b && stat -c '%u %a' /work /tmp")
        assert r["exit_code"] == 0 and r["stdout"] == "1000 755\n0 1777\n", r
        # the files API sees the image tree (fd-in through sbx-init)
        base = f"/v1/sandbox/sessions/{sid}/files"
        assert gv.get(base, params={"path": "/hello.txt"}).content == b"hello one\n"
        r = gv.put(base, params={"path": "/data/up.txt"}, data=b"uploaded")
        assert r.status_code in (200, 201), r.text
        assert sh(gv, sid, "cat /data/up.txt")["stdout"] == "uploaded"
        # the root on the host is the overlay, at the session's bundle
        bundle = os.path.join(gvd.state_dir, "gvisor", sid)
        m = [l for l in mounts_under(bundle) if " overlay " in l]
        assert len(m) == 1 and "sbxgv-image" in m[0] and "nosuid" in m[0], m
    finally:
        gv.delete(f"/v1/sandbox/sessions/{sid}")


def test_setuid_is_inert(gv, app):
    s = gv.new_session(PROFILE, image=app)
    try:
        r = gv.exec(s["id"], command=["/sbin/id", "-u"])
        assert r["stdout"] == "1000\n", r
        # the store drops the bit when it unpacks (image/unpack.c); gVisor
        # has no_new_privs on top
        r = gv.exec(s["id"], command=["/bin/sh", "-c", "stat -c %a /sbin/id"])
        assert r["stdout"] == "755\n", r
    finally:
        gv.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_writes_are_private_and_vanish(gv, gvd, app, layers_dir):
    before = tree_digest(layers_dir)
    a = gv.new_session(PROFILE, image=app)["id"]
    b = gv.new_session(PROFILE, image=app)["id"]
    try:
        r = sh(gv, a, "echo secret-a > /data/mine.txt && cat /data/mine.txt && "
                      "mkdir /data/d && echo ok")
        assert r["stdout"].startswith("secret-a\n") and r["stdout"].endswith("ok\n"), r
        assert "mine.txt" not in sh(gv, b, "ls /data")["stdout"]
    finally:
        gv.delete(f"/v1/sandbox/sessions/{a}")
        gv.delete(f"/v1/sandbox/sessions/{b}")
    c = gv.new_session(PROFILE, image=app)["id"]
    try:
        assert "mine.txt" not in sh(gv, c, "ls /data")["stdout"]
    finally:
        gv.delete(f"/v1/sandbox/sessions/{c}")
    # the layers on the host never saw any of it
    assert tree_digest(layers_dir) == before
    for root, _, files in os.walk(layers_dir):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    assert b"secret-a" not in fh.read(), p


def test_disk_limit_holds_on_the_upper(gv, app):
    s = gv.new_session(PROFILE, image=app, limits={"disk": "8Mi"})
    sid = s["id"]
    try:
        r = sh(gv, sid, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?; "
                        "ls -l /data/big")
        assert "rc=0" not in r["stdout"], r
        assert "No space left" in r["stdout"], r
        size = int(r["stdout"].split()[-5])
        assert size <= 8 << 20, r
        # the sandbox lives on
        assert sh(gv, sid, "rm /data/big && echo fine")["stdout"] == "fine\n"
    finally:
        gv.delete(f"/v1/sandbox/sessions/{sid}")


def test_sessions_share_the_layers(gv, gvd, app, layers_dir):
    images = os.path.join(gvd.state_dir, "images")
    du = lambda: sum(os.lstat(os.path.join(r, f)).st_blocks
                     for r, _, fs in os.walk(images) for f in fs)
    before, blocks = tree_digest(layers_dir), du()
    ids = []
    try:
        for _ in range(4):
            ids.append(gv.new_session(PROFILE, image=app)["id"])
        for sid in ids:
            assert sh(gv, sid, "cat /hello.txt")["stdout"] == "hello one\n"
        assert du() == blocks, "sessions copied the image"
    finally:
        for sid in ids:
            gv.delete(f"/v1/sandbox/sessions/{sid}")
    assert tree_digest(layers_dir) == before


@pytest.mark.parametrize("user,want", [("app", "1234 1234"), ("4242:4343", "4242 4343"),
                                       ("app:staff", "1234 50"), ("root", "1000 1000"),
                                       ("", "1000 1000")])
def test_image_user(gv, registry, user, want):
    lower = w.rootfs_entries({"etc/group": "root:x:0:\nstaff:x:50:\napp:x:1234:\n"})
    lower = [e for e in lower if e[0] != "etc/passwd"]
    lower.append(("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"
                  "app:x:1234:1234:app:/home/app:/bin/sh\n"))
    img = w.Image([lower], config={"User": user})
    ref = registry.push(img, f"tests/gvuser:{abs(hash(user)) % 10**8}")
    s = gv.new_session(PROFILE, image=ref)
    try:
        r = gv.exec(s["id"], command=["/bin/busybox", "sh", "-c", "echo $(id -u) $(id -g)"])
        assert r["stdout"].strip() == want, r
        # /work belongs to that user; it can write there
        r = gv.exec(s["id"], command=["/bin/busybox", "sh", "-c",
                                      "echo x > /work/f && stat -c %u /work/f"])
        assert r["stdout"].strip() == want.split()[0], r
    finally:
        gv.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_execution_runs_the_image_entrypoint(gv, app):
    e = gv.new_execution(PROFILE, image=app)
    f = gv.wait_execution(e["id"], timeout=90)
    assert f["status"] == "succeeded", f
    assert f["stdout"].startswith("from-cmd hello\n") and "gVisor" in f["stdout"], f


def cgroup_dirs(sid):
    return glob.glob(f"/sys/fs/cgroup/*/**/{sid}", recursive=True)


def test_delete_leaves_nothing(gv, gvd, app):
    s = gv.new_session(PROFILE, image=app)
    sid = s["id"]
    assert sh(gv, sid, "echo x > /data/x")["exit_code"] == 0
    bundle = os.path.join(gvd.state_dir, "gvisor", sid)
    assert os.path.isdir(bundle) and mounts_under(bundle)
    assert procs_with(sid), "runsc carries the id in its cmdline"
    assert gv.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    assert procs_with(sid) == []
    assert mounts_under(bundle) == []
    assert not os.path.exists(bundle)
    assert cgroup_dirs(sid) == []
    assert not glob.glob(os.path.join(gvd.state_dir, "gvisor-runsc", sid + "*"))


def test_bad_image_root_fails_closed(gv, gvd, registry):
    """An image whose /work is a symlink cannot get its mount point: 4xx/5xx
    with the reason, and nothing of the attempt is left."""
    ents = w.rootfs_entries() + [("work", "symlink", "/etc")]
    ref = registry.push(w.Image([ents]), "tests/gvbadwork:1")
    before = set(os.listdir(os.path.join(gvd.state_dir, "gvisor")))
    r = gv.post("/v1/sandbox/sessions", json={"profile": PROFILE, "image": ref})
    assert r.status_code in (400, 503), r.text
    assert "work" in r.json()["error"]["message"], r.text
    assert set(os.listdir(os.path.join(gvd.state_dir, "gvisor"))) == before
    assert mounts_under(os.path.join(gvd.state_dir, "gvisor")) == []


def test_pool_is_never_handed_out_for_an_image(registry):
    d = start_daemon({"SANDBOXD_GVISOR_POOL_SIZE": "1"})
    gvdir = os.path.join(d.state_dir, "gvisor")
    pooled = lambda: sorted(x for x in os.listdir(gvdir) if x.startswith("gvp_"))
    try:
        c = client_or_skip(d, "gvipool")
        ref = registry.push(app_image("pool"), "tests/gvpool:1")
        wait_until(lambda: len(pooled()) >= 2, 60, what="pool filled")
        idle = pooled()
        s = c.new_session(PROFILE, image=ref)
        sid = s["id"]
        try:
            r = sh(c, sid, "cat /hello.txt; ls /usr 2>&1 | head -1")
            assert r["stdout"].startswith("hello pool\n"), r
            # a cold sandbox of its own, named by the session; the idle
            # host-pack entries are all still there, untouched
            assert os.path.isdir(os.path.join(gvdir, sid))
            assert mounts_under(os.path.join(gvdir, sid))
            assert set(idle) <= set(pooled()), (idle, pooled())
            # and a host-pack session still gets the pool
            h = c.new_session(PROFILE)
            try:
                assert not os.path.exists(os.path.join(gvdir, h["id"]))
                # (coreutils' statx is EINVAL under this gVisor: cat and test)
                r = sh(c, h["id"], "cat /hello.txt 2>&1; test -d /usr/bin && echo host-usr")
                assert "No such file" in r["stdout"] and "host-usr" in r["stdout"], r
            finally:
                c.delete(f"/v1/sandbox/sessions/{h['id']}")
        finally:
            c.delete(f"/v1/sandbox/sessions/{sid}")
        assert mounts_under(os.path.join(gvdir, sid)) == []
    finally:
        stop_daemon(d)


@pytest.mark.slow
def test_restart_after_kill9_unmounts_and_removes(registry):
    d = start_daemon({"SANDBOXD_GVISOR_POOL_SIZE": "0"})
    try:
        c = client_or_skip(d, "gvirec")
        ref = registry.push(app_image("rec"), "tests/gvrec:1")
        sid = c.new_session(PROFILE, image=ref)["id"]
        assert sh(c, sid, "echo x > /data/x && cat /hello.txt")["stdout"] == "hello rec\n"
        bundle = os.path.join(d.state_dir, "gvisor", sid)
        d.kill9()
        assert os.path.isdir(bundle) and mounts_under(bundle)
        start_daemon({"SANDBOXD_GVISOR_POOL_SIZE": "0"}, daemon=d)
        wait_until(lambda: procs_with(sid) == [], 20, what="runsc of the old session gone")
        assert mounts_under(bundle) == []
        assert not os.path.exists(bundle)
        assert cgroup_dirs(sid) == []
        # and the daemon runs images as before
        c = d.client(d.create_key("gvirec2"))
        s = c.new_session(PROFILE, image=ref)
        try:
            assert sh(c, s["id"], "cat /hello.txt")["stdout"] == "hello rec\n"
        finally:
            c.delete(f"/v1/sandbox/sessions/{s['id']}")
    finally:
        stop_daemon(d)
