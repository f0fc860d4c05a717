"""Tenant quotas and rate limits: live sessions, queued + running
executions, CPU-seconds per UTC day and requests per second, configured in
[server] and overridden per [tenant.NAME]; each trips with 429, the right
code, details {limit, value}, English and French, and frees up again."""
import concurrent.futures
import os
import tempfile
import time

import pytest
import requests

from sbxtest import assert_error

PROFILE = "process"  # own daemons run with the process driver enabled

CONFIG = """
[server]
quota_sessions = 2

[tenant.unlimited]
sessions = 0

[tenant.execq]
quota_executions = 1

[tenant.cpuq]
quota_cpu_seconds_per_day = 0.3

[tenant.rateq]
rate_limit_rps = 2
rate_limit_burst = 3
"""

BURN = ["python3", "-c",
        "import time\nt=time.process_time()\nwhile time.process_time()-t<0.5: pass"]


def write_config(text):
    fd, path = tempfile.mkstemp(prefix="sbx-quota-", suffix=".ini")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


@pytest.fixture
def qd(daemon_factory):
    path = write_config(CONFIG)
    d = daemon_factory(extra_args=["--config", path])
    d.start()
    yield d
    os.unlink(path)


def client(d, tenant, lang=None):
    return d.client(d.create_key(tenant), lang)


def quota_error(r, limit, value, code="quota_exceeded", lang="en"):
    e = assert_error(r, 429, code)
    assert e["details"] == {"limit": limit, "value": value}, e
    assert e["message"] == e["message_i18n"][lang]
    return e


def test_sessions_limit_trips_and_frees(qd):
    c = client(qd, "alice")
    s1 = c.new_session(PROFILE)
    c.new_session(PROFILE)
    r = c.post("/v1/sandbox/sessions", json={"profile": PROFILE})
    e = quota_error(r, "sessions", 2)
    assert "2" in e["message_i18n"]["en"] and "session" in e["message_i18n"]["en"]
    fr = c.with_lang("fr").post("/v1/sandbox/sessions", json={"profile": PROFILE})
    e = quota_error(fr, "sessions", 2, lang="fr")
    assert e["message"].startswith("Quota dépassé")
    # Another tenant has its own room.
    client(qd, "bob").new_session(PROFILE)
    # Deleting one frees room.
    assert c.delete(f"/v1/sandbox/sessions/{s1['id']}").status_code == 204
    c.new_session(PROFILE)
    quota_error(c.post("/v1/sandbox/sessions", json={"profile": PROFILE}), "sessions", 2)


def test_sessions_limit_holds_under_concurrency(qd):
    c = client(qd, "racer")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: requests.post(
            c.base + "/v1/sandbox/sessions", json={"profile": PROFILE},
            headers=c.headers(), timeout=60).status_code, range(8)))
    assert sorted(codes) == [201, 201] + [429] * 6, codes
    live = c.list_all("/v1/sandbox/sessions", "sessions", status="ready")
    assert len(live) == 2


def test_tenant_override_lifts_the_session_limit(qd):
    c = client(qd, "unlimited")
    for _ in range(4):
        c.new_session(PROFILE)


def test_executions_limit_trips_and_frees(qd):
    c = client(qd, "execq")
    first = c.new_execution(PROFILE, command=["sleep", "2"])
    r = c.post("/v1/sandbox/executions", json={"profile": PROFILE, "command": ["true"]})
    quota_error(r, "executions", 1)
    fr = c.with_lang("fr").post("/v1/sandbox/executions",
                                json={"profile": PROFILE, "command": ["true"]})
    quota_error(fr, "executions", 1, lang="fr")
    # Not counted: the refused ones never exist.
    assert len(c.list_all("/v1/sandbox/executions", "executions")) == 1
    assert c.wait_execution(first["id"])["status"] == "succeeded"
    second = c.new_execution(PROFILE, command=["true"])
    assert c.wait_execution(second["id"])["status"] == "succeeded"
    # A cancelled queued/running one frees its slot too.
    third = c.new_execution(PROFILE, command=["sleep", "30"])
    assert c.post(f"/v1/sandbox/executions/{third['id']}/cancel").status_code == 200
    c.wait_execution(third["id"])
    c.wait_execution(c.new_execution(PROFILE, command=["true"])["id"])


