"""The driver seam seen from outside (docs/architecture.md, "The driver
seam"): the `sandbox_pool_idle` gauge is each pooling driver's own count
(gvisor's pool, not the container pool asked under a gvisor profile's
name), and driver settings given in the config file's `[driver]` section
reach the drivers with nothing in the environment.

The gvisor cases need a working runsc (SANDBOXD_RUNSC, or runsc on PATH);
they skip without one unless SANDBOXD_TEST_REQUIRE_PROFILES=1."""
import glob
import os
import re
import tempfile

import pytest

from conftest import REAL_RUNSC
from sbxtest import Daemon, wait_until

SAMPLE = re.compile(r'^sandbox_pool_idle\{profile="([^"]+)"\} (\S+)$', re.M)

# Driver settings the test run's own environment may carry: blanked, so
# that only the config file can give them (config.c skips empty values).
DRIVER_ENV = ("SANDBOXD_POOL_SIZE", "SANDBOXD_GVISOR_POOL_SIZE", "SANDBOXD_GVISOR_PLATFORM",
              "SANDBOXD_CGROUP_PARENT", "SANDBOXD_UID_BASE", "SANDBOXD_UID_SLOTS",
              "SANDBOXD_OVERLAY_LAYERS")


def pool_idle(d):
    """{profile: idle} from GET /metrics."""
    r = d.client(None).get("/metrics")
    assert r.status_code == 200, r.text
    return {p: float(v) for p, v in SAMPLE.findall(r.text)}


def profiles(d):
    c = d.client(d.create_key("seam"))
    return {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}


def need(profile_row):
    if profile_row["available"]:
        return
    if os.environ.get("SANDBOXD_TEST_REQUIRE_PROFILES") == "1":
        pytest.fail(f"{profile_row['name']} unavailable: {profile_row['reason']}")
    pytest.skip(f"{profile_row['name']} unavailable here: {profile_row['reason']}")


def config_daemon(daemon_factory, text, env=None):
    path = os.path.join(tempfile.mkdtemp(prefix="sbx-seam-cfg-"), "sandboxd.ini")
    with open(path, "w") as f:
        f.write(text)
    blank = {k: "" for k in DRIVER_ENV}
    return daemon_factory(extra_args=["--config", path], env=dict(blank, **(env or {})))


def bundles(d):
    """The gvisor pool's idle sandboxes on disk (one bundle dir each)."""
    return glob.glob(os.path.join(d.state_dir, "gvisor", "gvp_*"))


def test_pool_idle_gauge_reports_the_gvisor_pool(daemon_factory):
    """A gvisor profile's gauge is the gvisor pool's idle count: it reaches
    the pool size (it read 0 whatever the pool held while the core asked
    the container pool)."""
    d = daemon_factory(env={"SANDBOXD_RUNSC": REAL_RUNSC, "SANDBOXD_GVISOR_POOL_SIZE": "1",
                            "SANDBOXD_POOL_SIZE": "0"}).start()
    table = profiles(d)
    need(table["gvisor"])
    # prewarmed at start: one idle sandbox per gvisor profile
    wait_until(lambda: len(bundles(d)) >= 2, 120, interval=0.2, what="gvisor pool filled")
    got = wait_until(lambda: (lambda g: g if g.get("gvisor") == 1 and g.get("gvisor-small") == 1
                              else None)(pool_idle(d)), 60, interval=0.2,
                     what="sandbox_pool_idle of the gvisor profiles = 1")
    # the container pool is off: its gauge says so, and says it apart
    assert got.get("container", 0) == 0, got
    # a session takes the idle sandbox of its profile: the gauge follows
    c = d.client(d.create_key("gvpool"))
    s = c.new_session("gvisor")
    try:
        wait_until(lambda: pool_idle(d).get("gvisor-small") == 1, 30, what="gvisor-small kept")
        # refilled behind the hand-over, and reported again
        wait_until(lambda: pool_idle(d).get("gvisor") == 1, 120, interval=0.2,
                   what="gvisor pool refilled")
    finally:
        assert c.delete(f"/v1/sandbox/sessions/{s['id']}").status_code == 204


def test_gvisor_settings_from_the_config_file(daemon_factory):
    """[driver] gvisor_platform and gvisor_pool_size with nothing in the
    environment: the driver runs on that platform (and says why) and keeps
    that many idle sandboxes per profile."""
    d = config_daemon(daemon_factory, "[driver]\ngvisor_platform = ptrace\n"
                      "gvisor_pool_size = 2\ncontainer_pool_size = 0\n",
                      env={"SANDBOXD_RUNSC": REAL_RUNSC}).start()
    g = profiles(d)["gvisor"]
    need(g)
    assert g["platform"] == "ptrace", g
    assert "gvisor_platform" in g["platform_note"], g
    # 2 per profile (the built-in default is 1), the gauge counting them
    wait_until(lambda: pool_idle(d).get("gvisor") == 2, 180, interval=0.2,
               what="2 idle gvisor sandboxes")


def test_container_settings_from_the_config_file(daemon_factory):
    """[driver] cgroup_parent with nothing in the environment: the
    container driver puts its sandboxes' cgroups under that parent; and
    container_pool_size gives the pool its size (the gauge counts it)."""
    parent = f"sbx-seam-{os.getpid()}"
    d = config_daemon(daemon_factory, f"[driver]\ncgroup_parent = {parent}\n"
                      "container_pool_size = 1\n").start()
    table = profiles(d)
    need(table["container"])
    wait_until(lambda: pool_idle(d).get("container") == 1, 60, interval=0.2,
               what="1 idle container sandbox")
    c = d.client(d.create_key("seam"))
    s = c.new_session("container")
    try:
        # the session's leaf (a pooled one has a pool name) under that parent
        leaves = glob.glob(f"/sys/fs/cgroup/**/{parent}/*/", recursive=True)
        assert leaves, f"no cgroup under {parent}"
    finally:
        assert c.delete(f"/v1/sandbox/sessions/{s['id']}").status_code == 204


def test_bad_driver_setting_is_refused_at_start(daemon_factory):
    """A value the drivers could not use stops the daemon at start, naming
    the setting, rather than running with a silent default."""
    d = config_daemon(daemon_factory, "[driver]\ngvisor_pool_size = lots\n")
    with pytest.raises(RuntimeError, match=r"gvisor_pool_size"):
        d.start(timeout=30)
    d2 = config_daemon(daemon_factory, "[driver]\ncgroup_parent = ../escape\n")
    with pytest.raises(RuntimeError, match=r"cgroup_parent"):
        d2.start(timeout=30)
