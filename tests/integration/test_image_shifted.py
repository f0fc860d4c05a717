"""Image sessions where the layers are not idmapped (docs/images.md
"Hosts that cannot idmap layers"): image_layer_idmap = off forces what
kernels before 5.19 and filesystems without idmapping get, shifted copies
of each layer (isolation/shift.c), so it is tested on this machine's kernel
too.

Through the daemon's API, with images from a real docker-registry on
loopback (imgworld.py): inside the sandbox, root's files are root's, a
non-root image uid keeps its uid, the image's User runs as it, modes hold;
writes land in the upper, never in the shared copy; the copy is made once
(the next session reuses it, nothing more on disk), and the image GC
removes it with its layer (never while a session uses it).  The gvisor
image root, whose gofer serves the host's ids as they are, needs no copy:
with the switch on, gvisor sessions see the same owners and the store gets
no copies (skipped when runsc cannot run here).

Only 127.0.0.1 is ever contacted."""
import os
import shutil
import time

import pytest

import imgworld as w
from conftest import REAL_RUNSC
from sbxtest import Daemon, reap_leftovers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="images need root")

OFF = {"SANDBOXD_IMAGE_LAYER_IDMAP": "off"}
# Uid blocks of its own (past the default 1024), so that other daemons on
# the host taking and freeing blocks cannot change which block the next
# session gets: the copies are per block.
OWN_BLOCKS = {"SANDBOXD_UID_BASE": str(200000 + 1088 * 65536), "SANDBOXD_UID_SLOTS": "64"}


def shift_image(marker="one"):
    """A rootfs with files of root (0644, 0755), of image uid 1234 (0640, a
    dir 0700), a hard link pair, a symlink; the User is app (1234); then a
    layer with a whiteout and an opaque dir."""
    lower = w.rootfs_entries({"hello.txt": f"hello {marker}\n", "gone.txt": "delete me\n",
                              "opq/old.txt": "lower\n",
                              "etc/group": "root:x:0:\napp:x:1234:\n"})
    lower = [e for e in lower if e[0] != "etc/passwd"]
    lower += [("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"
               "app:x:1234:1234:app:/home/app:/bin/sh\n"),
              ("data", "dir", None, 0o1777), ("opq", "dir"),
              ("tool", "file", "#!/bin/sh\necho tool\n", 0o755),
              ("home", "dir"), ("home/app", "dir", None, 0o700, (1234, 1234)),
              ("home/app/notes", "file", "app's\n", 0o640, (1234, 1234)),
              ("home/app/link", "hardlink", "home/app/notes"),
              ("home/app/sym", "symlink", "notes")]
    upper = [(".wh.gone.txt", "file", ""), ("opq", "dir"), ("opq/.wh..wh..opq", "file", ""),
             ("opq/new.txt", "file", "upper\n")]
    return w.Image([lower, upper], config={"Env": ["PATH=/bin"], "User": "app",
                                           "WorkingDir": "/home/app"})


def copies(state_dir):
    """The store's shifted copies: {name: stat of its tree}; each in a dir
    of root's that the range's host uids cannot enter."""
    d = os.path.join(state_dir, "images", "layers", "sha256")
    out = {}
    for n in os.listdir(d):
        if "@" in n and n[0] != ".":
            st = os.lstat(os.path.join(d, n))
            assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o700), n
            out[n] = os.lstat(os.path.join(d, n, "tree"))
    return out


def du_blocks(path):
    seen, n = set(), 0
    for r, ds, fs in os.walk(path):
        for f in ds + fs:
            st = os.lstat(os.path.join(r, f))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                n += st.st_blocks
    return n


def sh(c, sid, script):
    return c.exec(sid, command=["/bin/sh", "-c", script])


registry = w.registry_fixture("shiftreg")


@pytest.fixture(scope="module")
def shd(tmp_path_factory):
    """The daemon that forces shifted copies, on uid blocks of its own."""
    d = Daemon(tmp_path_factory.mktemp("shiftstate"), env=dict(OFF, **OWN_BLOCKS))
    d.start()
    yield d
    rc = d.stop(timeout=15)
    assert not reap_leftovers(d.state_dir) and rc == 0, d.log_tail(100)


@pytest.fixture(scope="module")
def cl(shd):
    return shd.client(shd.create_key("shift-tenant"))


