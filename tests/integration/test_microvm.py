"""The microvm driver: every sandbox a QEMU microVM under its own kernel.

Real QEMU, the real Debian cloud kernel of build/microvm (make
microvm-assets), TCG where this host has no usable KVM.  Each test is an
attack or a check that fails without the driver's wall: the kernel is the
guest's, the host's processes, files and daemon port are out of reach, a
guest root that steals the host link and writes garbage only loses its
own sandbox, memory and pids bombs end inside the guest, a kill -9 of the
daemon leaves no QEMU behind once it restarts, two guests share no
identity, and floods stay bounded.

Runs only when the run tests a microvm profile (make test-microvm,
SANDBOXD_TEST_PROFILES=microvm): a microVM boot costs seconds of CPU under
TCG, which `make test-integration` does not pay (conftest.py sets
SANDBOXD_MICROVM_ACCEL=off there).  One shared session serves the
read-only checks; the tests that break or bound a sandbox get their own."""
import hashlib
import os
import re
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

from conftest import require_profiles, wanted_microvm
from sbxtest import assert_error, procs_using, procs_with, sleeper, wait_until

if not wanted_microvm():
    pytest.skip("microVM tests boot guests (seconds of CPU each under TCG): run them with "
                "make test-microvm or SANDBOXD_TEST_PROFILES=microvm", allow_module_level=True)

GUEST_RELEASE_RE = re.compile(r"^6\.1\.\S+-cloud-amd64$")


def guest_release():
    """The release of the kernel build/microvm/vmlinuz links to (its
    package dir names it: linux-image-<release>)."""
    from sbxtest import build_dir
    target = os.path.realpath(os.path.join(build_dir(), "microvm", "vmlinuz"))
    m = re.search(r"vmlinuz-(\S+)$", target)
    assert m, f"cannot tell the guest kernel's release from {target}"
    return m.group(1)


def sh(c, sid, script, **kw):
    kw.setdefault("timeout_s", 60)
    return c.exec(sid, command=["sh", "-c", script], **kw)


def py(c, sid, code, **kw):
    kw.setdefault("timeout_s", 60)
    return c.exec(sid, command=["python3", "-c", code], **kw)


def ok(r):
    assert r["status"] == "succeeded", r
    return r["stdout"]


def vm_procs(state_dir):
    """QEMU and `sbx-vm relay` processes of a daemon's state dir: QEMU's
    argv names <state_dir>/microvm/<id>/console.log, the relay writes to
    qemu.log there (procs_using: cmdline or open fds under the path)."""
    out = []
    for pid in procs_using(state_dir):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"qemu-system" in cmd or b"sbx-vm" in cmd:
            out.append(pid)
    return out


def qemu_of(sid):
    """Live QEMU processes of one sandbox (its id is in the console path)."""
    return [p for p in procs_with(sid) if b"qemu-system" in open(f"/proc/{p}/cmdline", "rb").read()]


@pytest.fixture(scope="module")
def mv(alice, profile_table):
    p = profile_table.get("microvm")
    if not p or not p["available"]:
        why = f"microvm unavailable: {p and p['reason']}"
        if require_profiles():
            pytest.fail(why)
        pytest.skip(why)
    return alice


@pytest.fixture(scope="module")
def vm(mv):
    """One microvm session for the checks that leave it as it was."""
    s = mv.new_session("microvm", limits={"pids": 128})
    yield s
    mv.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- (a) profiles -------------------------------------------------------------

def test_profiles_available_dedicated_kernel_on_tcg(profile_table):
    for name in ("microvm", "kata"):
        p = profile_table[name]
        assert p["available"] is True and p["reason"] is None, p
        assert p["driver"] == "microvm" and p["class"] == "dedicated-kernel", p
        assert p["platform"] == "tcg", p
        assert "exec" in p["capabilities"] and "files" in p["capabilities"], p


def profiles_of(d):
    c = d.client(d.create_key("alice"))
    return c, {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}


