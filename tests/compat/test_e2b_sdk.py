"""test_e2b_sdk.py — sandboxd's E2B-compatible surface, driven by the real
`e2b` 2.51.0 and `@e2b/code-interpreter` 2.8.0 npm packages (pinned in
package-lock.json, installed with `npm ci`), unmodified, against a real
daemon; plus bad input sent by hand, which must get E2B's error shapes and
lose nothing.

The node scripts are in e2b/*.test.mjs (node:test).  This file starts the
daemon, makes keys for two tenants and runs them with E2B_API_URL and
E2B_SANDBOX_URL taken from GET /v1/compat/e2b.  The gvisor run is a subset
(commands, files, runCode) on a template the operator mapped to the gvisor
profile; it skips when runsc is unavailable here.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import pytest
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import sbxtest  # noqa: E402

NODE_TIMEOUT = 600
GVISOR_SUBSET = ("commands.run|files: write|binary|runCode: state|runCode streams|getMetrics|"
                 "another tenant")


@pytest.fixture(scope="module")
def node_modules():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed for the SDK tests")
    lock = os.path.join(HERE, "package-lock.json")
    mark = os.path.join(HERE, "node_modules", ".package-lock.json")
    if not os.path.exists(mark) or os.path.getmtime(mark) < os.path.getmtime(lock):
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm ci failed:\n{r.stdout}\n{r.stderr}"
    return os.path.join(HERE, "node_modules")


def start_daemon(tmp_path_factory, name, env, extra=()):
    d = sbxtest.Daemon(tmp_path_factory.mktemp(name), extra_args=list(extra), env=env)
    d.start()
    return d


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = start_daemon(tmp_path_factory, "e2b", {"SANDBOXD_RUNSC": "/nonexistent/runsc"},
                     ["--max-body", "1Mi"])
    yield d
    d.stop()


@pytest.fixture(scope="module")
def keys(daemon):
    return {"alice": daemon.create_key("alice"), "bob": daemon.create_key("bob")}


def discovery(daemon):
    r = requests.get(daemon.url + "/v1/compat/e2b", timeout=30)
    assert r.status_code == 200
    return r.json()


def run_sdk(daemon, keys, env_extra=None, pattern=None, script="workflows.test.mjs"):
    urls = discovery(daemon)
    env = dict(os.environ, E2B_API_URL=urls["api_url"], E2B_SANDBOX_URL=urls["sandbox_url"],
               E2B_API_KEY=keys["alice"], SBX_BOB_KEY=keys["bob"], **(env_extra or {}))
    env.pop("E2B_DEBUG", None)
    env.pop("E2B_DOMAIN", None)
    argv = ["node", "--test", "--test-concurrency=1", "--test-reporter=spec"]
    if pattern:
        argv.append(f"--test-name-pattern={pattern}")
    argv.append(os.path.join("e2b", script))
    r = subprocess.run(argv, cwd=HERE, env=env, capture_output=True, text=True,
                       timeout=NODE_TIMEOUT)
    assert r.returncode == 0, (f"the E2B SDK workflows failed:\n{r.stdout[-20000:]}\n"
                               f"{r.stderr[-5000:]}\n--- daemon log ---\n{daemon.log_tail(60)}")
    return r.stdout


def test_discovery_gives_absolute_urls(daemon):
    urls = discovery(daemon)
    assert urls["api_url"] == daemon.url.replace("127.0.0.1", "127.0.0.1") + "/e2b/api"
    assert urls["sandbox_url"] == daemon.url + "/e2b/envd"


def passed(out):
    m = re.search(r"^ℹ pass (\d+)$", out, re.M)
    return int(m.group(1)) if m else 0


def test_sdk_workflows_container(daemon, keys, node_modules):
    out = run_sdk(daemon, keys)
    assert passed(out) >= 22, out
    # the same audit trail as our own API: who created, deleted, ran what
    admin = daemon.create_key("ops", admin=True)
    events = requests.get(daemon.url + "/v1/audit", params={"limit": 1000}, timeout=30,
                          headers={"Authorization": "Bearer " + admin}).json()["events"]
    routes = {(e["action"], (e.get("details") or {}).get("route")) for e in events}
    for want in [("sandbox.session.create", "e2b_create"), ("sandbox.session.delete", "e2b_kill"),
                 ("sandbox.execute", "e2b_proc_start"), ("sandbox.files.write", "e2b_files_write"),
                 ("sandbox.context.run", "e2b_execute")]:
        assert want in routes, (want, sorted(routes))


@pytest.fixture(scope="module")
def gvisor_daemon(tmp_path_factory):
    runsc = os.environ.get("SANDBOXD_RUNSC", "runsc")
    # make test-gvisor's rule: a wanted gvisor that is unavailable fails
    unavailable = pytest.fail if os.environ.get("SANDBOXD_TEST_REQUIRE_PROFILES") == "1" \
        or os.environ.get("CI") == "true" else pytest.skip
    if not shutil.which(runsc):
        unavailable("runsc is not installed")
    d = start_daemon(tmp_path_factory, "e2b-gvisor", {"SANDBOXD_RUNSC": runsc},
                     ["--e2b-templates", "walled=gvisor"])
    profiles = requests.get(d.url + "/v1/sandbox/profiles", timeout=30,
                            headers={"Authorization": "Bearer " + d.create_key("probe")}).json()
    g = [p for p in profiles.get("profiles", []) if p.get("name") == "gvisor"]
    if not g or not g[0].get("available"):
        d.stop()
        unavailable("the gvisor profile is unavailable here")
    yield d
    d.stop()


def test_sdk_workflows_gvisor_subset(gvisor_daemon, node_modules):
    keys = {"alice": gvisor_daemon.create_key("alice"), "bob": gvisor_daemon.create_key("bob")}
    out = run_sdk(gvisor_daemon, keys, {"SBX_E2B_TEMPLATE": "walled"}, GVISOR_SUBSET)
    assert passed(out) >= 8, out
    sessions = requests.get(gvisor_daemon.url + "/v1/sandbox/sessions", timeout=30,
                            headers={"Authorization": "Bearer " + keys["alice"]}).json()
    assert all(s["runtime"] == "gvisor" for s in sessions["sessions"])


# ---- a template mapped to an image (NAME=PROFILE:IMAGE) ----

def test_template_mapped_to_an_image(tmp_path_factory, node_modules):
    """The operator's `tiny=container:<ref>` mapping, through the real SDK:
    the image is a busybox rootfs (tests/integration/imgworld.py) pushed to
    a docker-registry on loopback, pulled by the daemon on first use, so the
    test needs no network.  E2B's SDK runs commands as `/bin/bash -l -c`, so
    the image carries a /bin/bash that hands them to busybox sh."""
    if os.geteuid() != 0:
        pytest.skip("images need root")
    if not shutil.which("docker-registry") or not shutil.which("skopeo"):
        pytest.fail("docker-registry and skopeo are needed (make deps), as for the image tests")
    import imgworld as w
    marker = "sbxtiny"
    layer = w.rootfs_entries({"etc/os-release": f'ID={marker}\nNAME="sandboxd test image"\n',
                              "only-in-image.txt": f"{marker}\n"})
    layer += [("bin/bash", "file", '#!/bin/sh\nexec /bin/busybox sh "$@"\n', 0o755),
              ("work", "dir", None, 0o1777)]
    reg = w.Registry(tmp_path_factory.mktemp("e2b-reg")).start()
    d = None
    try:
        ref = reg.push(w.Image([layer], config={"Env": ["PATH=/bin"], "User": ""}), "tests/tiny:1")
        d = start_daemon(tmp_path_factory, "e2b-image", {"SANDBOXD_RUNSC": "/nonexistent/runsc"},
                         ["--e2b-templates", f"tiny=container:{ref}"])
        keys = {"alice": d.create_key("alice"), "bob": d.create_key("bob")}
        out = run_sdk(d, keys, {"SBX_E2B_TEMPLATE": "tiny", "SBX_IMAGE_MARKER": marker,
                                "SBX_IMAGE_REF": ref, "SBX_URL": d.url},
                      script="template_image.test.mjs")
        assert passed(out) == 1, out
        # both creates went through the E2B route, audited like ours
        admin = d.create_key("ops", admin=True)
        events = requests.get(d.url + "/v1/audit", params={"limit": 1000}, timeout=30,
                              headers={"Authorization": "Bearer " + admin}).json()["events"]
        created = [e for e in events if e["action"] == "sandbox.session.create"
                   and (e.get("details") or {}).get("route") == "e2b_create"]
        assert len(created) == 2, created
    finally:
        if d:
            d.stop()
        reg.stop()


# ---- bad input: E2B's shapes, nothing lost ----

def api(daemon, key, method, path, **kw):
    h = kw.pop("headers", {})
    if key:
        h["X-API-Key"] = key
    return requests.request(method, daemon.url + "/e2b/api" + path, headers=h, timeout=60, **kw)


def envd(daemon, sid, token, method, path, **kw):
    h = kw.pop("headers", {})
    h.update({"E2b-Sandbox-Id": sid, "X-Access-Token": token} if token else {"E2b-Sandbox-Id": sid})
    return requests.request(method, daemon.url + "/e2b/envd" + path, headers=h, timeout=60, **kw)


def frames(body):
    out, i = [], 0
    while i + 5 <= len(body):
        flags, n = body[i], struct.unpack(">I", body[i + 1:i + 5])[0]
        out.append((flags, json.loads(body[i + 5:i + 5 + n])))
        i += 5 + n
    assert i == len(body), "trailing bytes after the last envelope"
    return out


def envelope(msg):
    b = json.dumps(msg).encode()
    return b"\0" + struct.pack(">I", len(b)) + b


def sessions_of(daemon, key):
    r = requests.get(daemon.url + "/v1/sandbox/sessions", timeout=30,
                     headers={"Authorization": "Bearer " + key})
    return [s["id"] for s in r.json()["sessions"] if s["status"] == "ready"]


@pytest.fixture()
def sandbox(daemon, keys):
    r = api(daemon, keys["alice"], "POST", "/v2/sandboxes", json={"templateID": "base"})
    assert r.status_code == 201, r.text
    sb = r.json()
    yield sb
    api(daemon, keys["alice"], "DELETE", f"/sandboxes/{sb['sandboxID']}")


def test_control_plane_errors_have_e2b_shape(daemon, keys):
    before = sessions_of(daemon, keys["alice"])
    cases = [
        (None, "POST", "/v2/sandboxes", {"json": {}}, 401),
        ("sbx_knot_a_key", "POST", "/v2/sandboxes", {"json": {}}, 401),
        (keys["alice"], "POST", "/v2/sandboxes", {"data": b"{not json"}, 400),
        (keys["alice"], "POST", "/v2/sandboxes", {"json": {"templateID": 5}}, 400),
        (keys["alice"], "POST", "/v2/sandboxes", {"json": {"timeout": -3}}, 400),
        (keys["alice"], "POST", "/v2/sandboxes", {"json": {"envVars": {"A": 1}}}, 400),
        (keys["alice"], "POST", "/v2/sandboxes", {"json": {"templateID": "nope"}}, 404),
        (keys["alice"], "POST", "/v2/sandboxes", {"json": {"volumeMounts": [{"name": "v"}]}},
         405),
        (keys["alice"], "GET", "/sandboxes/ses_doesnotexist", {}, 404),
        (keys["alice"], "POST", "/sandboxes/ses_doesnotexist/timeout", {"json": {"timeout": 5}},
         404),
        (keys["alice"], "GET", "/sandboxes/ses_doesnotexist/metrics", {}, 404),
        (keys["alice"], "GET", "/sandboxes/ses_doesnotexist/metrics",
         {"params": {"start": "yesterday"}}, 400),
        (keys["alice"], "GET", "/sandboxes/ses_doesnotexist/metrics",
         {"params": {"start": 20, "end": 10}}, 400),
        (keys["alice"], "GET", "/no/such/route", {}, 404),
        (keys["alice"], "PUT", "/v2/sandboxes", {}, 405),
        (keys["alice"], "POST", "/v3/templates", {"json": {}}, 405),
        (keys["alice"], "POST", "/v2/sandboxes",
         {"data": b"x" * (2 << 20), "headers": {"Content-Type": "application/json"}}, 413),
    ]
    for key, method, path, kw, status in cases:
        r = api(daemon, key, method, path, **kw)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        body = r.json()
        assert body["code"] == status and isinstance(body["message"], str) and body["message"], \
            (path, body)
        assert "error" not in body, "our own envelope leaked into the E2B surface"
    assert sessions_of(daemon, keys["alice"]) == before, "a refused create left a session"


def test_refused_calls_answer_at_once_in_e2b_shape(daemon, keys, sandbox):
    """resume (the route older SDKs call; 2.51 resumes through connect),
    snapshots, fork, network and /volumes: E2B's {code, message}, a message
    naming the call and why, in well under a second, nothing made."""
    sid = sandbox["sandboxID"]
    before = sessions_of(daemon, keys["alice"])
    cases = [
        ("POST", f"/sandboxes/{sid}/resume", {"json": {"timeout": 60}}, 405, "resuming a sandbox"),
        ("POST", f"/sandboxes/{sid}/snapshots", {"json": {"name": "s"}}, 405, "snapshots"),
        ("GET", "/snapshots", {"params": {"sandboxID": sid}}, 405, "snapshots"),
        ("DELETE", "/templates/snap_x", {}, 404, "snapshot or template not found"),
        ("POST", f"/sandboxes/{sid}/fork", {"json": {"count": 2}}, 405, "forking a sandbox"),
        ("PUT", f"/sandboxes/{sid}/network", {"json": {"allowOut": ["1.1.1.1"]}}, 405, "network"),
        ("GET", "/volumes", {}, 405, "volumes"),
        ("POST", "/volumes", {"json": {"name": "v"}}, 405, "volumes"),
        ("GET", "/volumes/vol_x", {}, 404, "volume not found"),
        ("DELETE", "/volumes/vol_x", {}, 404, "volume not found"),
        # another tenant's sandbox, or none: not found, as everywhere
        ("POST", "/sandboxes/ses_doesnotexist/resume", {"json": {}}, 404, "not found"),
    ]
    for method, path, kw, status, what in cases:
        t0 = time.monotonic()
        r = api(daemon, keys["alice"], method, path, **kw)
        took = time.monotonic() - t0
        assert r.status_code == status, (method, path, r.status_code, r.text)
        body = r.json()
        assert body == {"code": status, "message": body["message"]}, (path, body)
        assert what in body["message"], (path, body)
        if status == 405:
            assert "not supported by sandboxd's E2B-compatible API: " in body["message"], body
        assert "no such route" not in body["message"], body
        assert took < 2, f"{method} {path} took {took:.2f} s"
    r = api(daemon, keys["bob"], "POST", f"/sandboxes/{sid}/resume", json={})
    assert r.status_code == 404 and r.json()["code"] == 404, r.text
    assert sessions_of(daemon, keys["alice"]) == before, "a refused call made or ended a sandbox"
    assert api(daemon, keys["alice"], "GET", f"/sandboxes/{sid}").status_code == 200


def test_envd_errors_have_connect_shapes_and_lose_nothing(daemon, keys, sandbox):
    sid, tok = sandbox["sandboxID"], sandbox["envdAccessToken"]
    unary = {"Content-Type": "application/json"}
    stream = {"Content-Type": "application/connect+json"}
    # no token: 401 unauthenticated (unary), end-of-stream error (streaming)
    r = envd(daemon, sid, None, "POST", "/filesystem.Filesystem/Stat", headers=dict(unary),
             json={"path": "/work"})
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    r = envd(daemon, sid, None, "POST", "/process.Process/Start", headers=dict(stream),
             data=envelope({"process": {"cmd": "true"}}))
    assert r.status_code == 200
    [(flags, end)] = frames(r.content)
    assert flags == 2 and end["error"]["code"] == "unauthenticated"
    # a token of this sandbox under another id: not found, like no sandbox
    r = envd(daemon, "ses_other", tok, "POST", "/filesystem.Filesystem/Stat",
             headers=dict(unary), json={"path": "/work"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    bad = [
        ("/filesystem.Filesystem/Stat", unary, b"{oops", 400, "invalid_argument"),
        ("/filesystem.Filesystem/Stat", unary, json.dumps({"path": "/nope/x"}).encode(), 404,
         "not_found"),
        ("/filesystem.Filesystem/ListDir", unary, json.dumps({"path": "/work", "depth": 0}).encode(),
         400, "invalid_argument"),
        ("/filesystem.Filesystem/Remove", unary, json.dumps({"path": ""}).encode(), 400,
         "invalid_argument"),
        ("/process.Process/SendInput", unary,
         json.dumps({"process": {"pid": 1}, "input": {"stdin": "!!not base64!!"}}).encode(), 400,
         "invalid_argument"),
        ("/process.Process/SendSignal", unary,
         json.dumps({"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"}).encode(), 404,
         "not_found"),
        ("/process.Process/StreamInput", unary, b"{}", 501, "unimplemented"),
        ("/filesystem.Filesystem/CreateWatcher", unary, b"{}", 501, "unimplemented"),
    ]
    for path, h, data, status, code in bad:
        r = envd(daemon, sid, tok, "POST", path, headers=dict(h), data=data)
        assert (r.status_code, r.json().get("code")) == (status, code), (path, r.text)
    for data in [b"\0\0\0", b"\0\0\0\0\x09{}", envelope({"process": {}}), envelope([1])]:
        r = envd(daemon, sid, tok, "POST", "/process.Process/Start", headers=dict(stream),
                 data=data)
        assert r.status_code == 200
        [(flags, end)] = frames(r.content)
        assert flags == 2 and end["error"]["code"] == "invalid_argument", (data, end)
    # an upload with one bad path writes none of its files
    files = [("file", ("/work/good.txt", b"good")), ("file", ("", b"bad"))]
    r = envd(daemon, sid, tok, "POST", "/files", files=files)
    assert r.status_code == 400 and r.json()["code"] == 400, r.text
    r = envd(daemon, sid, tok, "GET", "/files", params={"path": "/work/good.txt"})
    assert r.status_code == 404 and r.json()["code"] == 404
    # everything still works afterwards
    r = envd(daemon, sid, tok, "POST", "/process.Process/Start", headers=dict(stream),
             data=envelope({"process": {"cmd": "/bin/echo", "args": ["still", "here"]}}))
    evs = frames(r.content)
    assert evs[0][1]["event"]["start"]["pid"] > 0
    out = b"".join(__import__("base64").b64decode(e["event"]["data"]["stdout"])
                   for f, e in evs if f == 0 and "data" in e["event"])
    assert out == b"still here\n"
    assert evs[-2][1]["event"]["end"]["exitCode"] == 0 and evs[-1] == (2, {})
    r = envd(daemon, sid, tok, "GET", "/health")
    assert r.status_code == 204


def test_code_interpreter_errors(daemon, keys, sandbox):
    sid, tok = sandbox["sandboxID"], sandbox["envdAccessToken"]
    for body, status in [({"code": 5}, 400), ({"code": "1", "language": "cobol"}, 400),
                         ({"code": "1", "context_id": "ctx_missing"}, 404),
                         ({"code": "1", "env_vars": {"A": "b"}}, 400)]:
        r = envd(daemon, sid, tok, "POST", "/execute", json=body)
        assert r.status_code == status and r.json()["code"] == status, (body, r.text)
    r = envd(daemon, sid, tok, "POST", "/execute", json={"code": "21 * 2"})
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert {"type": "result", "text": "42", "is_main_result": True} in lines


def test_killed_sandbox_answers_not_running(daemon, keys, sandbox):
    sid, tok = sandbox["sandboxID"], sandbox["envdAccessToken"]
    assert api(daemon, keys["alice"], "DELETE", f"/sandboxes/{sid}").status_code == 204
    assert envd(daemon, sid, tok, "GET", "/health").status_code == 502
    r = api(daemon, keys["alice"], "DELETE", f"/sandboxes/{sid}")
    assert r.status_code == 404 and r.json()["code"] == 404


def test_quotas_hold_through_the_e2b_surface(tmp_path_factory):
    state = tmp_path_factory.mktemp("e2b-quota")
    conf = state / "sandboxd.conf"
    conf.write_text("[tenant.carol]\nquota_sessions = 1\n")
    d = start_daemon(tmp_path_factory, "e2b-quota-d", {"SANDBOXD_RUNSC": "/nonexistent/runsc"},
                     ["--config", str(conf)])
    try:
        key = d.create_key("carol")
        first = api(d, key, "POST", "/v2/sandboxes", json={})
        assert first.status_code == 201, first.text
        second = api(d, key, "POST", "/v2/sandboxes", json={})
        assert second.status_code == 429 and second.json()["code"] == 429, second.text
        assert "session" in second.json()["message"]
        assert sessions_of(d, key) == [first.json()["sandboxID"]]
        # the refusal is a policy decision in the audit trail, like ours
        admin = d.create_key("ops", admin=True)
        events = requests.get(d.url + "/v1/audit", params={"limit": 1000}, timeout=30,
                              headers={"Authorization": "Bearer " + admin}).json()["events"]
        assert any(e["action"] == "policy.denied" and
                   (e.get("details") or {}).get("route") == "e2b_create" for e in events)
    finally:
        d.stop()


# Code in the sandbox that forges 1-byte progress frames, stdout and stderr
# in turn, as fast as it can (it can reach the driver and its nonce) until
# its run is killed.
FORGER = """
import gc
drv = next(o for o in gc.get_objects() if type(o).__name__ == 'Driver')
live = next(o for o in gc.get_objects() if type(o).__name__ == 'Live')
frame = '%s {"seq":%d,"stream":"%s","text":"x"}\\n'
batch = ''.join(frame % (drv.nonce, live.seq, s) for s in ('stdout', 'stderr')).encode() * 4096
while True:
    with drv.tx_lock:
        drv.tx.write(batch)
        drv.tx.flush()