def test_owners_user_and_modes_over_shifted_copies(cl, shd, registry):
    ref = registry.push(shift_image(), "tests/shift:1")
    assert copies(shd.state_dir) == {}
    t0 = time.monotonic()
    sid = cl.new_session("container", image=ref)["id"]
    first_ms = (time.monotonic() - t0) * 1000
    try:
        r = sh(cl, sid, "stat -c '%n %u %g %a' /hello.txt /tool /data /home/app "
                        "/home/app/notes /home/app/link; id -u; id -g; pwd; "
                        "cat /home/app/sym; /tool; ls /gone.txt 2>&1; ls /opq")
        assert r["exit_code"] == 0, r
        out = r["stdout"].splitlines()
        assert out[:6] == ["/hello.txt 0 0 644", "/tool 0 0 755", "/data 0 0 1777",
                           "/home/app 1234 1234 700", "/home/app/notes 1234 1234 640",
                           "/home/app/link 1234 1234 640"], out
        assert out[6:10] == ["1234", "1234", "/home/app", "app's"], out  # the image's User
        assert out[10] == "tool" and "No such file" in out[11] and out[12:] == ["new.txt"], out
        r = sh(cl, sid, "stat -c %i /home/app/notes /home/app/link | uniq | wc -l; "
                        "echo x >> /hello.txt 2>/dev/null || echo refused")
        assert r["stdout"] == "1\nrefused\n", r   # one inode; root's file not ours
        # on the host: one copy per layer, owned by the session's uid range
        cs = copies(shd.state_dir)
        assert len(cs) == 2, cs
        bases = {n.split("@")[1] for n in cs}
        assert len(bases) == 1, cs
        base = int(bases.pop())
        assert base >= 65536 and all(st.st_uid == base for st in cs.values()), cs
        lower = next(n for n in cs
                     if os.path.exists(os.path.join(shd.state_dir, "images", "layers",
                                                    "sha256", n, "tree/home")))
        notes = os.path.join(shd.state_dir, "images", "layers", "sha256", lower,
                             "tree/home/app/notes")
        assert (os.lstat(notes).st_uid, os.lstat(notes).st_gid) == (base + 1234, base + 1234)
        orig = os.path.join(shd.state_dir, "images", "layers", "sha256", lower.split("@")[0],
                            "home/app/notes")
        assert os.lstat(orig).st_uid == 1234  # the layer itself keeps the image's ids
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")
    print(f"first session (pull + unpack + shift) {first_ms:.0f} ms")


def test_writes_go_to_the_upper_not_the_shared_copy(cl, shd, registry):
    ref = registry.push(shift_image("w"), "tests/shift:w")
    sid = cl.new_session("container", image=ref)["id"]
    layers = os.path.join(shd.state_dir, "images", "layers")
    before = w.tree_digest(layers)
    try:
        # app owns its files: it may change them, in its own upper only
        r = sh(cl, sid, "echo changed > /home/app/notes && cat /home/app/notes && "
                        "echo secret-w > /data/new && rm /home/app/sym && echo ok")
        assert r["stdout"] == "changed\nok\n", r
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")
    assert w.tree_digest(layers) == before
    sid = cl.new_session("container", image=ref)["id"]
    try:
        r = sh(cl, sid, "cat /home/app/notes; ls /data; cat /home/app/sym")
        assert r["stdout"] == "app's\napp's\n", r
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_next_sessions_reuse_the_copy(cl, shd, registry):
    ref = registry.push(shift_image("reuse"), "tests/shift:reuse")
    sid = cl.new_session("container", image=ref)["id"]
    cl.delete(f"/v1/sandbox/sessions/{sid}")
    images = os.path.join(shd.state_dir, "images")
    before, blocks = copies(shd.state_dir), du_blocks(images)
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        sid = cl.new_session("container", image=ref)["id"]
        times.append((time.monotonic() - t0) * 1000)
        try:
            assert sh(cl, sid, "cat /hello.txt")["stdout"] == "hello reuse\n"
        finally:
            cl.delete(f"/v1/sandbox/sessions/{sid}")
    after = copies(shd.state_dir)
    assert after.keys() == before.keys()
    assert all(after[n].st_ino == before[n].st_ino for n in after), "a copy was rebuilt"
    assert du_blocks(images) == blocks, "sessions copied the image again"
    with open(shd.log_path) as f:
        log = f.read()
    assert log.count("image layers are not idmapped") == 1, "logged once per daemon"
    print("next sessions: " + ", ".join(f"{t:.0f} ms" for t in times))


