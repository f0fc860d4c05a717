"""Platform routes: /healthz, /readyz, /v1/sandbox/profiles, request ids,
unknown routes and methods; profiles' default limits and maxima."""
import glob
import hashlib
import os

from sbxtest import assert_error


def test_healthz(daemon):
    from sbxtest import Client
    r = Client(daemon.url, None).get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.headers.get("X-Request-Id")


def test_readyz(daemon):
    from sbxtest import Client
    r = Client(daemon.url, None).get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    assert "checks" in body
    # the fixture waited for the probes: none still running
    assert body["checks"]["probing"] == [], body
    assert "probing" not in body["checks"]["profiles"].values(), body


def test_request_ids_are_unique(alice):
    ids = {alice.get("/v1/sandbox/profiles").headers["X-Request-Id"] for _ in range(5)}
    assert len(ids) == 5


def test_profiles_shape(alice):
    r = alice.get("/v1/sandbox/profiles")
    assert r.status_code == 200
    body = r.json()
    names = [p["name"] for p in body["profiles"]]
    for builtin in ("container", "gvisor", "gvisor-small", "process"):
        assert builtin in names
    assert body["default"] in names
    defaults = [p["name"] for p in body["profiles"] if p["default"]]
    assert defaults == [body["default"]]
    for p in body["profiles"]:
        for k in ("name", "driver", "class", "available", "state", "reason", "capabilities",
                  "limits", "max_limits", "default_timeout_s", "pool_size", "default"):
            assert k in p, (k, p)
        for k in ("limits", "max_limits"):
            assert set(p[k]) >= {"cpu", "memory", "disk", "pids", "timeout_s", "output_bytes"}
        assert p["state"] == ("available" if p["available"] else "unavailable"), p
        assert isinstance(p["capabilities"], list)
        if p["available"]:
            assert p["reason"] is None
        else:
            assert isinstance(p["reason"], str) and p["reason"], p
    # the process driver was enabled on the command line
    by = {p["name"]: p for p in body["profiles"]}
    assert by["process"]["available"] is True


def test_profiles_shape_unavailable(no_runsc):
    """A daemon whose runsc is broken lists gvisor, unavailable, with why."""
    r = no_runsc.alice.get("/v1/sandbox/profiles")
    assert r.status_code == 200
    by = {p["name"]: p for p in r.json()["profiles"]}
    assert by["process"]["available"] is True
    for name in ("gvisor", "gvisor-small"):
        assert by[name]["available"] is False, by[name]
        assert isinstance(by[name]["reason"], str) and by[name]["reason"], by[name]


def test_process_driver_refused_without_flag(daemon_factory):
    d = daemon_factory()
    d.extra_args = []
    argv = d.argv
    d.argv = lambda: [a for a in argv() if a != "--enable-unsafe-process-driver"]
    d.start()
    key = d.create_key("alice")
    c = d.client(key)
    by = {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}
    assert by["process"]["available"] is False
    assert by["process"]["reason"]
    r = c.post("/v1/sandbox/sessions", json={"profile": "process"})
    assert_error(r, 503, "runtime_unavailable")
    assert d.stop() == 0


def test_unknown_route_and_method(alice):
    assert_error(alice.get("/v1/sandbox/nothing-here"), 404, "not_found")
    r = alice.delete("/v1/sandbox/profiles")
    assert r.status_code == 405, r.text
    assert_error(r, 405, "method_not_allowed")


def test_dotdot_in_url_is_not_routed(alice):
    # requests would normalise dot segments: send the raw path
    import requests
    req = requests.Request("GET", alice.base + "/v1/sandbox/sessions/x/../y",
                           headers=alice.headers()).prepare()
    req.url = alice.base + "/v1/sandbox/sessions/x/../y"
    r = alice.s.send(req, timeout=10)
    assert r.status_code in (400, 404), r.text


# ---- default limits and maxima ---------------------------------------------

UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50}


def qty(s):
    for u, m in UNITS.items():
        if s.endswith(u):
            return int(s[:-2]) * m
    return int(s)


def millicores(s):
    return int(s[:-1]) if s.endswith("m") else int(float(s) * 1000)