def test_cpu_seconds_per_day(qd, daemon_factory):
    c = client(qd, "cpuq")
    s = c.new_session(PROFILE)
    r = c.exec(s["id"], command=BURN)
    assert r["status"] == "succeeded" and r["usage"]["cpu_seconds"] >= 0.3, r
    r = c.post(f"/v1/sandbox/sessions/{s['id']}/exec", json={"command": ["true"]})
    e = quota_error(r, "cpu_seconds_per_day", 0.3)
    assert "00:00 UTC" in e["message_i18n"]["en"]
    r = c.with_lang("fr").post("/v1/sandbox/executions",
                               json={"profile": PROFILE, "command": ["true"]})
    quota_error(r, "cpu_seconds_per_day", 0.3, lang="fr")
    # Other tenants are not affected.
    other = client(qd, "carol")
    o = other.new_session(PROFILE)
    other.exec(o["id"], command=["true"])
    # What was used today survives a restart (usage records seed the counter).
    qd.stop(timeout=15)
    qd.start()
    c2 = qd.client(c.key)
    r = c2.post("/v1/sandbox/executions", json={"profile": PROFILE, "command": ["true"]})
    quota_error(r, "cpu_seconds_per_day", 0.3)


def test_cpu_counts_executions(qd):
    c = client(qd, "cpuq")
    e = c.wait_execution(c.new_execution(PROFILE, command=BURN)["id"])
    assert e["usage"]["cpu_seconds"] >= 0.3, e
    s = c.post("/v1/sandbox/sessions", json={"profile": PROFILE})
    assert s.status_code == 201  # sessions are not CPU
    r = c.post(f"/v1/sandbox/sessions/{s.json()['id']}/exec", json={"command": ["true"]})
    quota_error(r, "cpu_seconds_per_day", 0.3)


def test_rate_limit_with_retry_after(qd):
    c = client(qd, "rateq")
    other = client(qd, "alice")
    codes, limited = [], None
    for _ in range(8):
        r = c.get("/v1/sandbox/sessions")
        codes.append(r.status_code)
        if r.status_code == 429 and limited is None:
            limited = r
    assert codes[:3] == [200, 200, 200], codes  # the burst
    assert limited is not None, codes
    quota_error(limited, "requests_per_second", 2, code="rate_limited")
    retry = int(limited.headers["Retry-After"])
    assert 1 <= retry <= 2
    fr = c.with_lang("fr").get("/v1/sandbox/sessions")
    e = quota_error(fr, "requests_per_second", 2, code="rate_limited", lang="fr")
    assert "Retry-After" in fr.headers
    assert e["message"].startswith("Limite de débit")
    # The other tenant is unaffected, and health checks are never limited.
    assert other.get("/v1/sandbox/sessions").status_code == 200
    assert requests.get(qd.url + "/healthz", timeout=5).status_code == 200
    time.sleep(retry)  # the sleep is the test: Retry-After is long enough
    assert c.get("/v1/sandbox/sessions").status_code == 200


@pytest.mark.parametrize("text,needle", [
    ("[server]\nquota_sessions = -1\n", "quota_sessions"),
    ("[server]\nrate_limit_rps = fast\n", "rate_limit_rps"),
    ("[tenant.acme]\nquota_executions = 1.5\n", "quota_executions"),
    ("[tenant.acme]\nmax_cpu = 3\n", "max_cpu"),
])
def test_bad_quota_settings_stop_the_daemon(daemon_factory, text, needle):
    path = write_config(text)
    try:
        d = daemon_factory(extra_args=["--config", path])
        with pytest.raises(RuntimeError) as ei:
            d.start(timeout=20)
        assert needle in str(ei.value)
    finally:
        os.unlink(path)
