"""test_image_build.py — `sandboxd image build` (the
sbx-image build of it) makes a Debian language image with mmdebstrap from
the host's apt sources, stores it like an import, and the image runs.

The build takes one to a few minutes, so its output (the OCI layout kept
with --output) is cached between runs on one machine, under
$SANDBOXD_TEST_CACHE (default /var/cache/sandboxd-test)/image-build/<key>,
key = suite, sorted packages, the sha256 of src/image/build.c and the Date
of the host's apt lists for the suite.  A fresh machine (CI) has no cache,
so its first run really builds; a cache entry older than 7 days is rebuilt;
SANDBOXD_TEST_IMAGE_BUILD=rebuild forces a build, =skip skips the module.
On a cache hit the cached layout is imported instead (the same code path
the build ends with).

Only the host's configured apt sources are contacted (by mmdebstrap);
nothing else leaves loopback.
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

import imgworld as w

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="layers need root (mknod, xattrs)"),
    pytest.mark.skipif(not os.access("/usr/bin/mmdebstrap", os.X_OK),
                       reason="mmdebstrap (Debian package) not installed"),
    pytest.mark.skipif(os.environ.get("SANDBOXD_TEST_IMAGE_BUILD") == "skip",
                       reason="SANDBOXD_TEST_IMAGE_BUILD=skip"),
]

SUITE = "bookworm"
PACKAGES = ["python3"]
NAME = "lang/python"
CANONICAL = "docker.io/lang/python:latest"
MAX_AGE_S = 7 * 86400
HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_C = os.path.join(HERE, "..", "..", "src", "image", "build.c")


def lists_date(suite):
    """The Date: of the host's InRelease for suite ("" when none)."""
    for path in sorted(glob.glob(f"/var/lib/apt/lists/*_dists_{suite}_InRelease")):
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("Date:"):
                    return line.split(":", 1)[1].strip()
    return ""


def cache_key():
    with open(BUILD_C, "rb") as f:
        src = hashlib.sha256(f.read()).hexdigest()
    doc = json.dumps({"suite": SUITE, "packages": sorted(PACKAGES), "build.c": src,
                      "lists": lists_date(SUITE)}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:24]


def cache_dir():
    base = os.environ.get("SANDBOXD_TEST_CACHE", "/var/cache/sandboxd-test")
    return os.path.join(base, "image-build")


def ls(state):
    return json.loads(w.sbx_image(state, "ls", "--json").stdout)


def layer_dir(state, digest):
    return os.path.join(str(state), "images", "layers", "sha256", digest.split(":")[1])


def blob(state, digest):
    with open(os.path.join(str(state), "images", "blobs", "sha256", digest.split(":")[1]),
              "rb") as f:
        return f.read()


class Built:
    """The image of this module in a state dir of its own."""

    def __init__(self, state, layout, canonical, digest, fresh, seconds):
        self.state, self.layout = state, layout
        self.canonical, self.digest = canonical, digest
        self.fresh, self.seconds = fresh, seconds


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    state = tmp_path_factory.mktemp("build-state")
    root = cache_dir()
    os.makedirs(root, exist_ok=True)
    entry = os.path.join(root, cache_key())
    fresh_wanted = os.environ.get("SANDBOXD_TEST_IMAGE_BUILD") == "rebuild"
    if os.path.isdir(entry) and (fresh_wanted or time.time() - os.stat(entry).st_mtime > MAX_AGE_S):
        shutil.rmtree(entry)
    if os.path.isfile(os.path.join(entry, "index.json")):
        t0 = time.time()
        p = w.sbx_image(state, "import", entry)  # named by its own annotation
        canonical = p.stdout.strip()
        [rec] = ls(state)
        return Built(state, entry, canonical, rec["digest"], False, time.time() - t0)
    # a real build, kept (--output) in a temp entry renamed into place only
    # when complete, so an interrupted run never leaves a half cache
    tmp = f"{entry}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.time()
    p = w.sbx_image(state, "build", "--from", f"debian:{SUITE}", "--packages",
                    ",".join(PACKAGES), "--name", NAME, "--output", tmp, timeout=3600)
    seconds = time.time() - t0
    canonical, digest = p.stdout.split()
    print(f"\nimage build: {seconds:.1f} s\n" + "\n".join(
        l for l in p.stderr.splitlines() if not l.startswith("I: ")))
    os.rename(tmp, entry)
    # old entries of other keys: this machine has moved on
    for old in os.listdir(root):
        path = os.path.join(root, old)
        if path != entry and time.time() - os.stat(path).st_mtime > MAX_AGE_S:
            shutil.rmtree(path, ignore_errors=True)
    return Built(state, entry, canonical, digest, True, seconds)