def test_profile_maxima_follow_the_host(profile_table):
    """Built-in maxima: every online CPU, half the RAM (whole MiB), a
    quarter of it for the tmpfs-backed disk; the defaults stay modest."""
    ncpu = os.sysconf("SC_NPROCESSORS_ONLN")
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    c = profile_table["container"]
    assert c["limits"] == {"cpu": "1", "memory": "512Mi", "disk": "256Mi", "pids": 256,
                           "timeout_s": 30, "output_bytes": 1 << 20}, c
    m = c["max_limits"]
    assert millicores(m["cpu"]) == ncpu * 1000, m
    assert qty(m["memory"]) == (ram // 2) & ~((1 << 20) - 1), m
    assert qty(m["disk"]) == (ram // 4) & ~((1 << 20) - 1), m
    assert m["pids"] == 4096 and m["timeout_s"] == 3600 and m["output_bytes"] == 16 << 20, m
    for p in profile_table.values():
        d, x = p["limits"], p["max_limits"]
        assert millicores(d["cpu"]) <= millicores(x["cpu"]), p
        for k in ("memory", "disk"):
            assert qty(d[k]) <= qty(x[k]), (k, p)
        for k in ("pids", "timeout_s", "output_bytes"):
            assert d[k] <= x[k], (k, p)
    # gvisor-small keeps its small ceiling: that is what it is for
    small = profile_table["gvisor-small"]["max_limits"]
    assert small["memory"] == "256Mi" and small["cpu"] == "500m", small


def cgroup_files(state_dir, name):
    """Control files `name` of the container driver's sandbox cgroups of
    the daemon on state_dir (v1 or v2)."""
    parent = os.environ.get("SANDBOXD_CGROUP_PARENT") or \
        "sandboxd-" + hashlib.blake2b(state_dir.encode(), digest_size=8).hexdigest()
    return glob.glob(f"/sys/fs/cgroup/**/{parent}/*/{name}", recursive=True)


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def test_session_may_ask_above_the_default(daemon, fresh_tenant, profile_table):
    """On a default install 1 GiB and 2 CPUs (when the host has them) are
    accepted, and the sandbox's cgroup really gets them."""
    if not profile_table["container"]["available"]:
        import pytest
        pytest.skip(profile_table["container"]["reason"])
    cpus = 2 if os.sysconf("SC_NPROCESSORS_ONLN") >= 2 else 1
    s = fresh_tenant.new_session("container", limits={"memory": "1Gi", "cpu": str(cpus)})
    try:
        assert s["limits"]["memory"] == "1Gi" and s["limits"]["cpu"] == str(cpus), s
        v1 = cgroup_files(daemon.state_dir, "memory.limit_in_bytes")
        mems = v1 or cgroup_files(daemon.state_dir, "memory.max")
        # the session's cgroup, and the warm ones built after it (they take
        # the memory and CPU of the last request the pool served)
        mine = [os.path.dirname(f) for f in mems if read(f) == str(1 << 30)]
        assert len(mine) >= 1, mems
        for leaf in map(os.path.basename, mine):
            if v1:
                quotas = [f for f in cgroup_files(daemon.state_dir, "cpu.cfs_quota_us")
                          if os.path.basename(os.path.dirname(f)) == leaf]
                assert [read(f) for f in quotas] == [str(cpus * 100000)], quotas
        if not v1:
            for d in mine:
                assert read(os.path.join(d, "cpu.max")) == f"{cpus * 100000} 100000"
        r = fresh_tenant.exec(s["id"], command=["true"])
        assert r["status"] == "succeeded", r
    finally:
        fresh_tenant.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_above_the_maximum_is_400(fresh_tenant, profile_table):
    m = profile_table["container"]["max_limits"]
    over = f"{qty(m['memory']) // (1 << 20) + 1}Mi"
    r = fresh_tenant.post("/v1/sandbox/sessions",
                          json={"profile": "container", "limits": {"memory": over}})
    e = assert_error(r, 400, "invalid_request", field="limits.memory")
    assert m["memory"] in e["message"], e
    r = fresh_tenant.post("/v1/sandbox/executions",
                          json={"profile": "container", "command": ["true"],
                                "limits": {"pids": m["pids"] + 1}})
    assert_error(r, 400, "invalid_request", field="limits.pids")
    assert fresh_tenant.get("/v1/sandbox/sessions").json()["sessions"] == []


def test_config_file_defaults_and_maxima(daemon_factory, tmp_path):
    """Per-profile defaults (the old keys) and maxima (max_*) from the file."""
    conf = tmp_path / "sandboxd.conf"
    conf.write_text("[profile.roomy]\ndriver = container\nmemory = 128Mi\nmax_memory = 300Mi\n"
                    "cpu = 250m\nmax_cpu = 750m\nmax_pids = 100\npool_size = 0\n"
                    "[profile.legacy]\ndriver = container\npids = 9000\npool_size = 0\n")
    d = daemon_factory(extra_args=["--config", str(conf)])
    d.start()
    c = d.client(d.create_key("roomy"))
    by = {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}
    p = by["roomy"]
    assert p["limits"]["memory"] == "128Mi" and p["limits"]["cpu"] == "250m", p
    assert p["max_limits"]["memory"] == "300Mi" and p["max_limits"]["cpu"] == "750m", p
    assert p["max_limits"]["pids"] == 100 and p["limits"]["pids"] == 100, p
    # an old-style value above the built-in maximum stays allowed
    assert by["legacy"]["limits"]["pids"] == 9000 == by["legacy"]["max_limits"]["pids"]
    r = c.post("/v1/sandbox/sessions", json={"profile": "roomy", "limits": {"memory": "400Mi"}})
    e = assert_error(r, 400, "invalid_request", field="limits.memory")
    assert "300Mi" in e["message"], e
    r = c.post("/v1/sandbox/sessions", json={"profile": "roomy", "limits": {"cpu": "1"}})
    assert_error(r, 400, "invalid_request", field="limits.cpu")
    if p["available"]:
        s = c.new_session("roomy")
        assert s["limits"]["memory"] == "128Mi", s
        c.delete(f"/v1/sandbox/sessions/{s['id']}")
        s = c.new_session("roomy", limits={"memory": "256Mi"})
        assert s["limits"]["memory"] == "256Mi", s
        c.delete(f"/v1/sandbox/sessions/{s['id']}")
    assert d.stop() == 0
