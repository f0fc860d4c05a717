"""Sessions and executions on OCI images, through the daemon's
API: pulled on first use from a real docker-registry on loopback (or
refused with `pull: never`), mounted copy-on-write (writes private to a
sandbox, bounded by `disk`, gone with it, layers shared and untouched), the
image config honoured (Env, WorkingDir, Entrypoint/Cmd, `language` resolved
to the image's interpreter), and the /v1/sandbox/images routes.

Test images are built here from busybox-static rootfs trees (imgworld.py).
Only 127.0.0.1 is ever contacted."""
import hashlib
import os
import subprocess

import pytest

import imgworld as w
from sbxtest import Daemon, assert_error, reap_leftovers, sandboxd_bin

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="images need root")

PROFILE = "container"


def app_image(marker="one"):
    """Two layers: a busybox rootfs with a world-writable /data and files
    to delete, then a layer deleting one (whiteout) and making /opq opaque."""
    lower = w.rootfs_entries({"hello.txt": f"hello {marker}\n", "gone.txt": "delete me\n",
                              "opq/old.txt": "lower\n"})
    lower += [("data", "dir", None, 0o1777), ("opq", "dir")]
    upper = [(".wh.gone.txt", "file", ""), ("opq", "dir"), ("opq/.wh..wh..opq", "file", ""),
             ("opq/new.txt", "file", "upper\n")]
    return w.Image([lower, upper], config={"Env": ["PATH=/bin", "GREETING=hello"],
                                           "WorkingDir": "/data",
                                           "Entrypoint": ["/bin/sh", "-c"],
                                           "Cmd": ["echo from-cmd $GREETING"]})


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = w.Registry(tmp_path_factory.mktemp("imgreg")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def imgd(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("imgstate"))
    d.start()
    yield d
    rc = d.stop(timeout=15)
    assert not reap_leftovers(d.state_dir)
    assert rc == 0, d.log_tail(100)


@pytest.fixture(scope="module")
def cl(imgd):
    return imgd.client(imgd.create_key("img-tenant"))


@pytest.fixture(scope="module")
def admin(imgd):
    return imgd.client(imgd.create_key("img-admin", admin=True))


@pytest.fixture(scope="module")
def app(registry):
    return registry.push(app_image(), "tests/app:1")


def sh(cl, sid, script):
    r = cl.exec(sid, command=["/bin/sh", "-c", script])
    return r


def tree_digest(path):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, path)} {st.st_mode:o} {st.st_size}\n".encode())
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def test_session_on_a_pulled_image(cl, app):
    s = cl.new_session(PROFILE, image=app)
    sid = s["id"]
    try:
        assert s["image"] == app
        r = sh(cl, sid, "cat /hello.txt; echo $GREETING; pwd; ls /; cat /etc/passwd")
        assert r["exit_code"] == 0, r
        out = r["stdout"]
        assert "hello one" in out and "hello\n" in out
        assert "/data\n" in out                          # WorkingDir
        assert "root:x:0:0:root:/root:/bin/sh" in out    # the image's own /etc
        # whiteout and opaque directory
        r = sh(cl, sid, "ls /gone.txt 2>&1; ls /opq")
        assert "No such file" in r["stdout"] and "new.txt" in r["stdout"]
        assert "old.txt" not in r["stdout"]
        # root-owned files stay root's inside (idmapped), and read-only to us
        r = sh(cl, sid, "stat -c '%u %a' /hello.txt; echo x >> /hello.txt; echo rc=$?")
        assert r["stdout"].startswith("0 644"), r
        assert "rc=0" not in r["stdout"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_writes_are_private_and_vanish(cl, app, imgd):
    a = cl.new_session(PROFILE, image=app)["id"]
    b = cl.new_session(PROFILE, image=app)["id"]
    try:
        r = sh(cl, a, "echo secret-a > /data/mine.txt && cat /data/mine.txt")
        assert r["exit_code"] == 0 and r["stdout"] == "secret-a\n", r
        r = sh(cl, b, "ls /data")
        assert "mine.txt" not in r["stdout"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{a}")
        cl.delete(f"/v1/sandbox/sessions/{b}")
    c = cl.new_session(PROFILE, image=app)["id"]
    try:
        assert "mine.txt" not in sh(cl, c, "ls /data")["stdout"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{c}")
    # the layers on the host never saw the write
    layers = os.path.join(imgd.state_dir, "images", "layers")
    found = subprocess.run(["grep", "-rl", "secret-a", layers], capture_output=True, text=True)
    assert found.stdout == ""


def test_disk_limit_holds_on_the_upper(cl, app):
    s = cl.new_session(PROFILE, image=app, limits={"disk": "8Mi"})
    sid = s["id"]
    try:
        r = sh(cl, sid, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?")
        assert "rc=0" not in r["stdout"], r
        assert "No space left" in r["stdout"], r
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_layers_shared_by_twenty_sessions(cl, app, imgd):
    first = cl.new_session(PROFILE, image=app)["id"]
    layers = os.path.join(imgd.state_dir, "images", "layers")
    before = tree_digest(layers)
    du0 = subprocess.run(["du", "-sb", os.path.join(imgd.state_dir, "images")],
                         capture_output=True, text=True).stdout.split()[0]
    ids = [first]
    try:
        for _ in range(19):
            ids.append(cl.new_session(PROFILE, image=app)["id"])
        for sid in ids[:3]:
            assert sh(cl, sid, "cat /hello.txt")["stdout"] == "hello one\n"
        du1 = subprocess.run(["du", "-sb", os.path.join(imgd.state_dir, "images")],
                             capture_output=True, text=True).stdout.split()[0]
        assert du0 == du1, "sessions copied the image"
    finally:
        for sid in ids:
            cl.delete(f"/v1/sandbox/sessions/{sid}")
    assert tree_digest(layers) == before


def test_language_resolves_to_the_image_interpreter(cl, app):
    s = cl.new_session(PROFILE, image=app)
    sid = s["id"]
    try:
        r = cl.exec(sid, language="bash", code="echo via-$0")  # busybox has sh, not bash
        assert r["exit_code"] == 0 and r["stdout"].startswith("via-"), r
        r = cl.post(f"/v1/sandbox/sessions/{sid}/exec", json={"language": "python",
                                                                "code": "print(1)"})
        assert_error(r, 400, "invalid_request", field="language")
        assert "python" in r.json()["error"]["message"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_execution_runs_the_image_entrypoint(cl, app):
    r = cl.post("/v1/sandbox/executions", json={"profile": PROFILE, "image": app})
    assert r.status_code == 202, r.text
    e = cl.wait_execution(r.json()["id"])
    assert e["status"] == "succeeded", e
    assert e["stdout"] == "from-cmd hello\n", e
    r = cl.post("/v1/sandbox/executions", json={"profile": PROFILE, "image": app,
                                                "command": ["/bin/busybox", "cat", "/hello.txt"]})
    e = cl.wait_execution(r.json()["id"])
    assert e["stdout"] == "hello one\n", e


def test_bad_references_and_profiles(cl, imgd):
    for ref in ["UPPER/case", "a b", "x@sha256:1234", "::"]:
        r = cl.post("/v1/sandbox/sessions", json={"profile": PROFILE, "image": ref})
        assert_error(r, 400, "invalid_request", field="image")
    r = cl.post("/v1/sandbox/sessions", json={"profile": "process", "image": "busybox:1"})
    if r.status_code != 404:
        assert_error(r, 400, "invalid_request", field="image")


def test_missing_image_is_a_clear_error(cl, registry):
    r = cl.post("/v1/sandbox/sessions", json={"profile": PROFILE,
                                              "image": f"{registry.host}/tests/nope:1"})
    assert 400 <= r.status_code < 600 and r.status_code != 500, r.text
    assert "nope" in r.json()["error"]["message"]


def test_images_routes(cl, admin, registry, imgd):
    ref = registry.push(app_image("routes"), "tests/routes:1")
    r = cl.post("/v1/sandbox/images/pull", json={"ref": ref})
    assert r.status_code == 403, r.text
    r = admin.post("/v1/sandbox/images/pull", json={"ref": ref})
    assert r.status_code == 200, r.text
    assert r.json()["ref"] == ref and r.json()["digest"].startswith("sha256:")
    r = admin.post("/v1/sandbox/images/pull", json={"ref": "Bad Ref"})
    assert_error(r, 400, "invalid_request", field="ref")
    r = cl.get("/v1/sandbox/images")
    assert r.status_code == 200
    assert ref in [i["ref"] for i in r.json()["images"]]
    r = cl.delete(f"/v1/sandbox/images/{ref}")
    assert r.status_code == 403
    r = admin.delete(f"/v1/sandbox/images/{ref}")
    assert r.status_code == 204, r.text
    assert ref not in [i["ref"] for i in cl.get("/v1/sandbox/images").json()["images"]]
    r = admin.delete(f"/v1/sandbox/images/{ref}")
    assert r.status_code == 404, r.text
    r = admin.post("/v1/sandbox/images/gc")
    assert r.status_code == 200, r.text
    assert r.json()["layers_removed"] >= 1


def test_pull_never(registry, tmp_path, daemon_factory):
    ref = registry.push(app_image("never"), "tests/never:1")
    d = daemon_factory(extra_args=["--pull", "never"])
    d.start()
    c = d.client(d.create_key("never"))
    r = c.post("/v1/sandbox/sessions", json={"profile": PROFILE, "image": ref})
    assert_error(r, 404, "not_found")
    # imported by the operator: now it runs
    layout = app_image("never").write_layout(str(tmp_path / "layout"))
    p = subprocess.run([sandboxd_bin(), "image", "import", layout, "--name", ref,
                        "--state-dir", d.state_dir], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    s = c.new_session(PROFILE, image=ref)
    try:
        r = c.exec(s["id"], command=["/bin/busybox", "cat", "/hello.txt"])
        assert r["stdout"] == "hello never\n"
    finally:
        c.delete(f"/v1/sandbox/sessions/{s['id']}")


@pytest.mark.parametrize("user,want", [("app", "1234 1234"), ("4242:4343", "4242 4343"),
                                       ("app:staff", "1234 50"), ("root", "1000 1000"),
                                       ("", "1000 1000")])
def test_image_user_runs_inside_the_sandbox_ids(cl, registry, user, want):
    lower = w.rootfs_entries({"etc/group": "root:x:0:\nstaff:x:50:\napp:x:1234:\n"})
    lower = [e for e in lower if e[0] != "etc/passwd"]
    lower.append(("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"
                  "app:x:1234:1234:app:/home/app:/bin/sh\n"))
    img = w.Image([lower], config={"User": user})
    ref = registry.push(img, f"tests/user:{abs(hash(user)) % 10**8}")
    s = cl.new_session(PROFILE, image=ref)
    try:
        r = cl.exec(s["id"], command=["/bin/busybox", "sh", "-c", "echo $(id -u) $(id -g)"])
        assert r["stdout"].strip() == want, r
        # /work belongs to that user; it can write there
        r = cl.exec(s["id"], command=["/bin/busybox", "sh", "-c",
                                      "echo x > /work/f && stat -c %u /work/f"])
        assert r["stdout"].strip() == want.split()[0], r
    finally:
        cl.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_image_user_unknown_is_refused(cl, registry):
    img = w.Image([w.rootfs_entries()], config={"User": "ghost"})
    ref = registry.push(img, "tests/ghost:1")
    r = cl.post("/v1/sandbox/sessions", json={"profile": PROFILE, "image": ref})
    assert_error(r, 400, "invalid_request", field="image")
    assert "ghost" in r.json()["error"]["message"]


def test_execution_the_image_cannot_run_is_invalid_request(cl, registry):
    """An execution's image is only looked at by its worker: one whose User
    the image does not define ends with error/invalid_request, not a
    reason-less error."""
    img = w.Image([w.rootfs_entries()], config={"User": "ghost"})
    ref = registry.push(img, "tests/ghost-exec:1")
    r = cl.post("/v1/sandbox/executions", json={"profile": PROFILE, "image": ref,
                                                "command": ["/bin/busybox", "true"]})
    assert r.status_code == 202, r.text
    e = cl.wait_execution(r.json()["id"], timeout=120)
    assert (e["status"], e["reason"]) == ("error", "invalid_request"), e
    assert e["error"]["reason"] == "invalid_request" and "ghost" in e["error"]["message"], e


def test_image_root_with_the_pre_6_7_layer_list(registry, daemon_factory):
    """The overlay form kernels before 6.7 take (one lowerdir= list; Debian
    12's 6.1), forced here: the same image view, ownership and whiteouts,
    and the root's mount options show that form was used."""
    ref = registry.push(app_image("list"), "tests/list:1")
    d = daemon_factory(env={"SANDBOXD_OVERLAY_LAYERS": "string"})
    d.start()
    c = d.client(d.create_key("list"))
    sid = c.new_session(PROFILE, image=ref)["id"]
    try:
        r = sh(c, sid, "cat /hello.txt; ls /gone.txt 2>&1; ls /opq; stat -c '%u %a' /hello.txt;"
                       "grep ' / / ' /proc/self/mountinfo")
        assert r["exit_code"] == 0, r
        out = r["stdout"]
        assert "hello list" in out and "No such file" in out and "new.txt" in out, out
        assert "old.txt" not in out and "\n0 644\n" in out, out
        assert "lowerdir=" in out and "lowerdir+=" not in out, out
    finally:
        c.delete(f"/v1/sandbox/sessions/{sid}")