def test_build_is_stored_and_listed(built):
    assert built.canonical == CANONICAL  # Docker's normalisation of "lang/python"
    [rec] = ls(built.state)
    assert rec["ref"] == CANONICAL and rec["digest"] == built.digest
    assert rec["digest"].startswith("sha256:") and len(rec["layers"]) == 1
    out = w.sbx_image(built.state, "ls").stdout
    assert CANONICAL in out and built.digest[:19] in out
    with open(os.path.join(built.layout, "index.json")) as f:
        idx = json.load(f)
    [m] = idx["manifests"]
    assert m["digest"] == built.digest  # the kept layout is the stored image
    assert m["annotations"]["io.containerd.image.name"] == CANONICAL
    assert os.listdir(os.path.join(str(built.state), "images", "tmp")) == []


def test_manifest_and_config(built):
    man = json.loads(blob(built.state, built.digest))
    assert man["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    [layer] = man["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    raw = blob(built.state, layer["digest"])
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0"  # gzip, header time 0
    cfg = json.loads(blob(built.state, man["config"]["digest"]))
    assert cfg["os"] == "linux" and cfg["architecture"] == "amd64"
    c = cfg["config"]
    assert c["Cmd"] == ["python3"]
    assert any(e.startswith("PATH=") and "/usr/bin" in e for e in c["Env"])
    assert c["Labels"]["io.sandboxd.build.packages"] == ",".join(sorted(PACKAGES))
    assert c["Labels"]["io.sandboxd.build.from"] == f"debian:{SUITE}"
    assert len(cfg["rootfs"]["diff_ids"]) == 1


def test_layer_is_a_slim_debian_with_python(built):
    [rec] = ls(built.state)
    d = layer_dir(built.state, rec["layers"][0])
    py = os.path.join(d, "usr", "bin", "python3")
    assert os.path.lexists(py)
    target = os.path.join(os.path.dirname(py), os.readlink(py)) if os.path.islink(py) else py
    assert os.path.isfile(target) and os.access(target, os.X_OK)
    with open(os.path.join(d, "etc", "os-release")) as f:
        assert f"VERSION_CODENAME={SUITE}" in f.read()
    # apt's lists and cache, docs and the build's temporary settings are gone
    assert not [f for f in os.listdir(os.path.join(d, "var", "lib", "apt", "lists"))
                if f not in ("lock", "partial")]
    assert not glob.glob(os.path.join(d, "var", "cache", "apt", "*.bin"))
    assert not glob.glob(os.path.join(d, "var", "cache", "apt", "archives", "*.deb"))
    assert not glob.glob(os.path.join(d, "usr", "share", "man", "*", "*"))
    assert not glob.glob(os.path.join(d, "usr", "share", "doc", "*", "changelog*"))
    assert os.path.isfile(os.path.join(d, "usr", "share", "doc", "python3", "copyright"))
    assert not os.path.exists(os.path.join(d, "etc", "dpkg", "dpkg.cfg.d", "00sandboxd-build"))
    assert not os.path.exists(os.path.join(d, "etc", "apt", "apt.conf.d", "99mmdebstrap"))
    assert os.path.isfile(os.path.join(d, "etc", "dpkg", "dpkg.cfg.d", "90sandboxd-slim"))
    for f in ("resolv.conf", "hostname"):  # the host's copies are not shipped
        assert os.path.getsize(os.path.join(d, "etc", f)) == 0
    # /dev is there (a mount point) but mmdebstrap's device nodes were not unpacked
    assert os.path.isdir(os.path.join(d, "dev"))
    for dirpath, dirs, files in os.walk(os.path.join(d, "dev")):
        for n in files:
            mode = os.lstat(os.path.join(dirpath, n)).st_mode & 0o170000
            assert mode not in (0o020000, 0o060000), f"device node {dirpath}/{n}"


def test_python_runs_on_the_layer(built, tmp_path):
    """The layer as an overlayfs lower (the way a sandbox gets it), chrooted."""
    [rec] = ls(built.state)
    lower = layer_dir(built.state, rec["layers"][0])
    up, work, mnt = tmp_path / "up", tmp_path / "work", tmp_path / "mnt"
    for p in (up, work, mnt):
        p.mkdir()
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={up},workdir={work}", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"overlayfs unavailable: {r.stderr}")
    try:
        out = subprocess.run(["/usr/sbin/chroot", str(mnt), "python3", "-c", "print(1+1)"],
                             capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        assert out.returncode == 0, out.stderr
        assert out.stdout == "2\n"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_session_runs_python_on_the_image(built, daemon, alice, profile_table):
    """Through the API, when the daemon runs images."""
    usable = [n for n, p in profile_table.items()
              if "images" in p.get("capabilities", []) and p.get("available", True)]
    if not usable:
        pytest.skip("no profile of this daemon lists the images capability yet")
    w.sbx_image(daemon.state_dir, "import", built.layout)
    r = alice.post("/v1/sandbox/sessions", json={"profile": usable[0], "image": NAME})
    assert r.status_code == 201, r.text
    s = r.json()
    try:
        assert s["image"] == CANONICAL
        out = alice.exec(s["id"], command=["python3", "-c", "print(1+1)"])
        assert out["stdout"] == "2\n" and out["exit_code"] == 0
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- refusals: fast, nothing is built ------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--from", "ubuntu:jammy", "--packages", "python3", "--name", "x/y"], "debian:SUITE"),
    (["--from", "debian:", "--packages", "python3", "--name", "x/y"], "debian:SUITE"),
    (["--from", "debian:bookworm", "--packages", "Python3", "--name", "x/y"], "package name"),
    (["--from", "debian:bookworm", "--packages", "a;rm -rf /", "--name", "x/y"], "package name"),
    (["--from", "debian:bookworm", "--packages", ",", "--name", "x/y"], "at least one"),
    (["--from", "debian:bookworm", "--packages", "python3"], "--name is required"),
    (["--from", "debian:bookworm", "--packages", "python3", "--name", "Bad Name"],
     "invalid image reference"),
    (["--from", "debian:bookworm", "--packages", "python3", "--name",
      "x/y@sha256:" + "0" * 64], "not a digest"),
    (["--from", "debian:bookworm", "--packages", "python3", "--name", "x/y", "--variant",
      "buildd"], "--variant"),
    (["--from", "debian:bookworm", "--packages", "python3", "--name", "x/y", "--mirror",
      "ftp://example.invalid/debian"], "--mirror"),
    (["--from", "debian:bookworm", "--packages", "python3", "--name", "x/y", "--mirror",
      "/etc/passwd"], "--mirror"),
    (["--from", "debian:nosuchsuite", "--packages", "python3", "--name", "x/y"],
     "have no enabled 'deb' entry for nosuchsuite"),
])
def test_build_refusals(tmp_path, args, words):
    p = w.sbx_image(tmp_path, "build", *args, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert words in p.stderr
    assert "I: " not in p.stderr  # mmdebstrap never started
    assert ls(tmp_path) == []


def test_build_output_must_be_empty(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "something").write_text("x")
    p = w.sbx_image(tmp_path / "state", "build", "--from", "debian:bookworm", "--packages",
                    "python3", "--name", "x/y", "--output", str(out), check=False)
    assert p.returncode == 1 and "not empty" in p.stderr
    assert os.listdir(out) == ["something"]
