"""The gvisor driver: sandboxes inside gVisor's runsc.

Own daemons (module scope) with the real runsc, whatever the rest of the
run uses (conftest.py hides runsc from the suite's daemons unless
SANDBOXD_TEST_PROFILES names gvisor).  Covers: gVisor's kernel is the one
the code sees; exec, timeouts and limits hold; usage comes from the
cgroup; a broken runsc fails closed (503 runtime_unavailable, a marker the
code would write never appears); a deleted session leaves no runsc
process, cgroup or bundle dir; files, archives, terminals and executions
with files move their bytes through sbx-init (the fd-in forms)."""
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import REAL_RUNSC
from sbxtest import Daemon, assert_error, marker, procs_with, wait_until

HOG = ("print('start', flush=True)\n"
       "x = []\n"
       "while True:\n"
       "    x.append(bytearray(1 << 20))\n")


def gv_parent(d):
    h = hashlib.blake2b(d.state_dir.encode(), digest_size=8).hexdigest()
    return f"sandboxd-{h}-gvisor"


def start_daemon(runsc, extra_env=None):
    d = Daemon(tempfile.mkdtemp(prefix="sbx-gv-"))
    saved = dict(os.environ)
    os.environ["SANDBOXD_RUNSC"] = runsc
    os.environ.update(extra_env or {})
    try:
        d.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return d


def stop_daemon(d):
    rc = d.stop(timeout=20)
    left = procs_with(d.state_dir)
    shutil.rmtree(d.state_dir, ignore_errors=True)
    assert rc == 0, d.log_tail(40)
    assert not left, f"processes outlived the daemon: {left}"


@pytest.fixture(scope="module")
def gvd():
    # no pool here: every session is a cold start whose runsc id, cgroup
    # and bundle carry the session id (test_pool covers the pool)
    d = start_daemon(REAL_RUNSC, {"SANDBOXD_GVISOR_POOL_SIZE": "0"})
    yield d
    stop_daemon(d)


@pytest.fixture(scope="module")
def gv(gvd):
    c = gvd.client(gvd.create_key("gvtenant"))
    p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}["gvisor"]
    if not p["available"]:
        pytest.skip(f"gvisor unavailable on this host: {p['reason']}")
    return c


@pytest.fixture
def gsession(gv):
    s = gv.new_session("gvisor")
    yield s
    gv.delete(f"/v1/sandbox/sessions/{s['id']}")


def run(c, sid, cmd, **kw):
    return c.exec(sid, command=cmd, **kw)


def test_profile_lists_platform_and_capabilities(gv):
    ps = {x["name"]: x for x in gv.get("/v1/sandbox/profiles").json()["profiles"]}
    for name in ("gvisor", "gvisor-small"):
        p = ps[name]
        assert p["available"] is True and p["reason"] is None
        assert p["class"] == "user-space-kernel"
        assert p["platform"] in ("ptrace", "systrap", "kvm"), p
        # gVisor cannot pass fds out to the host; the fd-in forms of the
        # protocol give every capability; egress allowlists are
        # linked at create (test_gvisor_network.py)
        assert set(p["capabilities"]) == {"exec", "files", "terminal", "watch", "upstream",
                                          "archive", "contexts", "images",
                                          "egress_allowlist"}, p
    assert "platform" not in ps["process"]


def test_kernel_is_gvisor_not_the_host(gv, gsession):
    r = run(gv, gsession["id"], ["sh", "-c", "dmesg; echo ---; uname -r; cat /proc/version"])
    assert r["status"] == "succeeded", r
    dmesg, rest = r["stdout"].split("---\n")
    assert "Starting gVisor" in dmesg, dmesg
    release, version = rest.splitlines()[:2]
    assert release != os.uname().release
    with open("/proc/version") as f:
        assert version.strip() != f.read().strip()


def test_exec_basics(gv, gsession):
    sid = gsession["id"]
    r = run(gv, sid, ["sh", "-c", "echo out; echo err >&2; id -u; id -g; pwd; exit 3"])
    assert r["status"] == "failed" and r["exit_code"] == 3
    assert r["stdout"] == "out\n1000\n1000\n/work\n" and r["stderr"] == "err\n"
    # state persists across execs of a session: one sandbox, many execs
    assert run(gv, sid, ["sh", "-c", "echo kept > /work/f"])["status"] == "succeeded"
    assert run(gv, sid, ["cat", "/work/f"])["stdout"] == "kept\n"
    r = run(gv, sid, ["sh", "-c", "echo x > /usr/pwned || echo ro1; echo x > /pwned || echo ro2"])
    assert "ro1" in r["stdout"] and "ro2" in r["stdout"], r
    r = run(gv, sid, ["cat", "/proc/self/status"])
    capeff = [l for l in r["stdout"].splitlines() if l.startswith("CapEff")][0]
    assert capeff.split()[1] == "0000000000000000", capeff
    r = run(gv, sid, ["python3", "-c", "import sys; print(sys.stdin.read()[::-1])"],
            stdin="abc")
    assert r["stdout"] == "cba\n", r


