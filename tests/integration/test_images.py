"""test_images.py — images: `sandboxd image` (the sbx-image build
of it) against a real docker-registry on loopback, with images built by the
tests from busybox-static rootfs trees and pushed with skopeo.

Pull by tag and by digest, a corrupted blob rejected with a digest error,
resume of a partial download, import of an OCI layout / OCI archive /
docker-save tarball, whiteouts and opaque directories (checked through a
real overlayfs mount), a hostile layer refused with nothing written outside
the store, ls/rm/gc with a layer held by another process kept, basic
(htpasswd) and bearer-token auth with credentials from auth.json.
"""
import fcntl
import json
import os
import subprocess

import pytest

import imgworld as w

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="layers need root (mknod, xattrs)")


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = w.Registry(tmp_path_factory.mktemp("registry")).start()
    yield r
    r.stop()


def base_layer(extra=None):
    return w.rootfs_entries(extra or {"hello.txt": "hello from the image\n"})


def ls(state):
    return json.loads(w.sbx_image(state, "ls", "--json").stdout)


def layer_dir(state, digest):
    return os.path.join(str(state), "images", "layers", "sha256", digest.split(":")[1])


def blob_file(state, digest):
    return os.path.join(str(state), "images", "blobs", "sha256", digest.split(":")[1])


# ---- pull -------------------------------------------------------------------

def test_pull_by_tag_then_by_digest(registry, tmp_path):
    img = w.Image([base_layer()])
    ref = registry.push(img, "t/pull:1")
    p = w.sbx_image(tmp_path, "pull", ref)
    canonical, digest = p.stdout.split()
    assert canonical == ref and digest == img.digest
    for d in img.layer_digests():
        assert os.path.isfile(os.path.join(layer_dir(tmp_path, d), "hello.txt"))
        assert os.path.isfile(blob_file(tmp_path, d))
    [rec] = ls(tmp_path)
    assert rec["ref"] == ref and rec["digest"] == img.digest
    assert rec["layers"] == img.layer_digests()

    by_digest = f"{registry.host}/t/pull@{img.digest}"
    p = w.sbx_image(tmp_path, "pull", by_digest)
    assert p.stdout.split() == [by_digest, img.digest]
    assert "pulled sha256" not in p.stderr  # layers already stored: nothing downloaded
    assert {r["ref"] for r in ls(tmp_path)} == {ref, by_digest}


def test_pull_unknown_tag_and_bad_digest(registry, tmp_path):
    img = w.Image([base_layer()])
    registry.push(img, "t/known:1")
    p = w.sbx_image(tmp_path, "pull", f"{registry.host}/t/known:nope", check=False)
    assert p.returncode == 1 and "MANIFEST_UNKNOWN" in p.stderr
    p = w.sbx_image(tmp_path, "pull", "Not A Ref", check=False)
    assert p.returncode == 1 and "invalid image reference" in p.stderr


def test_corrupted_blob_is_rejected(registry, tmp_path):
    img = w.Image([base_layer({"corrupt-me.txt": "x" * 5000})])
    ref = registry.push(img, "t/corrupt:1")
    [ld] = img.layer_digests()
    path = registry.blob_path(ld)
    with open(path, "r+b") as f:  # same size, different bytes
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    p = w.sbx_image(tmp_path, "pull", ref, check=False)
    assert p.returncode == 1
    assert "digest mismatch" in p.stderr and ld in p.stderr
    assert not os.path.exists(blob_file(tmp_path, ld))
    assert not os.path.exists(layer_dir(tmp_path, ld))
    assert ls(tmp_path) == []
    assert not any(n.startswith("dl-") for n in os.listdir(tmp_path / "images" / "tmp"))