def test_gc_removes_copies_with_their_layer(cl, shd, registry):
    admin = shd.client(shd.create_key("shift-admin", admin=True))
    ref = registry.push(shift_image("gc"), "tests/shift-gc:1")
    had = set(copies(shd.state_dir))
    sid = cl.new_session("container", image=ref)["id"]
    # its lower layer is its own; the upper is the same blob as the other
    # images' (kept with them)
    mine = set(copies(shd.state_dir)) - had
    assert len(mine) == 1, mine
    try:
        assert admin.delete(f"/v1/sandbox/images/{ref}").status_code == 204
        r = admin.post("/v1/sandbox/images/gc")
        assert r.status_code == 200 and r.json()["layers_in_use"] >= 1, r.text
        assert mine <= set(copies(shd.state_dir)), "a copy in use was removed"
        assert sh(cl, sid, "cat /hello.txt")["stdout"] == "hello gc\n"
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")
    r = admin.post("/v1/sandbox/images/gc")
    assert r.status_code == 200 and r.json()["layers_removed"] >= 1, r.text
    assert not mine & set(copies(shd.state_dir))
    assert had <= set(copies(shd.state_dir)), "a copy of a layer other images use was removed"
    d = os.path.join(shd.state_dir, "images", "layers", "sha256")
    hexes = {n.split("@")[0] for n in mine}
    assert not [n for n in os.listdir(d) if n.lstrip(".").split("@")[0] in hexes]


def test_idmapped_by_default_no_copies(registry, daemon_factory):
    """Without the switch, on a kernel that idmaps (5.19+), no copy is made."""
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) < (5, 19):
        pytest.skip("this kernel cannot idmap overlay layers")
    ref = registry.push(shift_image("idmap"), "tests/shift:idmap")
    d = daemon_factory(env={"SANDBOXD_IMAGE_LAYER_IDMAP": "auto"})
    d.start()
    c = d.client(d.create_key("idmap"))
    times = []
    for _ in range(4):
        t0 = time.monotonic()
        sid = c.new_session("container", image=ref)["id"]
        times.append((time.monotonic() - t0) * 1000)
        try:
            r = sh(c, sid, "stat -c '%u %g' /hello.txt /home/app/notes; id -u")
            assert r["stdout"] == "0 0\n1234 1234\n1234\n", r
            assert copies(d.state_dir) == {}
        finally:
            c.delete(f"/v1/sandbox/sessions/{sid}")
    print("idmapped sessions (first pulls): " + ", ".join(f"{t:.0f} ms" for t in times))


def test_bad_setting_is_refused(daemon_factory):
    d = daemon_factory(env={"SANDBOXD_IMAGE_LAYER_IDMAP": "sometimes"})
    with pytest.raises(RuntimeError) as e:
        d.start(timeout=30)
    assert "image_layer_idmap: auto or off" in str(e.value) + d.log_tail(20)


# ---- gvisor: its image root needs no copy -----------------------------------

def test_gvisor_image_root_with_the_switch(registry, tmp_path):
    if shutil.which(REAL_RUNSC) is None and not os.access(REAL_RUNSC, os.X_OK):
        pytest.skip(f"runsc unavailable ({REAL_RUNSC} not found)")
    ref = registry.push(shift_image("gv"), "tests/shift:gv")
    d = Daemon(str(tmp_path / "gvstate"), env=dict(OFF, SANDBOXD_RUNSC=REAL_RUNSC,
                                                  SANDBOXD_GVISOR_POOL_SIZE="0"))
    d.start()
    try:
        c = d.client(d.create_key("gvshift"))
        ps = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}
        if not ps["gvisor"]["available"]:
            pytest.skip(f"gvisor unavailable here: {ps['gvisor']['reason']}")
        sid = c.new_session("gvisor", image=ref)["id"]
        layers = os.path.join(d.state_dir, "images", "layers")
        before = w.tree_digest(layers)
        try:
            r = sh(c, sid, "stat -c '%u %g %a' /hello.txt /home/app/notes; id -u; "
                           "echo x >> /hello.txt 2>/dev/null || echo refused; "
                           "echo changed > /home/app/notes && cat /home/app/notes")
            assert r["stdout"] == "0 0 644\n1234 1234 640\n1234\nrefused\nchanged\n", r
            assert copies(d.state_dir) == {}, "gvisor's gofer serves the host's ids: no copy"
        finally:
            c.delete(f"/v1/sandbox/sessions/{sid}")
        assert w.tree_digest(layers) == before  # the write went to the upper
    finally:
        rc = d.stop(timeout=30)
        assert not reap_leftovers(d.state_dir)
        assert rc == 0, d.log_tail(100)