def test_file_round_trip_through_sbx_init(gv, gsession):
    """No fd leaves gVisor: uploads and downloads go through sbx-init
    (WRITE_FROM / READ_TO); bytes, sizes, modes and errors are as with the
    container driver."""
    sid = gsession["id"]
    base = f"/v1/sandbox/sessions/{sid}/files"
    blob = os.urandom(3 << 20) + b"end"
    r = gv.put(base, params={"path": "/work/up/blob.bin"}, data=blob)
    assert r.status_code in (200, 201), r.text
    r = gv.get(base, params={"path": "/work/up/blob.bin"})
    assert r.status_code == 200 and r.content == blob
    # the workload inside gVisor sees the very bytes
    r = run(gv, sid, ["sh", "-c", "wc -c < /work/up/blob.bin; tail -c 3 /work/up/blob.bin"])
    assert r["stdout"] == f"{len(blob)}\nend", r
    # and what it writes comes out; host files of the rootfs too
    run(gv, sid, ["sh", "-c", "printf made-inside > /work/in.txt"])
    assert gv.get(base, params={"path": "/work/in.txt"}).content == b"made-inside"
    assert gv.get(base, params={"path": "/etc/hostname"}).status_code == 200
    r = gv.get(base, params={"path": "/work/up", "list": "true"})
    assert r.status_code == 200, r.text
    assert [e["name"] for e in r.json()["entries"]] == ["blob.bin"], r.json()
    assert_error(gv.get(base, params={"path": "/work/nope"}), 404, "not_found")
    # a tmpfs full is 413 at the end of the upload, as for container
    r = gv.put(base, params={"path": "/work/huge"}, data=b"x" * (300 << 20))
    assert r.status_code == 413, (r.status_code, r.text[:300])
    assert run(gv, sid, ["true"])["status"] == "succeeded"


def test_archive_round_trip(gv, gsession):
    import io
    import tarfile
    sid = gsession["id"]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tw:
        for name, data, mode in (("a.txt", b"alpha", 0o640), ("bin/run.sh", b"#!/bin/sh\necho ran\n",
                                                              0o755)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), mode, 1_600_000_000
            tw.addfile(ti, io.BytesIO(data))
    url = f"/v1/sandbox/sessions/{sid}/archive"
    r = gv.put(url, params={"path": "/work/t"}, data=out.getvalue())
    assert r.status_code in (200, 201), r.text
    r = run(gv, sid, ["sh", "-c", "/work/t/bin/run.sh; python3 -c \"import os; "
                      "s = os.stat('/work/t/a.txt'); print(oct(s.st_mode)[-3:], int(s.st_mtime))\""])
    assert r["stdout"] == "ran\n640 1600000000\n", r
    r = gv.get(url, params={"path": "/work/t"})
    assert r.status_code == 200, r.text
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tr:
        m = {x.name.lstrip("./"): x for x in tr.getmembers()}
        assert tr.extractfile(m["a.txt"]).read() == b"alpha"
        assert m["bin/run.sh"].mode & 0o777 == 0o755


def test_terminal_inside_gvisor(gv, gsession):
    """PTY_RELAY: the pty stays inside gVisor, the shepherd relays it."""
    sid = gsession["id"]
    r = gv.post(f"/v1/sandbox/sessions/{sid}/exec",
                json={"command": ["sh", "-i"], "background": True, "pty": {"cols": 90, "rows": 20}})
    assert r.status_code == 202, r.text
    url = f"/v1/sandbox/sessions/{sid}/processes/{r.json()['pid']}"
    screen = lambda: gv.get(url + "/output").json()["stdout"]
    assert gv.post(url + "/stdin", data=b"stty size; tty; dmesg | head -1\n").status_code == 200
    wait_until(lambda: "20 90" in screen() and "gVisor" in screen(), 20, interval=0.1,
               what="stty size and dmesg")
    assert "/dev/pts/" in screen(), screen()
    r = gv.post(url + "/resize", json={"cols": 120, "rows": 33})
    assert r.status_code == 200, r.text
    gv.post(url + "/stdin", data=b"stty size; exit 7\n")
    wait_until(lambda: gv.get(url).json().get("status") not in ("running", None), 20,
               interval=0.1, what="the shell's exit")
    assert "33 120" in screen(), screen()
    assert gv.get(url).json()["exit_code"] == 7