def test_auto_without_kvm_is_unavailable_naming_microvm_accel(daemon_factory):
    if os.path.exists("/dev/kvm"):
        pytest.skip("this host has /dev/kvm: auto would probe it")
    d = daemon_factory(env={"SANDBOXD_MICROVM_ACCEL": "auto"}).start()
    c, ps = profiles_of(d)
    for name in ("microvm", "kata"):
        assert ps[name]["available"] is False, ps[name]
        assert "microvm_accel" in ps[name]["reason"], ps[name]
    # fail closed: no session, 503 runtime_unavailable, nothing started
    assert_error(c.post("/v1/sandbox/sessions", json={"profile": "microvm"}), 503,
                 "runtime_unavailable")
    assert vm_procs(d.state_dir) == []


def test_missing_kernel_is_unavailable_naming_it(daemon_factory):
    d = daemon_factory(env={"SANDBOXD_MICROVM_ACCEL": "tcg",
                            "SANDBOXD_MICROVM_KERNEL": "/nonexistent/vmlinuz"}).start()
    c, ps = profiles_of(d)
    for name in ("microvm", "kata"):
        assert ps[name]["available"] is False, ps[name]
        assert "/nonexistent/vmlinuz" in ps[name]["reason"], ps[name]
        assert "kernel" in ps[name]["reason"], ps[name]
    assert_error(c.post("/v1/sandbox/sessions", json={"profile": "kata"}), 503,
                 "runtime_unavailable")
    assert vm_procs(d.state_dir) == []


# ---- (b) its own kernel -----------------------------------------------------

def test_kernel_is_the_guests_not_the_hosts(mv, vm):
    out = ok(sh(mv, vm["id"], "uname -r; cat /proc/version"))
    release, version = out.splitlines()[:2]
    assert release != os.uname().release, out
    assert release == guest_release(), out
    assert GUEST_RELEASE_RE.match(release), out
    assert version.startswith("Linux version 6.1"), out
    with open("/proc/version") as f:
        assert version != f.read().strip()
    # the kernel's own log, read with syslog(2) (CAP_SYSLOG: guest root)
    log = ok(py(mv, vm["id"], "import ctypes; b = ctypes.create_string_buffer(1 << 20); "
                              "n = ctypes.CDLL(None).klogctl(3, b, len(b)); "
                              "print(b.raw[:n].decode(errors='replace'))"))
    assert "Linux version 6.1" in log, log[:2000]


def test_dmesg_works(mv, vm):
    r = sh(mv, vm["id"], "dmesg | head")
    assert "Linux version 6.1" in r["stdout"], r


# ---- (c) the host is out of sight ---------------------------------------------

def test_host_processes_are_invisible(mv, vm):
    mark = "sbxmark" + uuid.uuid4().hex
    host = subprocess.Popen(sleeper(mark, 120))
    try:
        wait_until(lambda: procs_with(mark), 10, what="the host marker process")
        out = ok(py(mv, vm["id"], f"""
import os
pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]
hits = []
for p in pids:
    if p == os.getpid():  # this very program carries the marker
        continue
    try:
        with open(f'/proc/{{p}}/cmdline', 'rb') as f:
            if b'{mark}' in f.read():
                hits.append(p)
    except OSError:
        pass
print(len(pids), max(pids), hits)
"""))
        n, top, hits = out.split(" ", 2)
        assert hits.strip() == "[]", out
        ps = ok(sh(mv, vm["id"], "ps -eo pid,args"))
        assert mark not in ps, ps
        assert ps.splitlines()[1].split(None, 1) == ["1", "/init"], ps
        assert "sandboxd" not in ps and "pytest" not in ps, ps
    finally:
        host.kill()
        host.wait()


