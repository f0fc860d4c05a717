"""Fault injection (src/common/fault.h): every call of every fault point
fails in turn while a daemon runs the whole life of a sandbox — session
create (with an egress allowlist: veth + nft), an exec in it, its delete,
then a one-shot execution.  Each run of the walk starts its own daemon
with SANDBOXD_FAULTS=POINT:N, so the Nth call of POINT fails once, and
checks:

- every answer is either a success or a clear error: a 4xx/5xx envelope
  with a code and a message, or a final result with a reason;
- nothing is left behind: no process under the daemon (so no sandbox
  netns either), no mount of its state dir, no cgroup of a sandbox it
  named, no netns fd held by it, no veth of its net tag, its nft table as
  it was before the sandbox, no session or execution row that is not
  final — and, while a session is up, each of these checks sees it;
- the daemon stays healthy: the same life again, with no fault left to
  fire, succeeds throughout;
- a daemon whose fault fires while it starts refuses to start, with a
  message, and leaves no process behind.

The walk ends at the first N the life never reaches ("fault injected:
POINT #N" is absent from the log).  On PostgreSQL
(SANDBOXD_TEST_DATABASE=postgres) only the store-write point is walked:
the other points do not touch the store backend."""
import os
import re
import subprocess

import pytest

import sbxpg
from sbxtest import Daemon, reap_leftovers, wait_until

PIN = "allowed.test=198.51.100.10"
# Calls walked per point at most: far above what one life makes (mount:
# ~25, store_write: ~40 with the migrations) — a walk that never ends is a
# loop in the daemon, not a long life.
WALK_MAX = {"alloc": 4000}
WALK_MAX_DEFAULT = 120
POINTS = ["clone", "unshare", "mount", "cgroup_write", "nft", "store_write", "alloc"]
FINAL_SESSION = {"terminated", "failed"}
FINAL_EXECUTION = {"succeeded", "failed", "timeout", "oom_killed", "killed", "error", "cancelled"}
IDS = re.compile(r"\b(?:ses|exe)_[0-9a-f]{24}\b")


def on_postgres():
    return sbxpg.enabled()


MADE = []  # this test's daemons, the last one's log attached to a failure (conftest)


def start(state_dir, spec):
    env = {"SANDBOXD_POOL_SIZE": "0"}  # every sandbox built on request, never ahead
    if spec:
        env["SANDBOXD_FAULTS"] = spec
    d = Daemon(state_dir, ["--resolve", PIN], env=env)
    MADE[:] = [d]
    try:
        d.start(timeout=120)  # generous: the host is shared and loaded
    except RuntimeError:
        return d, False
    return d, True


def fired(d, point, n):
    return f"fault injected: {point} #{n} " in open(d.log_path, errors="replace").read()


def net_tag(d):
    """The daemon's net tag, or None when it started without egress
    enforcement (an nft fault while it set its table up)."""
    log = open(d.log_path).read()
    # Either line (an alloc fault may cost the log one of them).
    m = re.search(r"egress (?:allowlists enforced \(|policy ready: )table inet sandboxd_([0-9a-f]+)",
                  log)
    if m and "egress allowlists unavailable" not in log:
        return m.group(1)
    assert "egress allowlists unavailable" in log, "egress neither enforced nor refused:\n" \
        + d.log_tail(40)
    return None


def nft_table(tag):
    out = subprocess.run(["nft", "list", "table", "inet", f"sandboxd_{tag}"],
                         capture_output=True, text=True).stdout
    return re.sub(r"counter packets \d+ bytes \d+", "counter", out)


def veths(tag):
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if f"sx{tag}-" in line]


