"""OCI images under the microvm driver: the image's layers squashed once
into a read-only squashfs (cached as <state>/microvm-images/<digest>.sqfs,
built from a read-only overlay of the layers mounted on the host for the
time of mksquashfs), which becomes the guest's /dev/vda root under a tmpfs
overlay of `disk` bytes; the workload runs as the image's User
(sbx.uid/sbx.gid on the kernel command line), else as the sandbox user.

Own daemon with SANDBOXD_MICROVM_ACCEL=tcg (conftest.py sets it to off for
the suite's daemons unless microvm profiles are wanted), a real
docker-registry on loopback and images built from busybox-static rootfs
trees (imgworld.py).  Image sandboxes always boot cold (seconds under TCG),
so one daemon serves the module and the sessions are few: the first one is
shared by the first two tests.  The same assertions as
test_gvisor_images.py where they make sense: files, whiteouts and opaque
dirs, writes private, the disk limit on the upper, Env/WorkingDir/User,
the layers untouched; plus: the guest's own kernel, the image root built
once and reused, and nothing left after a delete or a daemon stop (QEMU,
relays, mounts).

Only 127.0.0.1 is ever contacted."""
import glob
import hashlib
import os
import re
import shutil
import tempfile

import pytest

import imgworld as w
from sbxtest import Daemon, build_dir, procs_with, wait_until

PROFILE = "microvm"
QEMU = "qemu-system-x86_64"
ENV = {"SANDBOXD_MICROVM_ACCEL": "tcg"}

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="microvm and images need root"),
    pytest.mark.skipif(shutil.which(QEMU) is None, reason=f"{QEMU} not installed"),
]


# ---- the host's view of a daemon's guests ------------------------------------

def mounts_under(path, pid="self"):
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return [l for l in f if path in l]
    except OSError:
        return []


def cgroup_marker(state_dir):
    """The microvm driver's cgroup parent for this state dir (microvm.c
    setup_cgroups: blake2b-64 of the state dir)."""
    h = hashlib.blake2b(state_dir.encode(), digest_size=8).hexdigest()
    return f"sandboxd-{h}-microvm"