def test_execution_with_files_and_collect(gv):
    """files/collect (one-shot executions) move bytes through sbx-init."""
    e = gv.new_execution("gvisor", command=["sh", "-c", "tr a-z A-Z < /work/a > /work/b"],
                         files=[{"path": "/work/a", "content": "shout"}], collect=["/work/b"])
    f = gv.wait_execution(e["id"], timeout=60)
    assert f["status"] == "succeeded", f
    assert [x["path"] for x in f["files"]] == ["/work/b"], f
    r = gv.get(f"/v1/sandbox/executions/{e['id']}/files", params={"path": "/work/b"})
    assert r.status_code == 200 and r.content == b"SHOUT", r.text


def test_no_network_but_loopback(gv, gsession):
    r = run(gv, gsession["id"], ["cat", "/proc/net/dev"])
    ifaces = [l.split(":")[0].strip() for l in r["stdout"].splitlines()[2:]]
    assert ifaces == ["lo"], r["stdout"]


def test_timeout_kills_and_session_survives(gv, gsession):
    t0 = time.monotonic()
    r = run(gv, gsession["id"], ["sh", "-c", "echo before; sleep 60; echo after"], timeout_s=1)
    assert r["status"] == "timeout", r
    assert r["stdout"] == "before\n"
    assert time.monotonic() - t0 < 10
    assert run(gv, gsession["id"], ["true"])["status"] == "succeeded"


def test_memory_bomb_reports_oom_killed(gv, gvd):
    """The host cgroup caps the whole sandbox (sentry, gofer, stubs).  The
    host OOM killer picks gVisor's Sentry (it holds the workload's memory),
    so the sandbox dies with the exec; the exec still reports oom_killed
    (the cgroup's OOM counter moved), not a bare "sandbox lost"."""
    s = gv.new_session("gvisor", limits={"memory": "64Mi"})
    try:
        t0 = time.monotonic()
        r = gv.post(f"/v1/sandbox/sessions/{s['id']}/exec",
                    json={"command": ["python3", "-c", HOG], "timeout_s": 60})
        assert time.monotonic() - t0 < 30, "the limit held well before the timeout"
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "oom_killed" and r.json()["reason"] == "memory", r.json()
        # the sandbox went with it: later calls say so, nothing hangs
        r = gv.post(f"/v1/sandbox/sessions/{s['id']}/exec", json={"command": ["true"]})
        assert r.status_code != 200 or r.json()["status"] != "succeeded", r.text
    finally:
        gv.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_disk_limit(gv):
    s = gv.new_session("gvisor", limits={"disk": "16Mi"})
    try:
        r = run(gv, s["id"], ["sh", "-c", "dd if=/dev/zero of=/work/big bs=1M count=64; "
                                          "echo rc=$?; python3 -c \"import os; "
                                          "print(os.path.getsize('/work/big'))\""])
        assert "rc=0" not in r["stdout"] and "No space left" in r["stderr"], r
        size = int(r["stdout"].split()[-1])
        assert size <= 16 << 20, r["stdout"]
    finally:
        gv.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_usage_from_the_cgroup(gv, gsession):
    r = run(gv, gsession["id"], ["python3", "-c", "x = bytearray(40 << 20); sum(range(3000000))"])
    assert r["status"] == "succeeded", r
    assert r["usage"]["cpu_seconds"] > 0
    assert r["usage"]["memory_peak_bytes"] > 30 << 20, r["usage"]


def test_one_shot_execution(gv):
    e = gv.new_execution("gvisor", command=["sh", "-c", "dmesg | head -1; echo done"])
    f = gv.wait_execution(e["id"], timeout=60)
    assert f["status"] == "succeeded", f
    assert "gVisor" in f["stdout"] and f["stdout"].endswith("done\n")


def cgroup_dirs(sid):
    return glob.glob(f"/sys/fs/cgroup/*/**/{sid}", recursive=True) + \
        glob.glob(f"/sys/fs/cgroup/unified/**/{sid}", recursive=True)