def test_host_files_are_invisible(mv, vm):
    name = "sbxmark" + uuid.uuid4().hex
    d = tempfile.mkdtemp(prefix="sbx-mv-host-")
    try:
        with open(os.path.join(d, name), "w") as f:
            f.write("host secret")
        out = sh(mv, vm["id"], f"find / -path /proc -prune -o -name {name} -print 2>/dev/null; "
                               f"echo end")
        assert out["stdout"].strip() == "end", out
        guest_hostname = ok(sh(mv, vm["id"], "cat /etc/hostname"))
        if os.path.exists("/etc/hostname"):
            with open("/etc/hostname") as f:
                assert guest_hostname != f.read(), guest_hostname
        # the state dir, the build tree: nothing of the host's paths
        r = sh(mv, vm["id"], f"ls {d} {os.path.dirname(os.path.abspath(__file__))} 2>&1; true")
        assert "No such file" in r["stdout"], r
    finally:
        os.unlink(os.path.join(d, name))
        os.rmdir(d)


def test_daemon_port_and_host_network_unreachable(mv, vm, daemon):
    # from the host the port answers …
    assert requests.get(daemon.url + "/healthz", timeout=5).status_code == 200
    # … from inside the guest's 127.0.0.1 is the guest's own loopback
    out = ok(py(mv, vm["id"], f"""
import socket
for host in ('127.0.0.1', '10.0.2.2', '10.0.2.3'):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, {daemon.port})); print(host, 'CONNECTED')
    except OSError as e:
        print(host, type(e).__name__)
    finally:
        s.close()
"""))
    assert "CONNECTED" not in out, out
    assert out.startswith("127.0.0.1 ConnectionRefusedError"), out
    # sysfs is not mounted, and the (unprivileged) workload cannot mount it;
    # the kernel's own list of interfaces holds lo alone
    out = ok(py(mv, vm["id"], """
import ctypes, os
assert not os.listdir('/sys'), os.listdir('/sys')
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mount(b'sysfs', b'/sys', b'sysfs', 0, None) != 0
print(os.strerror(ctypes.get_errno()))
print(open('/proc/net/dev').read())
"""))
    why, devs = out.split("\n", 1)
    assert why == "Operation not permitted", out
    assert [l.split(":")[0].strip() for l in devs.splitlines()[2:] if l.strip()] == ["lo"], out


def test_dev_has_no_link_port_or_disk(mv, vm):
    out = ok(sh(mv, vm["id"], "ls -A /dev"))
    names = out.split()
    assert "null" in names and "urandom" in names, names
    assert not [n for n in names if n.startswith(("vport", "vd", "hvc", "mem", "kmsg", "port"))], names


# ---- (d) guest root attacks the host link ---------------------------------------

ATTACK = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def tried(what, ok):
    print(what, 'DONE' if ok else os.strerror(ctypes.get_errno()), flush=True)
print('uid', os.getuid(), flush=True)
# 1. sysfs, to find the port by its name; devtmpfs, for every node
for fs, dst in (('sysfs', '/tmp/s'), ('devtmpfs', '/tmp/d'), ('tmpfs', '/tmp/t')):
    os.makedirs(dst, exist_ok=True)
    tried('mount ' + fs, libc.mount(fs.encode(), dst.encode(), fs.encode(), 0, None) == 0)
# 2. the node by hand (virtio-portsdev's major)
major = [l.split()[0] for l in open('/proc/devices') if l.strip().endswith('virtio-portsdev')]
try:
    os.mknod('/tmp/link', 0o600 | 0o020000, os.makedev(int(major[0]), 1))
    tried('mknod', True)
except OSError as e:
    print('mknod', e.strerror, flush=True)
# 3. PID 1's own fds: through /proc, and with pidfd_getfd
try:
    print('fds of 1', os.listdir('/proc/1/fd'), flush=True)
except OSError as e:
    print('fds of 1', e.strerror, flush=True)
try:
    pidfd = os.pidfd_open(1)
    for n in range(3, 8):
        tried(f'pidfd_getfd {n}', libc.syscall(438, pidfd, n, 0) >= 0)
except OSError as e:
    print('pidfd_open', e.strerror, flush=True)