def procs_in_cgroup(marker):
    """PIDs of live processes whose cgroup path contains marker: QEMU and
    the sbx-vm relay of every guest (the relay's cmdline names no path)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cgroup") as f:
                cg = f.read()
            with open(f"/proc/{p}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cg and state != b"Z":
            found.append(int(p))
    return found


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def guests(d, sid=None):
    """QEMU and relay processes of daemon d (of session sid if given)."""
    pids = set(procs_in_cgroup(cgroup_marker(d.state_dir)))
    pids |= {p for p in procs_with(d.state_dir) if d.proc is None or p != d.pid}
    out = {p: cmdline(p) for p in pids}
    if sid:
        out = {p: c for p, c in out.items() if sid in c or _in_cgroup(p, sid)}
    return out


def _in_cgroup(pid, name):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return name in f.read()
    except OSError:
        return False


def state_mounts(d):
    """Mounts under the state dir, as the test and (while it runs) the
    daemon see them."""
    m = mounts_under(d.state_dir)
    if d.alive():
        m += mounts_under(d.state_dir, d.pid)
    return m


def images_dir(d):
    return os.path.join(d.state_dir, "microvm-images")


def guest_release():
    """The release of the assets' kernel (build/microvm/vmlinuz is a link
    to …/vmlinuz-<release>), or None."""
    target = os.path.basename(os.path.realpath(os.path.join(build_dir(), "microvm", "vmlinuz")))
    return target[len("vmlinuz-"):] if target.startswith("vmlinuz-") else None


# ---- the daemon ---------------------------------------------------------------

def start_daemon(state_dir=None):
    d = Daemon(state_dir or tempfile.mkdtemp(prefix="sbx-mvi-"), env=ENV)
    d.start(timeout=120)  # the probe boots a guest under TCG
    return d


def stop_and_check(d):
    """SIGTERM; then no guest process, no mount under the state dir."""
    rc = d.stop(timeout=30)
    tail = d.log_tail(150)
    left = guests(d)
    mounts = mounts_under(d.state_dir)
    assert rc == 0, tail
    assert not left, f"processes outlived the daemon: {left}\n{tail}"
    assert not mounts, f"mounts outlived the daemon: {mounts}\n{tail}"
    assert not glob.glob(os.path.join(images_dir(d), "mnt-*")), tail


def require_profiles():
    return bool(os.environ.get("SANDBOXD_TEST_REQUIRE_PROFILES"))


def client_or_skip(d, name):
    c = d.client(d.create_key(name))
    p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}[PROFILE]
    if not p["available"]:
        if require_profiles():
            pytest.fail(f"profile {PROFILE} unavailable: {p['reason']} "
                        "(SANDBOXD_TEST_REQUIRE_PROFILES)")
        pytest.skip(f"microvm unavailable on this host: {p['reason']}")
    return c


# ---- images -----------------------------------------------------------------

def app_image(marker="one"):
    """As test_gvisor_images.py: a busybox rootfs with a world-writable
    /data, a file to delete, then a layer deleting it (whiteout) and making
    /opq opaque.  User 0 (imgworld's default): the sandbox user runs it."""
    lower = w.rootfs_entries({"hello.txt": f"hello {marker}\n", "gone.txt": "delete me\n",
                              "opq/old.txt": "lower\n", "etc/hostname": "image-host\n"})
    lower += [("data", "dir", None, 0o1777), ("opq", "dir")]
    upper = [(".wh.gone.txt", "file", ""), ("opq", "dir"), ("opq/.wh..wh..opq", "file", ""),
             ("opq/new.txt", "file", "upper\n")]
    return w.Image([lower, upper], config={"Env": ["PATH=/bin", "GREETING=hello"],
                                           "WorkingDir": "/data",
                                           "Entrypoint": ["/bin/sh", "-c"],
                                           "Cmd": ["echo from-cmd $GREETING"]})


def user_image():
    """User by name (app → 1234:1234 through the image's /etc/passwd), its
    own Env and a WorkingDir of its own.  Two layers: a one-layer image
    does not boot (test_single_layer_image)."""
    lower = w.rootfs_entries({"etc/group": "root:x:0:\napp:x:1234:\n"})
    lower = [e for e in lower if e[0] != "etc/passwd"]
    lower.append(("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"
                  "app:x:1234:1234:app:/home/app:/bin/sh\n"))
    upper = [("srv", "dir"), ("srv/app", "dir"), ("srv/app/marker", "file", "in the workdir\n")]
    return w.Image([lower, upper], config={"User": "app", "WorkingDir": "/srv/app",
                                    "Env": ["PATH=/bin", "FROM_IMAGE=set-by-the-image"]})


def file_sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- fixtures -----------------------------------------------------------------

@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = w.Registry(tmp_path_factory.mktemp("mvimgreg")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def mvd():
    d = start_daemon()
    yield d
    if d.alive():  # test_daemon_stop_leaves_nothing stops it itself
        stop_and_check(d)
    shutil.rmtree(d.state_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _log_on_failure(request, mvd):
    """conftest.py's report hook appends the log of the daemons it finds
    in _sbx_daemons to a failing test's report."""
    request.node._sbx_daemons = [mvd]


@pytest.fixture(scope="module")
def mv(mvd):
    return client_or_skip(mvd, "mvimg")


@pytest.fixture(scope="module")
def app_img():
    return app_image()


@pytest.fixture(scope="module")
def app(registry, app_img):
    return registry.push(app_img, "tests/mvapp:1")


@pytest.fixture(scope="module")
def first(mv, mvd, app, app_img):
    """The module's first session of the app image (it pulls the image and
    builds the root), and the state right after: the layers' digest, the
    root image's identity."""
    s = mv.new_session(PROFILE, image=app)
    layers = os.path.join(mvd.state_dir, "images", "layers")
    sqfs = os.path.join(images_dir(mvd), f"{app_img.digest}.sqfs")
    st = os.stat(sqfs) if os.path.exists(sqfs) else None
    info = {"id": s["id"], "session": s, "layers": layers, "layers_digest": w.tree_digest(layers),
            "sqfs": sqfs, "sqfs_stat": st, "sqfs_sha": file_sha(sqfs) if st else None}
    yield info
    if mvd.alive():
        mv.delete(f"/v1/sandbox/sessions/{s['id']}")


@pytest.fixture(scope="module")
def user_ses(mv, mvd, registry):
    ref = registry.push(user_image(), "tests/mvuser:1")
    s = mv.new_session(PROFILE, image=ref)
    yield s
    if mvd.alive():
        mv.delete(f"/v1/sandbox/sessions/{s['id']}")


def sh(c, sid, script, **kw):
    return c.exec(sid, command=["/bin/sh", "-c", script], **kw)


# ---- tests --------------------------------------------------------------------

def test_image_root_in_the_guest(mv, mvd, app, first):
    """(1) the image's files, whiteouts and opaque dirs; the guest's kernel."""
    sid = first["id"]
    assert first["session"]["image"] == app and first["session"]["runtime"] == "microvm"
    r = sh(mv, sid, "cat /hello.txt; cat /etc/passwd; ls /gone.txt 2>&1; ls /opq; id -u; id -g")
    assert r["exit_code"] == 0, r
    out = r["stdout"]
    assert out.startswith("hello one\nroot:x:0:0:root:/root:/bin/sh\n"), r
    assert "No such file" in out, r                       # the whiteout
    assert "new.txt" in out and "old.txt" not in out, r   # the opaque dir
    assert out.endswith("1000\n1000\n"), r                # User 0 → the sandbox user
    # the guest's own kernel, not the host's
    r = sh(mv, sid, "uname -r; cat /proc/version")
    rel = r["stdout"].splitlines()[0]
    assert re.fullmatch(r"6\.1\.\d+-\d+-cloud-amd64", rel), r
    if guest_release():
        assert rel == guest_release(), r
    assert rel != os.uname().release and os.uname().release not in r["stdout"], r
    # the image as the root, under the guest's tmpfs overlay; /tmp and /work
    r = sh(mv, sid, "grep -E ' / | /tmp | /work ' /proc/mounts; stat -c '%u %a' /work /tmp")
    assert "sbx-root / overlay" in r["stdout"] and "lowerdir=/newroot/.lower" in r["stdout"], r
    assert r["stdout"].endswith("1000 755\n0 1777\n"), r
    # the files API reads the image tree
    base = f"/v1/sandbox/sessions/{sid}/files"
    assert mv.get(base, params={"path": "/hello.txt"}).content == b"hello one\n"
    # on the host: this guest's QEMU boots the image's root, read-only
    q = [c for c in guests(mvd, sid).values() if QEMU in c]
    assert len(q) == 1, guests(mvd)
    assert f"file={first['sqfs']},if=none,id=root,format=raw,readonly=on" in q[0], q
    assert any("sbx-vm relay" in c for c in guests(mvd, sid).values()), guests(mvd, sid)


def test_writes_private_root_built_once_layers_untouched(mv, mvd, app, first):
    """(2) writes land in the guest's tmpfs upper, private to the session;
    the second session reuses the cached root image; the layers and that
    image never change."""
    a = first["id"]
    r = sh(mv, a, "echo secret-a > /data/mine.txt && mkdir /data/d && cat /data/mine.txt && "
                  "echo more >> /data/d/f && df -k / | tail -1")
    assert r["exit_code"] == 0 and r["stdout"].startswith("secret-a\n"), r
    # the root's free space is the upper's: a tmpfs of `disk` (256Mi by default)
    assert r["stdout"].splitlines()[1].split()[:2] == ["sbx-root", "262144"], r
    b = mv.new_session(PROFILE, image=app)["id"]
    try:
        r = sh(mv, b, "ls /data; cat /hello.txt")
        assert r["stdout"] == "hello one\n", r
        # and a's writes are still a's
        assert sh(mv, a, "cat /data/mine.txt")["stdout"] == "secret-a\n"
    finally:
        assert mv.delete(f"/v1/sandbox/sessions/{b}").status_code == 204
    # one root image for the image, built once: the second session's boot
    # reused it, unchanged
    sq = first["sqfs"]
    assert first["sqfs_stat"] is not None, os.listdir(images_dir(mvd))
    assert sorted(os.listdir(images_dir(mvd))) == [os.path.basename(sq)]
    st = os.stat(sq)
    assert (st.st_ino, st.st_mtime_ns, st.st_size) == \
        (first["sqfs_stat"].st_ino, first["sqfs_stat"].st_mtime_ns, first["sqfs_stat"].st_size)
    assert file_sha(sq) == first["sqfs_sha"]
    with open(mvd.log_path) as f:
        built = [l for l in f if "image root" in l and "built in" in l]
    assert len(built) == 1 and os.path.basename(sq) in built[0], built
    # the layers on the host never saw any of it
    assert w.tree_digest(first["layers"]) == first["layers_digest"]
    for root, _, files in os.walk(first["layers"]):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    assert b"secret-a" not in fh.read(), p
    with open(sq, "rb") as fh:
        assert b"secret-a" not in fh.read()
    assert mv.delete(f"/v1/sandbox/sessions/{a}").status_code == 204


def test_image_env_workdir_user(mv, user_ses):
    """(3) the image's User (by name, through its /etc/passwd), Env and
    WorkingDir."""
    r = mv.exec(user_ses["id"], command=["/bin/sh", "-c",
                                         "id -u; id -g; echo $FROM_IMAGE; pwd; cat marker"])
    assert r["exit_code"] == 0, r
    assert r["stdout"] == "1234\n1234\nset-by-the-image\n/srv/app\nin the workdir\n", r


def test_work_belongs_to_the_image_user(mv, user_ses):
    r = mv.exec(user_ses["id"], command=["/bin/sh", "-c",
                                         "stat -c %u /work; echo x > /work/f && stat -c %u /work/f"])
    assert r["stdout"] == "1234\n1234\n", r


def test_single_layer_image(mv, mvd, registry):
    ref = registry.push(w.Image([w.rootfs_entries({"hello.txt": "single\n"})]), "tests/mvone:1")
    r = mv.post("/v1/sandbox/sessions", json={"profile": PROFILE, "image": ref})
    try:
        assert r.status_code == 201, r.text
    finally:
        # a failed build leaves no overlay, no mnt-* dir, no partial image
        assert state_mounts(mvd) == []
        assert not glob.glob(os.path.join(images_dir(mvd), "mnt-*"))
        assert not glob.glob(os.path.join(images_dir(mvd), "*.tmp"))
    sid = r.json()["id"]
    try:
        assert sh(mv, sid, "cat /hello.txt")["stdout"] == "single\n"
    finally:
        mv.delete(f"/v1/sandbox/sessions/{sid}")


def test_delete_leaves_nothing(mv, mvd, user_ses):
    """(5a) a deleted session's QEMU and relay are gone, its dir too, and no
    mount is left under the state dir (the image builds' mnt-* dirs)."""
    sid = user_ses["id"]
    live = guests(mvd, sid)
    assert any(QEMU in c for c in live.values()), live
    assert any("sbx-vm relay" in c for c in live.values()), live
    assert mv.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    assert guests(mvd, sid) == {}
    assert not os.path.exists(os.path.join(mvd.state_dir, "microvm", sid))
    assert state_mounts(mvd) == []
    assert not glob.glob(os.path.join(images_dir(mvd), "mnt-*"))
    assert not glob.glob(os.path.join(images_dir(mvd), "*.tmp"))


def test_disk_limit_holds_on_the_root(mv, mvd, app):
    """(4) more than `disk` into / (the overlay's upper): ENOSPC inside,
    the session and the daemon live on."""
    sid = mv.new_session(PROFILE, image=app, limits={"disk": "8Mi"})["id"]
    try:
        r = sh(mv, sid, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?; "
                        "ls -l /data/big")
        assert "rc=0" not in r["stdout"], r
        assert "No space left" in r["stdout"], r
        size = int(r["stdout"].split()[-5])
        assert 0 < size <= 8 << 20, r
        assert mvd.healthy()
        assert mv.get(f"/v1/sandbox/sessions/{sid}").json()["status"] == "ready"
        assert sh(mv, sid, "rm /data/big && echo fine")["stdout"] == "fine\n"
    finally:
        assert mv.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    assert mvd.healthy()
    # every session of the module is gone by now: so are all guests
    assert guests(mvd) == {}, guests(mvd)
    assert state_mounts(mvd) == []


def test_daemon_stop_leaves_nothing(mv, mvd, app):
    """(5b) a daemon stopped with an image session running leaves no QEMU,
    no relay and no mount behind.  Stops the module's daemon: keep last."""
    sid = mv.new_session(PROFILE, image=app)["id"]
    assert sh(mv, sid, "echo x > /data/x && cat /hello.txt")["stdout"] == "hello one\n"
    live = guests(mvd, sid)
    assert any(QEMU in c for c in live.values()) and \
        any("sbx-vm relay" in c for c in live.values()), live
    stop_and_check(mvd)
    wait_until(lambda: not any(os.path.exists(f"/proc/{p}") and cmdline(p) for p in live), 5,
               what="the session's guest processes gone")