def test_delete_leaves_nothing(gv, gvd):
    s = gv.new_session("gvisor")
    sid = s["id"]
    assert run(gv, sid, ["true"])["status"] == "succeeded"
    bundle = os.path.join(gvd.state_dir, "gvisor", sid)
    assert os.path.isdir(bundle)
    assert procs_with(sid), "runsc carries the id in its cmdline"
    assert cgroup_dirs(sid), "the sandbox has a cgroup"
    t0 = time.monotonic()
    assert gv.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
    assert time.monotonic() - t0 < 10
    assert procs_with(sid) == []
    assert cgroup_dirs(sid) == []
    assert not os.path.exists(bundle)
    assert not glob.glob(os.path.join(gvd.state_dir, "gvisor-runsc", sid + "*"))


def test_pool_hands_over_prestarted_sandboxes():
    d = start_daemon(REAL_RUNSC, {"SANDBOXD_GVISOR_POOL_SIZE": "1"})
    gvdir = os.path.join(d.state_dir, "gvisor")
    pooled = lambda: sorted(x for x in os.listdir(gvdir) if x.startswith("gvp_"))
    try:
        c = d.client(d.create_key("gvpool"))
        p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}["gvisor"]
        if not p["available"]:
            pytest.skip(p["reason"])
        # prewarmed at start: one idle sandbox per gvisor profile key
        wait_until(lambda: len(pooled()) >= 2, 30, what="pool filled")
        idle = pooled()

        def all_running():  # started, not just laid out: what a hand-over takes
            r = subprocess.run([REAL_RUNSC, "--root", os.path.join(d.state_dir, "gvisor-runsc"),
                                "list", "--format", "json"], capture_output=True, text=True)
            st = {x["id"]: x["status"] for x in json.loads(r.stdout or "null") or []}
            return all(st.get(x) == "running" for x in idle)
        wait_until(all_running, 60, what="the pooled sandboxes to run")
        t0 = time.monotonic()
        s = c.new_session("gvisor", limits={"memory": "128Mi"})
        took = time.monotonic() - t0
        sid = s["id"]
        r = run(c, sid, ["sh", "-c", "dmesg | head -1; echo x > /work/a; cat /work/a"])
        assert r["status"] == "succeeded" and "gVisor" in r["stdout"], r
        # the session got one of the idle sandboxes, with the request's limits
        mine = [x for x in idle
                if any(open(f).read().strip() == str(128 << 20) for f in glob.glob(
                    f"/sys/fs/cgroup/memory/**/{gv_parent(d)}/{x}/memory.limit_in_bytes",
                    recursive=True))]
        assert len(mine) == 1, (idle, took)
        assert took < 2.0, f"hand-over took {took:.2f}s"
        # refilled behind it
        wait_until(lambda: len(pooled()) >= 3, 30, what="pool refilled")
        assert c.delete(f"/v1/sandbox/sessions/{sid}").status_code == 204
        assert not os.path.exists(os.path.join(gvdir, mine[0]))
        assert procs_with(mine[0]) == []
    finally:
        stop_daemon(d)
    # stop drained the pool: no bundle, no runsc, no cgroup of this daemon
    assert not glob.glob(f"/sys/fs/cgroup/*/**/{gv_parent(d)}", recursive=True)


@pytest.mark.slow
def test_restart_after_kill9_removes_leftovers():
    d = start_daemon(REAL_RUNSC, {"SANDBOXD_GVISOR_POOL_SIZE": "0"})
    try:
        c = d.client(d.create_key("gvrec"))
        p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}["gvisor"]
        if not p["available"]:
            pytest.skip(p["reason"])
        sid = c.new_session("gvisor")["id"]
        assert run(c, sid, ["true"])["status"] == "succeeded"
        d.kill9()
        bundle = os.path.join(d.state_dir, "gvisor", sid)
        assert os.path.isdir(bundle)
        saved = dict(os.environ)
        os.environ["SANDBOXD_RUNSC"] = REAL_RUNSC
        os.environ["SANDBOXD_GVISOR_POOL_SIZE"] = "0"
        try:
            d.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        wait_until(lambda: procs_with(sid) == [], 10, what="runsc of the old session gone")
        assert not os.path.exists(bundle)
        assert cgroup_dirs(sid) == []
    finally:
        stop_daemon(d)