"""


def test_slow_reader_cannot_hold_a_run_past_its_timeout(tmp_path_factory):
    """A client reading /execute slowly while the code floods it with tiny
    frames: the run still ends at its timeout (the interpreter is killed
    then), and the daemon keeps serving."""
    state = tmp_path_factory.mktemp("e2b-slow")
    conf = state / "sandboxd.conf"
    conf.write_text("[profile.container]\ndefault_timeout = 20\n")
    d = start_daemon(tmp_path_factory, "e2b-slow-d", {"SANDBOXD_RUNSC": "/nonexistent/runsc"},
                     ["--config", str(conf)])
    try:
        key = d.create_key("erin")
        sb = api(d, key, "POST", "/v2/sandboxes", json={})
        assert sb.status_code == 201, sb.text
        sid, tok = sb.json()["sandboxID"], sb.json()["envdAccessToken"]
        native = {"Authorization": "Bearer " + key}
        r = requests.post(f"{d.url}/v1/sandbox/sessions/{sid}/contexts", headers=native,
                          json={"language": "python"}, timeout=60)
        assert r.status_code in (200, 201), r.text
        cid = r.json()["id"]
        t0 = time.monotonic()
        resp = requests.post(d.url + "/e2b/envd/execute", stream=True, timeout=120,
                             headers={"E2b-Sandbox-Id": sid, "X-Access-Token": tok},
                             json={"code": FORGER, "context_id": cid})
        assert resp.status_code == 200
        status, got, polled = None, b"", 0.0
        while time.monotonic() - t0 < 60:
            # about 600 KiB/s: slower than the flood, so the line queue is
            # full and each line waits for room, but never for long
            got += resp.raw.read(65536)[:100]
            time.sleep(0.1)
            if time.monotonic() - polled < 1:
                continue
            polled = time.monotonic()
            c = requests.get(f"{d.url}/v1/sandbox/sessions/{sid}/contexts/{cid}",
                             headers=native, timeout=30).json()
            status = c["status"]
            if status == "dead":
                break
        took = time.monotonic() - t0
        resp.close()
        assert status == "dead", c
        assert b'"type":"stdout","text":"x' in got, got[:300]
        # timeout_s 20 (long enough for the queue to fill first), plus at most
        # one line's wait for room (5 s), plus slack
        assert took < 32, f"the run outlived its timeout: {took:.1f} s"
        r = requests.post(f"{d.url}/v1/sandbox/sessions/{sid}/contexts/{cid}/restart",
                          headers=native, timeout=60)
        assert r.status_code == 200, r.text
    finally:
        d.stop()