def descendants(pid):
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if rest[0] != b"Z":
            kids.setdefault(int(rest[1]), []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def netns_fds(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("net:[")
        except OSError:
            pass
    return n


def cgroup_bases(pid):
    """The daemon's own cgroup in each hierarchy: its sandboxes' cgroups
    live below (v1: one per controller; v2: the unified one)."""
    bases = []
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            names = [c.replace("name=", "") for c in ctrls.split(",")] if ctrls else [""]
            for c in names + [ctrls.replace("name=", "")]:
                d = os.path.normpath(f"/sys/fs/cgroup/{c}/{path}")
                if os.path.isdir(d) and d not in bases:
                    bases.append(d)
    return bases


def cgroups_named(bases, ids):
    found = []
    for base in bases:
        for root, dirs, _ in os.walk(base):
            found += [os.path.join(root, d) for d in dirs if d in ids]
            if root.count(os.sep) - base.count(os.sep) >= 3:
                dirs[:] = []  # [ctrl/]sandboxd-<hash>/<id>: shallow
    return found


def mounts_of(path):
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if path in line]


def is_clear_error(r):
    """A 4xx/5xx with the error envelope and a message."""
    if r.status_code < 400:
        return False
    e = r.json().get("error", {})
    return bool(e.get("code")) and bool(e.get("message"))


def wait_final(c, eid):
    """The execution once final; a GET that fails meanwhile must fail
    clearly (the fault may hit the read), and the next one is asked."""
    def final():
        r = c.get(f"/v1/sandbox/executions/{eid}", params={"wait_s": "5"})
        if r.status_code != 200:
            assert is_clear_error(r), f"execution get: {r.status_code}: {r.text}"
            return None
        return r.json() if r.json()["status"] in FINAL_EXECUTION else None
    return wait_until(final, 120, what=f"{eid} to be final")


def life(d, c, seen, alive=None, egress=True):
    """One sandbox life; returns the steps that failed (each with a clear
    error), and adds every id it saw to `seen`.  alive(sid) is called while
    the session is up: the leak checks must see what they look for."""
    failed = []

    def note(step, r):
        seen.update(IDS.findall(r.text))
        if r.status_code >= 400:
            assert is_clear_error(r), f"{step}: {r.status_code} without a clear error: {r.text}"
            failed.append(step)
            return False
        return True

    net = {"egress": "allowlist", "allow": ["allowed.test"]} if egress else {"egress": "none"}
    r = c.post("/v1/sandbox/sessions", json={"profile": "container", "network": net})
    if note("create", r):
        sid = r.json()["id"]
        r = c.post(f"/v1/sandbox/sessions/{sid}/exec", json={"command": ["echo", "hi"]})
        if note("exec", r):
            res = r.json()
            assert res["status"] == "succeeded" and res["stdout"] == "hi\n" or res["reason"], res
            if res["status"] != "succeeded":
                failed.append("exec")
            elif alive:
                alive(sid)
        r = c.delete(f"/v1/sandbox/sessions/{sid}")
        if not note("delete", r):
            # A failed delete must leave a session that can still be deleted.
            r2 = c.delete(f"/v1/sandbox/sessions/{sid}")
            assert r2.status_code in (204, 404) or is_clear_error(r2), r2.text
    r = c.post("/v1/sandbox/executions", json={"profile": "container", "command": ["echo", "x"]})
    if note("execution", r):
        e = wait_final(c, r.json()["id"])
        if e["status"] != "succeeded":
            assert e.get("reason"), f"a final result without a reason: {e}"
            failed.append("execution")
    return failed


def nothing_left(d, c, tag, table0, fds0, bases, seen):
    """What one life may leave behind, checked against the daemon's state
    before it (teardown is asynchronous: waited for, never slept on)."""
    seen.update(IDS.findall(open(d.log_path, errors="replace").read()))
    wait_until(lambda: not descendants(d.pid), 60, what="the daemon's children to go")
    wait_until(lambda: not veths(tag), 60, what="the sandbox veths to go")
    wait_until(lambda: nft_table(tag) == table0, 60, what="the nft table to be as before")
    wait_until(lambda: not cgroups_named(bases, seen), 60, what="the sandbox cgroups to go")
    wait_until(lambda: netns_fds(d.pid) <= fds0, 60, what="the netns fds to be closed")
    assert not mounts_of(d.state_dir), mounts_of(d.state_dir)

    def rows_final():
        s = c.list_all("/v1/sandbox/sessions", "sessions")
        e = c.list_all("/v1/sandbox/executions", "executions")
        return all(x["status"] in FINAL_SESSION for x in s) and \
            all(x["status"] in FINAL_EXECUTION for x in e)
    wait_until(rows_final, 60, what="every session and execution row to be final")


def stop(d):
    rc = d.stop(timeout=15)
    left = reap_leftovers(d.state_dir)
    assert not left, f"processes outlived the daemon: {left}"
    assert rc == 0, f"sandboxd did not exit 0 on SIGTERM (rc={rc}):\n{d.log_tail(40)}"


def degraded_run(d, point, n):
    """A daemon whose egress setup failed at start: it must say why, refuse
    an allowlisted session with a clear error, and serve everything else."""
    assert fired(d, point, n), "egress unavailable, and not because of the fault"
    c = d.client(d.create_key("faults"))
    r = c.post("/v1/sandbox/sessions", json={
        "profile": "container", "network": {"egress": "allowlist", "allow": ["allowed.test"]}})
    assert is_clear_error(r), r.text
    seen, bases = set(), cgroup_bases(d.pid)
    assert life(d, c, seen, egress=False) == [], d.log_tail(30)
    wait_until(lambda: not descendants(d.pid), 60, what="the daemon's children to go")
    wait_until(lambda: not cgroups_named(bases, seen), 60, what="the sandbox cgroups to go")
    return True


def one_run(tmp_path, point, n):
    """One daemon with POINT:N; True while the walk must go on."""
    state = str(tmp_path / f"{point}-{n}")
    d, up = start(state, f"{point}:{n}")
    if not up:
        # A fault while starting: a refusal with a message, nothing left.
        assert fired(d, point, n), "sandboxd did not start, and not because of the fault:\n" \
            + d.log_tail(30)
        assert d.proc.returncode not in (None, 0) and d.proc.returncode > 0, d.proc.returncode
        assert re.search(r'"level":"error"', open(d.log_path).read()), d.log_tail(20)
        assert not reap_leftovers(state)
        return True
    try:
        tag = net_tag(d)
        if tag is None:  # degraded at start, and fail-closed: allowlists refused, clearly
            return degraded_run(d, point, n)
        table0, fds0, bases = nft_table(tag), netns_fds(d.pid), cgroup_bases(d.pid)
        assert bases, "no cgroup of the daemon found"
        c = d.client(d.create_key("faults"))
        seen = set()

        def alive(sid):  # the checks below are not blind: a live sandbox shows in each
            assert descendants(d.pid) and veths(tag) and nft_table(tag) != table0
            assert cgroups_named(bases, {sid})
        life(d, c, seen, alive)
        hit = fired(d, point, n)
        nothing_left(d, c, tag, table0, fds0, bases, seen)
        if hit:  # healthy: the same life again, nothing left to fire
            assert d.healthy()
            assert life(d, c, seen) == [], "the daemon did not recover:\n" + d.log_tail(30)
            nothing_left(d, c, tag, table0, fds0, bases, seen)
    finally:
        stop(d)
    assert tag not in subprocess.run(["nft", "list", "tables"], capture_output=True,
                                     text=True).stdout, "the nft table outlived the daemon"
    return hit


@pytest.mark.parametrize("point", POINTS)
def test_every_call_fails_in_turn(request, tmp_path, point):
    request.node._sbx_daemons = MADE
    if on_postgres() and point != "store_write":
        pytest.skip("on PostgreSQL only store_write reaches the backend under test")
    if os.geteuid() != 0:
        pytest.fail("fault injection walks the container wall: needs root") \
            if os.environ.get("CI") == "true" else pytest.skip("needs root")
    limit = WALK_MAX.get(point, WALK_MAX_DEFAULT)
    n, step = 1, 1
    while one_run(tmp_path, point, n):
        assert n < limit, f"{point}: the walk passed {limit} calls"
        if point == "alloc":  # thousands of JSON allocations: sample, growing
            step = max(1, n // 3)
        n += step
    assert n > 1, f"{point}: the life never reached it (the hook is not on the path)"


def test_armed_only_by_a_valid_spec(tmp_path):
    """A bad SANDBOXD_FAULTS stops the daemon at start: a typo must not
    quietly run a daemon without the fault the test meant."""
    for spec in ("nosuch:1", "mount:0", "mount:x", "mount:1:EWHAT", "mount"):
        d, up = start(str(tmp_path / re.sub(r"\W", "_", spec)), spec)
        if up:
            stop(d)
        assert not up, f"{spec!r} was accepted"
        assert "SANDBOXD_FAULTS" in open(d.log_path).read(), d.log_tail(10)
