"""conftest.py — fixtures of the integration suite.

- `daemon`: one real sandboxd for the whole run (temp state dir, free port,
  process driver enabled, JSON logs); stopped with SIGTERM at the end, and
  it must exit 0 within 10 s.
- `alice`, `bob`, `admin`: clients with keys of those tenants.
- `profile`: parametrized over the usable profiles among process and
  container (env SANDBOXD_TEST_PROFILES=process,container restricts them;
  SANDBOXD_TEST_PROFILES=gvisor runs the suite against gVisor, see
  docs/testing.md; SANDBOXD_TEST_REQUIRE_PROFILES=1 or CI=true makes an
  unavailable wanted profile a failure instead of a skip).  Unless gvisor is asked for, the daemons of the run get
  SANDBOXD_RUNSC=/nonexistent/…, so gvisor is the suite's fail-closed
  example of an unavailable profile (test_gvisor.py starts its own daemons
  with the real runsc).
- `gvisor_gap(reason)`: a known gap of the gvisor driver, xfail(strict) there;
  `microvm_gap(reason)` the same for the microvm driver (class dedicated-kernel).
- `capable(cap)`: the run's profile if it offers session capability cap,
  else a skip with the reason.
- `daemon_factory`: function-scoped daemons of their own, for kill -9 and
  restarts (`env=` overrides the environment of that daemon only).
- `no_runsc`: a daemon of its own whose SANDBOXD_RUNSC is broken, whatever
  the run's profiles: the fail-closed example of an unavailable profile
  (gvisor) for the tests about unavailability, so they hold in a
  SANDBOXD_TEST_PROFILES=gvisor run too.
- `wanted_gvisor()`: whether this run tests gvisor; `is_gvisor(profile)`;
  `wanted_microvm()`, `is_microvm(profile)` likewise for microvm and kata.
"""
import os
import shutil
import tempfile

import pytest

import sbxpg
from sbxtest import Daemon, reap_leftovers

CANDIDATE_PROFILES = ["process", "container"]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: restarts its own daemon (kill -9, SIGTERM); "
                            "deselect with -m 'not slow'")


def wanted_profiles():
    env = os.environ.get("SANDBOXD_TEST_PROFILES")
    if not env:
        return CANDIDATE_PROFILES
    return [p.strip() for p in env.split(",") if p.strip()]


def require_profiles():
    """A wanted profile that is unavailable fails instead of skipping: asked
    for (make test-gvisor), and always in CI, where a wall that cannot be
    built must not pass with no attack tried."""
    return bool(os.environ.get("SANDBOXD_TEST_REQUIRE_PROFILES")) or \
        os.environ.get("CI") == "true"


def wanted_gvisor():
    return any(is_gvisor(p) for p in wanted_profiles())


def is_gvisor(profile):
    """Profiles of the gvisor driver (user-space kernel): gvisor, gvisor-small."""
    return profile.startswith("gvisor")


NO_RUNSC = "/nonexistent/runsc-not-wanted-by-this-test-run"
# Remembered before the override below, for test_gvisor.py's own daemons.
REAL_RUNSC = os.environ.get("SANDBOXD_RUNSC", "runsc")
if not wanted_gvisor():
    os.environ.setdefault("SANDBOXD_RUNSC", NO_RUNSC)


def wanted_microvm():
    return any(is_microvm(p) for p in wanted_profiles())


def is_microvm(profile):
    """Profiles of the microvm driver (dedicated kernel): microvm, kata."""
    return profile in ("microvm", "kata")


# A microVM probe boots a guest (seconds of CPU under TCG): only the runs
# that test the driver pay for it; the others see it unavailable at once.
if wanted_microvm():
    os.environ.setdefault("SANDBOXD_MICROVM_ACCEL", "tcg")
else:
    os.environ.setdefault("SANDBOXD_MICROVM_ACCEL", "off")


def wanted_wasm():
    return "wasm" in wanted_profiles()


# Every daemon keeps wasm sandboxes warm, each with a Node runner: only the
# runs that test the driver pay for them; the others see it unavailable.
NO_WASM_NODE = "/nonexistent/node-not-wanted-by-this-test-run"
if not wanted_wasm():
    os.environ.setdefault("SANDBOXD_WASM_NODE", NO_WASM_NODE)


@pytest.fixture(scope="session", autouse=True)
def test_database():
    """SANDBOXD_TEST_DATABASE=postgres: every daemon gets its own database
    on one temporary PostgreSQL (sbxpg.py), removed at the end."""
    yield
    sbxpg.stop_test_server()


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("state"))
    d.start()
    yield d
    rc = d.stop(timeout=10)
    if rc != 0:
        print(d.log_tail(200))
    left = reap_leftovers(d.state_dir)
    assert not left, f"processes outlived the daemon's clean shutdown: {left}"
    assert rc == 0, f"sandboxd did not exit 0 within 10 s of SIGTERM (rc={rc})"


@pytest.fixture(scope="session")
def keys(daemon):
    return {
        "alice": daemon.create_key("alice"),
        "bob": daemon.create_key("bob"),
        "admin": daemon.create_key("root", admin=True),
    }