def test_resume_partial_download(registry, tmp_path):
    img = w.Image([base_layer({"big.bin": os.urandom(300000).hex()})])
    ref = registry.push(img, "t/resume:1")
    [(_, blob, _)] = img.layers
    ld = w.sha256(blob)
    tmpd = tmp_path / "images" / "tmp"
    w.sbx_image(tmp_path, "ls")  # creates the store
    (tmpd / f"dl-{ld[7:]}").write_bytes(blob[: len(blob) // 2])
    p = w.sbx_image(tmp_path, "pull", ref)
    assert "resuming" in p.stderr
    assert open(blob_file(tmp_path, ld), "rb").read() == blob
    # a partial file with wrong bytes fails once (digest), then is gone
    w.sbx_image(tmp_path, "rm", ref)
    w.sbx_image(tmp_path, "gc")
    (tmpd / f"dl-{ld[7:]}").write_bytes(b"\0" * 1000)
    p = w.sbx_image(tmp_path, "pull", ref, check=False)
    assert p.returncode == 1 and "digest mismatch" in p.stderr
    w.sbx_image(tmp_path, "pull", ref)


# ---- layers -----------------------------------------------------------------

def test_whiteouts_and_opaque_dirs(registry, tmp_path):
    lower = base_layer() + [("etc/old.conf", "file", "old"), ("data", "dir"),
                            ("data/a", "file", "a"), ("data/b", "file", "b"),
                            ("keep", "dir"), ("keep/k", "file", "k")]
    upper = [("etc", "dir"), ("etc/.wh.old.conf", "file", ""), ("data", "dir"),
             ("data/.wh..wh..opq", "file", ""), ("data/c", "file", "c")]
    img = w.Image([lower, upper])
    ref = registry.push(img, "t/layers:1")
    w.sbx_image(tmp_path, "pull", ref)
    l1, l2 = (layer_dir(tmp_path, d) for d in img.layer_digests())
    st = os.lstat(os.path.join(l2, "etc", "old.conf"))
    assert (st.st_mode & 0o170000) == 0o020000 and st.st_rdev == 0  # char dev 0:0
    assert os.getxattr(os.path.join(l2, "data"), "trusted.overlay.opaque") == b"y"
    assert not os.path.exists(os.path.join(l2, "data", ".wh..wh..opq"))

    # stacked as overlayfs lowerdirs, exactly as a sandbox will see them
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={l2}:{l1}",
                        str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"overlayfs unavailable: {r.stderr}")
    try:
        assert not os.path.exists(mnt / "etc" / "old.conf")
        assert os.path.exists(mnt / "etc" / "passwd")
        assert sorted(os.listdir(mnt / "data")) == ["c"]
        assert os.listdir(mnt / "keep") == ["k"]
        out = subprocess.run([str(mnt / "bin" / "busybox"), "cat", str(mnt / "hello.txt")],
                             capture_output=True, text=True)
        assert out.stdout == "hello from the image\n"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_hostile_layer_refused_nothing_outside(registry, tmp_path):
    evil = [("ok.txt", "file", "fine"), ("../../../evil-escape", "file", "pwned")]
    img = w.Image([base_layer(), evil])
    ref = registry.push(img, "t/hostile:1")
    state = tmp_path / "state"
    p = w.sbx_image(state, "pull", ref, check=False)
    assert p.returncode == 1 and "hostile" in p.stderr
    found = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
             if f == "evil-escape"]
    assert found == [] and not os.path.exists("/evil-escape")
    assert os.listdir(state / "images" / "tmp") == []
    assert not os.path.exists(layer_dir(state, img.layer_digests()[1]))
    assert ls(state) == []


# ---- import -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["oci-layout", "oci-archive", "docker-archive"])
def test_import(fmt, tmp_path):
    img = w.Image([base_layer({"fmt.txt": fmt}), [("extra", "file", "2")]])
    layout = img.write_layout(str(tmp_path / "layout"))
    state = tmp_path / "state"
    if fmt == "oci-layout":
        p = w.sbx_image(state, "import", layout, check=False)
        assert p.returncode == 1 and "--name" in p.stderr
        p = w.sbx_image(state, "import", layout, "--name", "local/fmt:layout")
        want = "docker.io/local/fmt:layout"
    elif fmt == "oci-archive":
        arch = w.to_oci_archive(layout, str(tmp_path / "img.oci.tar"))
        p = w.sbx_image(state, "import", arch, "--name", "127.0.0.1:1/x/y:z")
        want = "127.0.0.1:1/x/y:z"
    else:
        arch = w.to_docker_archive(layout, str(tmp_path / "img.docker.tar"), "sbx/dock:1")
        p = w.sbx_image(state, "import", arch)  # named by its RepoTags
        want = "docker.io/sbx/dock:1"
    assert p.stdout.strip() == want
    [rec] = ls(state)
    assert rec["ref"] == want and len(rec["layers"]) == 2
    dirs = [layer_dir(state, d) for d in rec["layers"]]
    assert open(os.path.join(dirs[0], "fmt.txt")).read() == fmt
    assert open(os.path.join(dirs[1], "extra")).read() == "2"
    if fmt == "oci-layout":
        assert rec["digest"] == img.digest  # the layout's own manifest, byte for byte
    assert os.listdir(state / "images" / "tmp") == []


def test_import_rejects_tampered_layout(tmp_path):
    img = w.Image([base_layer()])
    layout = img.write_layout(str(tmp_path / "layout"))
    [ld] = img.layer_digests()
    with open(os.path.join(layout, "blobs", "sha256", ld[7:]), "ab") as f:
        f.write(b"tail")
    p = w.sbx_image(tmp_path / "state", "import", layout, "--name", "x/y", check=False)
    assert p.returncode == 1 and "digest mismatch" in p.stderr
    assert ls(tmp_path / "state") == []