print('/dev', sorted(os.listdir('/dev')), flush=True)
"""


def test_the_workload_cannot_reach_the_link(mv, vm, daemon):
    # The workload runs as the sandbox user: every way root in the guest
    # would take onto the link (the port's node, devtmpfs, PID 1's fd) is
    # refused.  What a guest that got there anyway could do to the host is
    # tests/microvm/test_link_hostile.py's: the relay ends its link.
    out = ok(py(mv, vm["id"], ATTACK))
    assert out.startswith("uid 1000\n"), out
    assert "DONE" not in out, out
    for what in ("mount sysfs", "mount devtmpfs", "mount tmpfs", "mknod"):
        assert f"{what} Operation not permitted" in out, out
    assert ("fds of 1 Permission denied" in out), out
    assert all(n not in out.split("/dev", 1)[1] for n in ("vport", "vda", "console")), out
    assert mv.get(f"/v1/sandbox/sessions/{vm['id']}").json()["status"] == "ready"
    assert daemon.healthy()


# ---- (e), (f) bombs ------------------------------------------------------------

HOG = ("print('start', flush=True)\n"
       "x = []\n"
       "while True:\n"
       "    x.append(bytearray(1 << 20))\n")


def test_memory_bomb_is_killed_inside_the_guest(mv, daemon):
    """256Mi: the guest's own OOM killer (or PID 1's memory-stall watchdog,
    vm/relay_guest.c) ends the hog, reported as the container driver
    reports it (test_exec.py, assert_memory_enforced); QEMU (its host
    cgroup is the guest's memory plus QEMU's own) and the session live on.
    Then a shell runs the hog: the hog alone dies, the shell outlives it
    (the watchdog once killed the biggest process left after the kernel had
    already ended the hog: the shell, one exec in two)."""
    s = mv.new_session("microvm", limits={"memory": "256Mi"})
    try:
        r = mv.exec(s["id"], command=["python3", "-c", HOG], timeout_s=60)
        assert r["stdout"] == "start\n", r
        assert r["status"] == "oom_killed" and r["reason"] == "memory", r
        assert r["exit_code"] is None and r["signal"] == 9, r
        assert r["error"] and r["error"]["reason"] == "memory" and "256Mi" in r["error"]["message"]
        assert r["usage"]["oom_kills"] >= 1, r
        assert daemon.healthy()
        # the guest lives on
        assert ok(mv.exec(s["id"], command=["echo", "ok"])) == "ok\n"
        assert len(qemu_of(s["id"])) == 1
        for _ in range(2):
            r = sh(mv, s["id"], 'python3 -c "$HOG"; rc=$?; sleep 1; echo survived rc=$rc; '
                                'exit $rc', env={"HOG": HOG})
            assert r["stdout"] == "start\nsurvived rc=137\n", r
            assert r["status"] == "oom_killed" and r["exit_code"] == 137, r
            assert r["usage"]["oom_kills"] >= 1, r
    finally:
        mv.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_fork_bomb_is_bounded_by_pids(mv, daemon):
    s = mv.new_session("microvm", limits={"pids": 64})
    try:
        t0 = time.monotonic()
        r = sh(mv, s["id"], "b() { b | b & }; b; sleep 30", timeout_s=15)
        took = time.monotonic() - t0
        assert r["status"] in ("timeout", "killed", "failed"), r
        assert took < 15 + 20, (took, r)
        assert daemon.healthy()
        r = mv.exec(s["id"], command=["echo", "ok"], timeout_s=30)
        assert ok(r) == "ok\n"
        # nothing of the bomb is left running
        out = ok(sh(mv, s["id"], "ps -e --no-headers | wc -l"))
        assert int(out) < 64, out
    finally:
        mv.delete(f"/v1/sandbox/sessions/{s['id']}")


# ---- (g) kill -9 of the daemon ---------------------------------------------------

def test_kill9_then_restart_leaves_no_qemu(daemon_factory):
    d = daemon_factory(env={"SANDBOXD_MICROVM_ACCEL": "tcg"}).start()
    c = d.client(d.create_key("alice"))
    s = c.new_session("microvm")
    assert ok(c.exec(s["id"], command=["echo", "up"])) == "up\n"
    before = vm_procs(d.state_dir)
    assert len(before) >= 2, before  # QEMU and the relay
    d.kill9()
    d.start()
    wait_until(lambda: not vm_procs(d.state_dir), 20,
               what=f"the previous run's QEMU and relay ({before}) to be gone")
    for pid in before:
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", pid
    assert not os.listdir(os.path.join(d.state_dir, "microvm"))
    g = c.get(f"/v1/sandbox/sessions/{s['id']}").json()
    assert g["status"] != "ready", g
    n = c.new_session("microvm")
    assert ok(c.exec(n["id"], command=["echo", "again"])) == "again\n"
    c.delete(f"/v1/sandbox/sessions/{n['id']}")


# ---- (h) identities ------------------------------------------------------------

IDENT = "cat /proc/sys/kernel/random/boot_id; hostname; head -c16 /dev/urandom | od -An -tx1"


@pytest.fixture(scope="module")
def identities(mv, vm):
    k = mv.new_session("kata")
    try:
        a = ok(sh(mv, vm["id"], IDENT)).splitlines()
        b = ok(sh(mv, k["id"], IDENT)).splitlines()
    finally:
        mv.delete(f"/v1/sandbox/sessions/{k['id']}")
    return a, b, vm["id"], k["id"]


def test_two_guests_have_distinct_boot_ids_and_randomness(identities):
    a, b, _, _ = identities
    assert a[0] != b[0], (a, b)
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert f.read().strip() not in (a[0], b[0])
    assert a[2] != b[2], (a, b)


def test_two_guests_have_distinct_hostnames(identities):
    a, b, _, _ = identities
    assert a[1] != b[1], (a, b)


# ---- (h2) restored from the golden state ------------------------------------------
# A key of its own (pids 96, 256Mi): its first create boots cold and has the
# driver save the key's golden state; the two creates after it restore
# copies (docs/microvm.md, "Warm pool and golden states").

RKEY = {"pids": 96, "memory": "256Mi"}
RIDENT = ("cat /proc/sys/kernel/random/boot_id; hostname; head -c16 /dev/urandom | od -An -tx1; "
          "date +%s.%N; cat /etc/machine-id 2>/dev/null || echo no-machine-id")


def argv_of(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode(errors="replace").split("\0")


def golden_of(state_dir, pids):
    """The kernel command line saved with the golden state of the key
    whose guests boot with sbx.pids=<pids> (the state file beside it is
    renamed into place last, so both are whole)."""
    import glob
    for cmd in glob.glob(os.path.join(state_dir, "microvm", "golden-*.cmdline")):
        if not os.path.exists(cmd[:-len(".cmdline")] + ".state"):
            continue
        with open(cmd) as f:
            line = f.read()
        if f" sbx.pids={pids} " in line:
            return line, os.path.getmtime(cmd[:-len(".cmdline")] + ".state")
    return None


@pytest.fixture(scope="module")
def restored(mv, daemon):
    """(cold, [restored, restored], golden cmdline): sessions with their
    identity as read right after the create."""
    made = []
    try:
        cold = mv.new_session("microvm", limits=RKEY)
        made.append(cold)
        golden, saved = wait_until(lambda: golden_of(daemon.state_dir, RKEY["pids"]), 180,
                                   interval=0.2, what="the key's golden state")
        cold["ident"] = ok(sh(mv, cold["id"], RIDENT)).splitlines()
        # let the clock a copy would resume with fall behind the host's
        time.sleep(max(0.0, saved + 5 - time.time()))
        copies = []
        for _ in range(2):
            t0 = time.monotonic()
            c = mv.new_session("microvm", limits=RKEY)
            c["took"] = time.monotonic() - t0
            made.append(c)
            c["host_time"] = time.time()
            c["ident"] = ok(sh(mv, c["id"], RIDENT)).splitlines()
            q = qemu_of(c["id"])
            assert len(q) == 1, q
            c["argv"] = argv_of(q[0])
            copies.append(c)
        yield cold, copies, golden
    finally:
        for m in made:
            mv.delete(f"/v1/sandbox/sessions/{m['id']}")


def test_restored_guests_are_copies_of_the_golden_state(restored):
    cold, copies, golden = restored
    ghost = re.search(r"sbx\.hostname=(\S+)", golden).group(1)
    assert ghost.startswith("mvg-"), golden
    for c in copies:
        # QEMU resumed the saved state with the golden guest's command line
        assert "-incoming" in c["argv"], c["argv"]
        append = c["argv"][c["argv"].index("-append") + 1]
        assert append == golden.strip(), (append, golden)
        print(f"restored create {c['took'] * 1000:.0f} ms")


def test_restored_guests_get_fresh_identities(restored):
    """Every part of the identity checked, all failures listed at once
    (without the driver's SBX_LINK_MSG_IDENTITY the copies share the
    golden guest's hostname, clock and RNG output)."""
    cold, copies, golden = restored
    ghost = re.search(r"sbx\.hostname=(\S+)", golden).group(1)
    a, b = (c["ident"] for c in copies)
    with open("/proc/sys/kernel/random/boot_id") as f:
        host_boot = f.read().strip()
    wrong = []
    for c in copies:
        boot, host, rand, clock, mid = c["ident"]
        if host != c["id"].replace("_", "-") or host == ghost:
            wrong.append(f"hostname {host} (session {c['id']}, golden {ghost})")
        if abs(float(clock) - c["host_time"]) >= 3:
            wrong.append(f"clock {clock}, host {c['host_time']:.3f}")
        if boot in (host_boot, cold["ident"][0]):
            wrong.append(f"boot id {boot} shared with the host or a cold guest")
        if mid != "no-machine-id":
            wrong.append(f"a machine-id in the root image: {mid}")
    # two copies of one saved RNG state and boot: nothing of it shared
    if a[0] == b[0]:
        wrong.append(f"both copies have boot id {a[0]}")
    if a[2] == b[2]:
        wrong.append(f"both copies read the same urandom bytes {a[2]}")
    assert not wrong, wrong
    assert cold["ident"][1] == cold["id"].replace("_", "-")
    assert a[2] != cold["ident"][2]


def test_restored_guest_works_and_keeps_to_itself(mv, restored):
    _, (x, y), _ = restored
    mark = "sbxmark" + uuid.uuid4().hex
    assert ok(sh(mv, x["id"], f"echo {mark} > /work/m; cat /work/m")) == mark + "\n"
    assert ok(py(mv, x["id"], "import os, sys; print(sum(range(10)), os.getuid())")) == "45 1000\n"
    r = mv.put(f"/v1/sandbox/sessions/{x['id']}/files", params={"path": "/work/up.txt"},
               data=b"restored")
    assert r.status_code == 201, r.text
    assert ok(sh(mv, x["id"], "cat /work/up.txt")) == "restored"
    # the other copy has its own overlay: none of that
    r = sh(mv, y["id"], "ls /work; cat /work/m 2>&1; true")
    assert mark not in r["stdout"] and "up.txt" not in r["stdout"], r


# ---- (h3) the warm pool -------------------------------------------------------------

def pool_idle(c):
    body = c.get("/metrics").text
    m = re.search(r'^sandbox_pool_idle\{profile="microvm"\} (\d+)', body, re.M)
    return int(m.group(1)) if m else 0


def pooled_guests(state_dir):
    """{QEMU pid: hostname} of a daemon's pooled guests (named mvp-…)."""
    out = {}
    for pid in vm_procs(state_dir):
        argv = argv_of(pid)
        if not argv or "qemu-system" not in argv[0]:
            continue
        m = re.search(r"sbx\.hostname=(mvp-\S+)", " ".join(argv))
        if m:
            out[pid] = m.group(1)
    return out


def test_create_is_served_from_the_warm_pool_once(daemon_factory, tmp_path):
    """A profile with pool_size = 1: the create takes the booted guest (the
    pool gauge drops, the session's guest is the pooled QEMU), it works, and
    after the delete that guest is gone; the refill is another guest."""
    conf = tmp_path / "pool.conf"
    conf.write_text("[profile.microvm]\ndriver = microvm\npool_size = 1\n")
    d = daemon_factory(extra_args=["--config", str(conf)],
                       env={"SANDBOXD_MICROVM_SNAPSHOT": "off",
                            "SANDBOXD_MICROVM_POOL_SIZE": "1"}).start()
    c = d.client(d.create_key("alice"))
    wait_until(lambda: pool_idle(c) == 1, 120, interval=0.2, what="a pooled guest")
    before = pooled_guests(d.state_dir)
    assert len(before) == 1, before
    (qpid, qhost), = before.items()
    t0 = time.monotonic()
    s = c.new_session("microvm")
    took = time.monotonic() - t0
    # a refill takes a whole guest boot (seconds under TCG): still 0 here
    assert pool_idle(c) == 0
    assert qemu_of(s["id"]) == [], "a pooled guest's QEMU is named for the pool, not the session"
    assert ok(sh(c, s["id"], "hostname")) == qhost + "\n"
    assert os.path.exists(f"/proc/{qpid}")
    mark = "sbxmark" + uuid.uuid4().hex
    assert ok(sh(c, s["id"], f"echo {mark} > /work/m; cat /work/m; uname -r")) == \
        f"{mark}\n{guest_release()}\n"
    boot = ok(sh(c, s["id"], "cat /proc/sys/kernel/random/boot_id"))
    print(f"pooled create {took * 1000:.0f} ms")
    assert c.delete(f"/v1/sandbox/sessions/{s['id']}").status_code in (200, 204)
    wait_until(lambda: not os.path.exists(f"/proc/{qpid}") or
               open(f"/proc/{qpid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", 20,
               what="the pooled guest's QEMU to go with its session")
    # never handed out again: the next create gets the refill, a new guest
    wait_until(lambda: pool_idle(c) == 1, 120, interval=0.2, what="the pool's refill")
    after = pooled_guests(d.state_dir)
    assert len(after) == 1 and qpid not in after and qhost not in after.values(), (before, after)
    n = c.new_session("microvm")
    try:
        assert ok(sh(c, n["id"], "hostname")) == list(after.values())[0] + "\n"
        r = sh(c, n["id"], "cat /work/m 2>&1; cat /proc/sys/kernel/random/boot_id")
        assert mark not in r["stdout"] and boot not in r["stdout"], r
    finally:
        c.delete(f"/v1/sandbox/sessions/{n['id']}")


# ---- (i) floods -----------------------------------------------------------------

def test_output_flood_is_truncated(mv, vm, daemon, profile_table):
    limit = profile_table["microvm"]["limits"]["output_bytes"]
    t0 = time.monotonic()
    r = sh(mv, vm["id"], "yes | head -c 50000000; echo done >&2", timeout_s=120)
    took = time.monotonic() - t0
    assert r["status"] == "succeeded", {k: v for k, v in r.items() if k != "stdout"}
    assert r["stdout_truncated"] is True, r["stdout"][:100]
    assert len(r["stdout"]) <= limit and r["stdout"].startswith("y\ny\n")
    assert r["stdout_dropped_bytes"] == 50_000_000 - len(r["stdout"]), r["stdout_dropped_bytes"]
    assert r["stderr"] == "done\n"
    assert daemon.healthy()
    assert ok(mv.exec(vm["id"], command=["echo", "ok"])) == "ok\n"
    print(f"50 MB flood: {took:.1f} s")


def test_20mb_file_round_trip(mv, vm):
    base = f"/v1/sandbox/sessions/{vm['id']}/files"
    blob = os.urandom(20 << 20)
    digest = hashlib.sha256(blob).hexdigest()
    t0 = time.monotonic()
    r = mv.put(base, params={"path": "/work/big.bin"}, data=blob)
    assert r.status_code == 201, r.text
    assert r.json()["size"] == len(blob)
    up = time.monotonic() - t0
    out = ok(sh(mv, vm["id"], "sha256sum /work/big.bin"))
    assert out.split()[0] == digest, out
    t0 = time.monotonic()
    r = mv.get(base, params={"path": "/work/big.bin"})
    assert r.status_code == 200
    assert hashlib.sha256(r.content).hexdigest() == digest
    print(f"20 MiB up {up:.1f} s, down {time.monotonic() - t0:.1f} s")
    mv.delete(base, params={"path": "/work/big.bin"})
