"""test_sdk.py — the SDKs against a real daemon: one daemon, one loopback
registry (Debian's docker-registry) holding a small python image, and the
same scripted scenario run by each SDK (scenario.py for Python,
sdk/typescript/e2e/scenario.mjs for TypeScript, sdk/go/e2e/scenario for
Go).  `make test-sdk` runs this file after each SDK's own unit tests.

The image: the host's own python3 (binary, shared libraries and the part of
the standard library the scenario uses) over a busybox-static rootfs —
a real CPython, not a stub.  It is pushed to the registry as
`library/python:3.12-slim` (the SDKs pull it through the API) and imported
into the daemon's store as `python:3.12-slim`, so the seed's example runs
verbatim on it (it is Debian's 3.11, under the name the seed uses).
Only 127.0.0.1 is ever contacted."""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import imgworld as w  # noqa: E402
from sbxtest import Daemon, build_dir, reap_leftovers, sandboxd_bin  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="images need root")

# One request every 2 s: the scenario's back-to-back calls are refused
# (Retry-After: 2) however slow the machine is, and the retries still end
# within seconds.
CONFIG = """
[tenant.ratey]
rate_limit_rps = 0.5
rate_limit_burst = 1
"""

STDLIB_DIRS = ("encodings", "collections", "importlib", "re", "json")


def python_image():
    """busybox rootfs + the host's python3 with its libraries."""
    exe = os.path.realpath(sys.executable)
    ents = w.rootfs_entries()
    ents += [("usr", "dir"), ("usr/bin", "dir"), ("lib64", "dir"), ("lib", "dir"),
             ("lib/x86_64-linux-gnu", "dir"), ("work", "dir", None, 0o1777)]
    with open(exe, "rb") as f:
        ents.append(("usr/bin/python3", "file", f.read(), 0o755))
    ents += [("usr/bin/python", "symlink", "python3")]
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    for line in ldd.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if not path.startswith("/"):
            continue
        dest = "lib64/" + os.path.basename(path) if "ld-linux" in path else \
            "lib/x86_64-linux-gnu/" + os.path.basename(path)
        with open(os.path.realpath(path), "rb") as f:
            ents.append((dest, "file", f.read(), 0o755))
    std = sysconfig.get_paths()["stdlib"]
    rel = "usr/lib/" + os.path.basename(std)
    ents += [("usr/lib", "dir"), (rel, "dir")]
    for p in sorted(glob.glob(os.path.join(std, "*.py"))):
        with open(p, "rb") as f:
            ents.append((f"{rel}/{os.path.basename(p)}", "file", f.read()))
    for d in STDLIB_DIRS:
        for root, dirs, files in os.walk(os.path.join(std, d)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            r = os.path.relpath(root, std)
            ents.append((f"{rel}/{r}", "dir"))
            for fn in sorted(files):
                if fn.endswith(".py"):
                    with open(os.path.join(root, fn), "rb") as f:
                        ents.append((f"{rel}/{r}/{fn}", "file", f.read()))
    return w.Image([ents], config={"Env": ["PATH=/usr/bin:/bin"], "WorkingDir": "/work",
                                   "Cmd": ["python3"]})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    reg = w.Registry(tmp_path_factory.mktemp("sdkreg")).start()
    img = python_image()
    ref = reg.push(img, "library/python:3.12-slim")
    cfg = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
    cfg.write(CONFIG)
    cfg.close()
    d = Daemon(tmp_path_factory.mktemp("sdkstate"), extra_args=["--config", cfg.name])
    d.start()
    layout = str(tmp_path_factory.mktemp("sdklayout"))
    img.write_layout(layout)
    subprocess.run([sandboxd_bin(), "image", "import", layout, "--name", "python:3.12-slim",
                    "--state-dir", d.state_dir], check=True, capture_output=True, timeout=300)
    env = dict(os.environ, SANDBOXD_URL=d.url, SANDBOXD_API_KEY=d.create_key("sdk-user"),
               SBX_ADMIN_KEY=d.create_key("sdk-admin", admin=True),
               SBX_RATE_KEY=d.create_key("ratey"), SBX_REGISTRY_IMAGE=ref,
               SBX_SEED_PROFILE="gvisor")
    env.pop("TRACEPARENT", None)
    yield d, env
    rc = d.stop(timeout=15)
    left = reap_leftovers(d.state_dir)
    reg.stop()
    os.unlink(cfg.name)
    assert not left, f"processes outlived the daemon: {left}"
    assert rc == 0, d.log_tail(100)


def run(argv, env, cwd=ROOT, timeout=900):
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    return p


def test_python_scenario(world):
    d, env = world
    p = run([sys.executable, os.path.join(HERE, "scenario.py")], env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + d.log_tail(40)
    assert "[python] scenario passed" in p.stdout


def built_typescript():
    ts = os.path.join(ROOT, "sdk", "typescript")
    if not shutil.which("tsc"):
        pytest.fail("tsc missing (Debian's node-typescript: scripts/install-deps.sh)")
    p = subprocess.run(["tsc", "-p", "tsconfig.json"], cwd=ts, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return ts


def test_typescript_scenario(world):
    d, env = world
    ts = built_typescript()
    p = run(["node", os.path.join(ts, "e2e", "scenario.mjs")], env, cwd=ts)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + d.log_tail(40)
    assert "[typescript] scenario passed" in p.stdout


def test_java_scenario(world, tmp_path):
    """The jar make test-sdk just built (SANDBOXD_JAVA_SDK), else one built
    here by sdk/java/build.sh; e2e/Scenario.java runs from source."""
    d, env = world
    jar = os.path.join(os.environ.get("SANDBOXD_JAVA_SDK", ""), "sandboxd-sdk.jar")
    if not os.environ.get("SANDBOXD_JAVA_SDK") or not os.path.exists(jar):
        jar = str(tmp_path / "sdk-java" / "sandboxd-sdk.jar")
        b = subprocess.run([os.path.join(ROOT, "sdk", "java", "build.sh"), os.path.dirname(jar)],
                           capture_output=True, text=True, timeout=600)
        assert b.returncode == 0, b.stdout + b.stderr
    # the jar's manifest puts Debian's Jackson jars on the class path; test-classes has Check
    cp = jar + ":" + os.path.join(os.path.dirname(jar), "test-classes")
    p = run(["java", "-cp", cp, os.path.join(ROOT, "sdk", "java", "e2e", "Scenario.java")], env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + d.log_tail(40)
    assert "[java] scenario passed" in p.stdout


def test_go_scenario(world, tmp_path):
    """sdk/go/e2e/scenario, built by tests/sdk/go.sh (offline; its caches
    under the build dir), then run like the others."""
    d, env = world
    if not shutil.which("go"):
        pytest.fail("go missing (Debian's golang-go: scripts/install-deps.sh)")
    exe = str(tmp_path / "scenario")
    p = run([os.path.join(HERE, "go.sh"), build_dir(), "build", "-o", exe, "./e2e/scenario"],
            dict(os.environ), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run([exe], env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + d.log_tail(40)
    assert "[go] scenario passed" in p.stdout