# ---- ls / rm / gc -------------------------------------------------------------

def test_rm_and_gc_keep_shared_and_held_layers(registry, tmp_path):
    base = base_layer()
    a = w.Image([base, [("a", "file", "a")]])
    b = w.Image([base, [("b", "file", "b")]])
    ra, rb = registry.push(a, "t/gc-a:1"), registry.push(b, "t/gc-b:1")
    w.sbx_image(tmp_path, "pull", ra)
    w.sbx_image(tmp_path, "pull", rb)
    shared, only_a = a.layer_digests()
    only_b = b.layer_digests()[1]
    assert shared == b.layer_digests()[0]

    w.sbx_image(tmp_path, "rm", ra)
    p = w.sbx_image(tmp_path, "rm", ra, check=False)
    assert p.returncode == 1 and "not found" in p.stderr
    # another process (this one) holds b's unique layer as a sandbox would
    w.sbx_image(tmp_path, "rm", rb)
    fd = os.open(layer_dir(tmp_path, only_b), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        p = w.sbx_image(tmp_path, "gc")
        assert "1 unreferenced layers in use kept" in p.stdout
        assert not os.path.exists(layer_dir(tmp_path, only_a))
        assert not os.path.exists(layer_dir(tmp_path, shared))
        assert os.path.isdir(layer_dir(tmp_path, only_b))
    finally:
        os.close(fd)
    p = w.sbx_image(tmp_path, "gc")
    assert not os.path.exists(layer_dir(tmp_path, only_b))
    assert os.listdir(tmp_path / "images" / "blobs" / "sha256") == []
    assert ls(tmp_path) == []


def test_gc_keeps_referenced(registry, tmp_path):
    img = w.Image([base_layer()])
    ref = registry.push(img, "t/keep:1")
    w.sbx_image(tmp_path, "pull", ref)
    p = w.sbx_image(tmp_path, "gc")
    assert p.stdout.startswith("removed 0 blobs")
    for d in img.layer_digests():
        assert os.path.isdir(layer_dir(tmp_path, d))
    assert [r["ref"] for r in ls(tmp_path)] == [ref]


def test_cli_usage(tmp_path):
    p = w.sbx_image(tmp_path, "frobnicate", check=False)
    assert p.returncode == 2 and "usage" in p.stderr
    p = w.sbx_image(tmp_path, "pull", check=False)
    assert p.returncode == 2


# ---- auth ---------------------------------------------------------------------

def test_basic_auth_from_auth_json(registry, tmp_path):
    img = w.Image([base_layer({"secret.txt": "basic"})])
    registry.push(img, "t/basic:1")
    # the same storage behind a registry that wants htpasswd credentials
    with w.Registry(tmp_path / "reg", storage=registry.storage, auth="htpasswd") as locked:
        ref = f"{locked.host}/t/basic:1"
        state = tmp_path / "state"
        p = w.sbx_image(state, "pull", ref, check=False)
        assert p.returncode == 1 and "credentials" in p.stderr
        w.write_auth_json(state, locked.host, locked.user, "wrong")
        p = w.sbx_image(state, "pull", ref, check=False)
        assert p.returncode == 1 and "401" in p.stderr
        w.write_auth_json(state, locked.host, locked.user, locked.password)
        p = w.sbx_image(state, "pull", ref)
        assert p.stdout.split()[1] == img.digest


def test_bearer_token_flow(registry, tmp_path):
    img = w.Image([base_layer({"secret.txt": "bearer"})])
    registry.push(img, "t/bearer:1")
    tokens = w.TokenServer(tmp_path / "token").start()
    try:
        with w.Registry(tmp_path / "reg", storage=registry.storage, auth=tokens) as locked:
            ref = f"{locked.host}/t/bearer:1"
            state = tmp_path / "state"
            # the registry really wants a token
            with pytest.raises(Exception) as e:
                w.fetch(f"http://{locked.host}/v2/t/bearer/manifests/1")
            assert "401" in str(e.value)
            p = w.sbx_image(state, "pull", ref, check=False)
            assert p.returncode == 1 and "token server" in p.stderr and tokens.refused >= 1
            w.write_auth_json(state, locked.host, tokens.user, tokens.password)
            p = w.sbx_image(state, "pull", ref)
            assert p.stdout.split()[1] == img.digest
            assert "repository:t/bearer:pull" in tokens.issued
    finally:
        tokens.stop()