@pytest.fixture(scope="session")
def alice(daemon, keys):
    return daemon.client(keys["alice"])


@pytest.fixture(scope="session")
def bob(daemon, keys):
    return daemon.client(keys["bob"])


@pytest.fixture(scope="session")
def admin(daemon, keys):
    return daemon.client(keys["admin"])


@pytest.fixture
def fresh_tenant(daemon):
    """A client of a brand-new tenant (lists start empty)."""
    import uuid
    return daemon.client(daemon.create_key("t" + uuid.uuid4().hex[:12]))


@pytest.fixture(scope="session")
def profile_table(alice):
    r = alice.get("/v1/sandbox/profiles")
    assert r.status_code == 200, r.text
    return {p["name"]: p for p in r.json()["profiles"]}


@pytest.fixture(params=wanted_profiles())
def profile(request, profile_table):
    name = request.param
    p = profile_table.get(name)
    if p is None or not p["available"]:
        why = "not offered by this daemon" if p is None else f"unavailable: {p.get('reason')}"
        if require_profiles():
            pytest.fail(f"profile {name} {why} (SANDBOXD_TEST_REQUIRE_PROFILES or CI=true)")
        pytest.skip(f"profile {name} {why}")
    return name


@pytest.fixture
def capable(profile, profile_table):
    """For the tests of one session capability (terminal, watch, contexts,
    upstream, archive): capable(cap) is the run's `profile` if it has cap,
    else the test skips with the reason — so these tests run on every
    wanted profile that offers the capability (container, gvisor)."""
    def need(cap):
        if cap not in profile_table[profile]["capabilities"]:
            pytest.skip(f"profile {profile} lacks the {cap} capability")
        return profile
    return need


@pytest.fixture
def gvisor_gap(request, profile, profile_table):
    """gvisor_gap(reason): the case is a known, reported gap of the gvisor
    driver (docs/testing.md): on a user-space-kernel profile it runs as
    xfail(strict) — it must fail, and once fixed the XPASS fails the run so
    the mark goes.  Elsewhere it changes nothing."""
    def mark(reason):
        if profile_table[profile]["class"] == "user-space-kernel":
            request.applymarker(pytest.mark.xfail(strict=True, reason="gvisor gap: " + reason))
    return mark


@pytest.fixture
def microvm_gap(request, profile, profile_table):
    """microvm_gap(reason): a known, reported gap of the microvm driver
    (docs/testing.md, "The microvm run"): xfail(strict) on a
    dedicated-kernel profile (microvm, kata), nothing elsewhere."""
    def mark(reason):
        if profile_table[profile]["class"] == "dedicated-kernel":
            request.applymarker(pytest.mark.xfail(strict=True, reason="microvm gap: " + reason))
    return mark


@pytest.fixture
def any_profile(profile_table):
    """One usable profile, for tests whose subject is not the driver."""
    for name in wanted_profiles():
        p = profile_table.get(name)
        if p and p["available"]:
            return name
    pytest.skip("no usable profile")


@pytest.fixture
def session(alice, profile):
    s = alice.new_session(profile)
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


@pytest.fixture
def daemon_factory(request):
    """Builds daemons on temp state dirs; each is SIGTERM'd (then killed)
    at the end of the test and its log printed if the test failed."""
    made = []
    dirs = []
    request.node._sbx_daemons = made

    def make(state_dir=None, extra_args=(), env=None):
        if state_dir is None:
            state_dir = tempfile.mkdtemp(prefix="sbx-it-")
            dirs.append(state_dir)
        d = Daemon(state_dir, extra_args, env)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.alive():
            d.stop(timeout=10)
            d.kill9()
    for state in {d.state_dir for d in made}:
        left = reap_leftovers(state)
        if left:
            print(f"WARNING: processes left behind by the daemon on {state}: {left} (killed)")
    for p in dirs:
        shutil.rmtree(p, ignore_errors=True)


class NoRunsc:
    """A daemon with a broken SANDBOXD_RUNSC and a key of tenant alice."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.key = daemon.create_key("alice")
        self.alice = daemon.client(self.key)


@pytest.fixture(scope="session")
def no_runsc(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("norunsc"), env={"SANDBOXD_RUNSC": NO_RUNSC})
    d.start()
    yield NoRunsc(d)
    rc = d.stop(timeout=10)
    left = reap_leftovers(d.state_dir)
    assert not left, f"processes outlived the daemon's clean shutdown: {left}"
    assert rc == 0, f"sandboxd (no runsc) did not exit 0 within 10 s of SIGTERM (rc={rc})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, append the daemon logs the test used to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    logs = []
    d = item.funcargs.get("daemon")
    if isinstance(d, Daemon):
        logs.append(("shared daemon", d.log_tail(60)))
    nr = item.funcargs.get("no_runsc")
    if isinstance(nr, NoRunsc):
        logs.append(("no-runsc daemon", nr.daemon.log_tail(60)))
    for i, d in enumerate(getattr(item, "_sbx_daemons", [])):
        logs.append((f"own daemon #{i} {d.state_dir}", d.log_tail(60)))
    for title, text in logs:
        rep.sections.append((f"sandboxd log ({title})", text))

