"""daemon.py — the benchmark's handle on a real sandboxd: start it on a free
port with a throw-away state dir and key, talk to it (setup calls only; the
timed calls go through apiloop), and read its memory and CPU from /proc and
the cgroup filesystem."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


class Failed(Exception):
    """A measurement that could not be made; str() is the reason for the table."""


def first_line(text, fallback="no message"):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:160]
    return fallback


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, build, workdir, name, extra_env=None, extra_args=None):
        self.bin = os.path.join(build, "sandboxd")
        self.state = os.path.join(workdir, "state-" + name)
        self.log_path = os.path.join(workdir, "daemon-" + name + ".log")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.env = dict(os.environ, **(extra_env or {}))
        self.args = list(extra_args or [])
        self.proc = None
        self.key = None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # ---- lifecycle ------------------------------------------------------

    def start(self):
        os.makedirs(self.state, exist_ok=True)
        r = subprocess.run([self.bin, "key", "create", "--tenant", "bench",
                            "--state-dir", self.state],
                           capture_output=True, text=True, env=self.env, timeout=60)
        if r.returncode != 0:
            raise Failed("key create: " + first_line(r.stderr))
        self.key = r.stdout.strip()
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.bin, "serve", "--listen", "127.0.0.1:%d" % self.port,
             "--state-dir", self.state, "--log-level", "warn",
             "--enable-unsafe-process-driver"] + self.args,
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        t0 = time.monotonic()
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Failed("daemon exited: " + first_line(self.log_tail()))
            try:
                if self.call("GET", "/healthz")[0] == 200:
                    self.healthz_s = time.monotonic() - t0
                    self.wait_probed(t0, deadline + 30)
                    return
            except OSError:
                pass
            time.sleep(0.01)
        raise Failed("daemon not healthy after 30 s")

    def wait_probed(self, t0, deadline):
        """Drivers probe in the background: wait until none is probing, so
        that profiles are final (/readyz lists the ones still probing)."""
        self.probed_s = None
        while time.time() < deadline:
            try:
                body = self.call("GET", "/readyz")[1]
                if isinstance(body, dict) and not body.get("checks", {}).get("probing"):
                    self.probed_s = time.monotonic() - t0
                    return
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    @property
    def pid(self):
        return self.proc.pid

    # ---- API (setup only) -----------------------------------------------

    def call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + (self.key or ""))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=timeout) as r:
                raw = r.read()
                code = r.status
        except urllib.error.HTTPError as e:
            raw = e.read()
            code = e.code
        try:
            return code, json.loads(raw) if raw else None
        except ValueError:
            return code, raw.decode(errors="replace")

    def must(self, method, path, body=None, want=(200, 201, 202, 204)):
        code, js = self.call(method, path, body)
        if code not in want:
            msg = js.get("error", {}).get("message") if isinstance(js, dict) else js
            raise Failed("%s %s: HTTP %d %s" % (method, path, code, first_line(str(msg))))
        return js

    # ---- /proc ------------------------------------------------------------

    def rss_kib(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def tree(self):
        """The daemon's pid and every descendant's."""
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            ppid = int(st[st.rfind(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(children.get(p, []))
        return out


def cpu_ticks(pid, with_children):
    """utime+stime (and cutime+cstime: reaped children) of pid, in clock ticks."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return 0
    v = st[st.rfind(")") + 2:].split()
    t = int(v[11]) + int(v[12])
    if with_children:
        t += int(v[13]) + int(v[14])
    return t


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_cgroup(pid):
    """(version, path relative to the controller root) of pid's memory cgroup."""
    v2 = None
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                if "memory" in ctrls.split(","):
                    return 1, path
                if hid == "0":
                    v2 = path
    except OSError:
        return None
    return (2, v2) if v2 is not None else None


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def cgroup_bytes(cg):
    """(total usage, kernel part) in bytes of one memory cgroup."""
    ver, path = cg
    if ver == 1:
        base = "/sys/fs/cgroup/memory" + path
        return (_read_int(base + "/memory.usage_in_bytes"),
                _read_int(base + "/memory.kmem.usage_in_bytes"))
    base = "/sys/fs/cgroup" + path
    kernel = 0
    try:
        with open(base + "/memory.stat") as f:
            for line in f:
                k, v = line.split()
                if k == "kernel":
                    kernel = int(v)
    except OSError:
        pass
    return _read_int(base + "/memory.current"), kernel


def host_used_kib():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            info[k] = int(v.split()[0])
    return info["MemTotal"] - info["MemAvailable"]


def settle(daemon, timeout=8.0):
    """Waits until the daemon's process tree stops changing (pool refilled)."""
    end, last, stable = time.time() + timeout, -1, 0
    while time.time() < end and stable < 3:
        n = len(daemon.tree())
        stable = stable + 1 if n == last else 0
        last = n
        time.sleep(0.3)


def memory_snapshot(daemon):
    """Sum of Pss over the daemon's tree, plus the memory of every cgroup its
    descendants live in (other than the daemon's own), plus the kernel memory
    of the daemon's own cgroup (where anything built before a sandbox joins
    its cgroup, e.g. a network namespace, is charged), plus host-wide use."""
    pids = daemon.tree()
    own = memory_cgroup(daemon.pid)
    cgs = {memory_cgroup(p) for p in pids[1:]} - {None}
    # Usage is hierarchical: keep only leaves strictly below the daemon's
    # cgroup, so that a parent (or the daemon's own) is never added on top
    # of its children.
    cgs = {c for c in cgs
           if c != own and not (own and own[1].startswith(c[1].rstrip("/") + "/"))
           and not any(o[0] == c[0] and o[1].startswith(c[1].rstrip("/") + "/") for o in cgs)}
    usage = kmem = 0
    for cg in cgs:
        u, k = cgroup_bytes(cg)
        usage += u
        kmem += k
    own_kmem = cgroup_bytes(own)[1] if own and own[1] not in ("", "/") else 0
    return {
        "pss_kib": sum(pss_kib(p) for p in pids),
        "cg_usage_kib": usage // 1024,
        "cg_kmem_kib": kmem // 1024,
        "own_kmem_kib": own_kmem // 1024,
        "host_used_kib": host_used_kib(),
        "procs": len(pids),
        "cgroups": len(cgs),
    }
