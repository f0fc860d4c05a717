"""GET /metrics (DESIGN §7): after a mixed workload — sessions,
execs that succeed, fail and time out, executions, errors — the exposition
passes `promtool check metrics` and its counters equal exactly what was run.
With metrics_auth on, only admin keys may scrape.

Each test runs a daemon of its own, so counters start at zero."""
import os
import re
import shutil
import subprocess

import pytest

from sbxtest import assert_error

PROFILE = "process"

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value} of every sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"not an exposition line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        key = (m.group(1), labels)
        assert key not in out, f"duplicate sample {line!r}"
        out[key] = float(m.group(4))
    return out


def sample(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def promtool_check(text):
    tool = shutil.which("promtool")
    if not tool:
        pytest.fail("promtool missing: scripts/install-deps.sh installs Debian's prometheus")
    r = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, f"promtool check metrics failed:\n{r.stdout}{r.stderr}"


def scrape(d):
    r = d.client(None).get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
    return r.text


def test_mixed_workload_counts_exactly(daemon_factory):
    d = daemon_factory().start()
    c = d.client(d.create_key("alice"))
    statuses, cpu = {}, 0.0

    def ran(res):
        nonlocal cpu
        statuses[res["status"]] = statuses.get(res["status"], 0) + 1
        cpu += res["usage"]["cpu_seconds"]

    s1 = c.new_session(PROFILE)["id"]
    s2 = c.new_session(PROFILE, limits={"timeout_s": 1})["id"]
    s3 = c.new_session(PROFILE)["id"]
    for _ in range(5):
        ran(c.exec(s1, command=["sh", "-c", "echo ok"]))
    for _ in range(3):
        ran(c.exec(s1, command=["sh", "-c", "exit 3"]))
    ran(c.exec(s2, command=["sleep", "5"]))
    ids = [c.new_execution(PROFILE, command=["true"])["id"] for _ in range(2)]
    ids.append(c.new_execution(PROFILE, command=["false"])["id"])
    for eid in ids:
        e = c.wait_execution(eid)
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
        cpu += e["usage"]["cpu_seconds"]
    assert c.delete(f"/v1/sandbox/sessions/{s3}").status_code in (200, 204)
    for _ in range(4):
        assert c.get("/v1/sandbox/sessions/ses_nope").status_code == 404
    for _ in range(2):
        assert d.client("bad").get("/v1/sandbox/sessions").status_code == 401
    assert statuses.get("succeeded") == 7 and statuses.get("failed") == 4, statuses
    assert statuses.get("timeout") == 1, statuses

    text = scrape(d)
    promtool_check(text)
    m = parse(text)
    for status, n in statuses.items():
        assert sample(m, "sandbox_executions_total", profile=PROFILE, status=status) == n, status
    total = sum(statuses.values())
    assert sum(v for (name, _), v in m.items() if name == "sandbox_executions_total") == total
    assert sample(m, "sandbox_duration_seconds_count", profile=PROFILE) == total
    assert sample(m, "sandbox_duration_seconds_bucket", profile=PROFILE, le="+Inf") == total
    # The timed-out exec ran at least its 1 s limit.
    assert sample(m, "sandbox_duration_seconds_bucket", profile=PROFILE, le="0.5") <= total - 1
    assert sample(m, "sandbox_duration_seconds_sum", profile=PROFILE) >= 1.0
    assert abs(sample(m, "sandbox_cpu_seconds_total", profile=PROFILE) - cpu) < 1e-6 * total + 1e-9
    assert sample(m, "sandbox_session_create_seconds_count", profile=PROFILE) == 3
    assert sample(m, "sandbox_sessions_active", profile=PROFILE) == 2
    assert sample(m, "sandboxd_http_requests_total", route="session_create", code="201") == 3
    assert sample(m, "sandboxd_http_requests_total", route="session_exec", code="200") == 9
    assert sample(m, "sandboxd_http_requests_total", route="execution_create", code="202") == 3
    assert sample(m, "sandboxd_http_requests_total", route="session_get", code="404") == 4
    assert sample(m, "sandboxd_http_requests_total", route="session_list", code="401") == 2
    assert sample(m, "sandboxd_http_request_duration_seconds_count", route="session_exec") == 9
    assert sample(m, "sandbox_network_decisions_total", decision="deny", proto="tcp") == 0
    # Bounded labels: route names from the table, never raw paths.
    routes = {dict(k[1]).get("route") for k in m if k[0] == "sandboxd_http_requests_total"}
    assert not any("/" in r for r in routes), routes
    # Pool gauge: one line per pooling profile, a number.
    assert all(v >= 0 for (name, _), v in m.items() if name == "sandbox_pool_idle")

    # The scrape itself is counted by the next one.
    m2 = parse(scrape(d))
    assert sample(m2, "sandboxd_http_requests_total", route="metrics", code="200") >= 1


def test_metrics_auth_switch(daemon_factory, monkeypatch):
    monkeypatch.setenv("SANDBOXD_METRICS_AUTH", "true")
    d = daemon_factory().start()
    user = d.client(d.create_key("alice"))
    admin = d.client(d.create_key("root", admin=True))
    assert_error(d.client(None).get("/metrics"), 401, "unauthenticated")
    assert_error(user.get("/metrics"), 403, "forbidden")
    r = admin.get("/metrics")
    assert r.status_code == 200 and "sandbox_executions_total" in r.text, r.text
    promtool_check(r.text)