def test_pids_limit_holds(gv):
    """The cgroup's pids ceiling (32 x pids + 256 host tasks: gVisor's own
    threads count there) holds; a fork bomb past it costs the sandbox
    (known gap, docs/gvisor.md) but never the host."""
    s = gv.new_session("gvisor", limits={"pids": 64})
    try:
        # well under the limit: fine
        r = run(gv, s["id"], ["sh", "-c", "for i in $(seq 10); do sleep 1 & done; wait; echo ok"])
        assert r["status"] == "succeeded" and r["stdout"] == "ok\n", r
        r = gv.post(f"/v1/sandbox/sessions/{s['id']}/exec", json={
            "command": ["sh", "-c", "for i in $(seq 3000); do sleep 30 & done; wait"],
            "timeout_s": 20})
        if r.status_code == 200:
            assert r.json()["status"] != "succeeded", r.json()
        else:
            assert r.status_code == 500 and "sandbox lost" in r.text, r.text
        assert gv.get("/v1/sandbox/profiles").status_code == 200
    finally:
        gv.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- fail closed ----------------------------------------------------------

def fake_runsc(tmp_path, body, mode=0o755):
    p = tmp_path / "runsc"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(mode)
    return str(p)


@pytest.mark.parametrize("kind", ["missing", "not_executable", "probe_fails"])
def test_broken_runsc_fails_closed(tmp_path, kind):
    if kind == "missing":
        runsc, why = "/nonexistent/runsc", "runsc not found"
    elif kind == "not_executable":
        runsc, why = fake_runsc(tmp_path, "exit 0\n", mode=0o644), "not executable"
    else:
        runsc = fake_runsc(tmp_path, 'echo "boom: sandbox cannot start here" >&2; exit 1\n')
        why = "boom: sandbox cannot start here"
    d = start_daemon(runsc)
    mark = marker()
    try:
        c = d.client(d.create_key("gvfail"))
        ps = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}
        for name in ("gvisor", "gvisor-small"):
            assert ps[name]["available"] is False
            assert why in ps[name]["reason"], ps[name]
        cmd = ["sh", "-c", f"touch /tmp/{mark} /work/{mark}; echo {mark} > /dev/null"]
        assert_error(c.post("/v1/sandbox/sessions", json={"profile": "gvisor"}), 503,
                     "runtime_unavailable")
        assert_error(c.with_lang("fr").post("/v1/sandbox/sessions", json={"profile": "gvisor"}),
                     503, "runtime_unavailable")
        assert_error(c.post("/v1/sandbox/executions",
                            json={"profile": "gvisor", "command": cmd}), 503,
                     "runtime_unavailable")
        time.sleep(0.5)  # the sleep is the test: a stray run would have left a trace
        # nothing ran: not on the host, not in the state dir, not anywhere
        assert not os.path.exists(f"/tmp/{mark}")
        assert not os.path.exists(f"/work/{mark}")
        found = [os.path.join(r, f) for r, _, fs in os.walk(d.state_dir) for f in fs if mark in f]
        assert found == []
        assert procs_with(mark) == []
        assert c.get("/v1/sandbox/sessions").json()["sessions"] == []
        # other profiles are unaffected (no fallback either way)
        assert ps["container"]["driver"] == "container"
    finally:
        stop_daemon(d)


def test_no_fallback_when_runsc_breaks_after_start(tmp_path):
    """runsc passes the probe, then fails to start sandboxes: 503, never a
    weaker tier, and nothing left behind."""
    flag = tmp_path / "broken"
    real = shutil.which(REAL_RUNSC) or REAL_RUNSC
    runsc = fake_runsc(tmp_path, f'case " $* " in *" run "*) if [ -e {flag} ]; then '
                       'echo "runsc: simulated start failure" >&2; exit 1; fi;; esac\n'
                       f'exec {real} "$@"\n')
    d = start_daemon(runsc, {"SANDBOXD_GVISOR_POOL_SIZE": "0"})
    try:
        c = d.client(d.create_key("gvfail2"))
        p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}["gvisor"]
        if not p["available"]:
            pytest.skip(p["reason"])
        flag.write_text("")
        r = c.post("/v1/sandbox/sessions", json={"profile": "gvisor"})
        e = assert_error(r, 503, "runtime_unavailable")
        assert "simulated start failure" in e["message"], e
        assert os.listdir(os.path.join(d.state_dir, "gvisor")) == []
        # this daemon's gvisor cgroup parent (driver: BLAKE2b-64 of the state dir)
        assert glob.glob(f"/sys/fs/cgroup/*/**/{gv_parent(d)}/ses_*", recursive=True) == []
    finally:
        stop_daemon(d)
