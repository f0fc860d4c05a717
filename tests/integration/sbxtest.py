"""sbxtest.py — helpers for the integration suite: locating the built
binaries, running a real sandboxd on a free 127.0.0.1 port with its own
state dir, an HTTP client bound to one API key, and process-table scans.

Nothing here mocks the daemon: every test talks HTTP to the real binary.
Traffic only ever goes to 127.0.0.1.
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import requests

import sbxpg

ROUTE_ID_RE = re.compile(r"(ses|exe)_[0-9a-zA-Z]+")


# ---- binaries -------------------------------------------------------------

def build_dir():
    b = os.environ.get("SANDBOXD_BUILD")
    if not b:
        here = os.path.dirname(os.path.abspath(__file__))
        b = os.path.join(here, "..", "..", "build")
    return os.path.abspath(b)


def find_binary(name, subdir):
    """The lead may move binaries to the build root: look in both places."""
    b = build_dir()
    for cand in (os.path.join(b, name), os.path.join(b, "src", subdir, name)):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError(f"{name} not found under {b} (build it first: ninja -C {b})")


def sandboxd_bin():
    return find_binary("sandboxd", "daemon")


def sbx_bin():
    return find_binary("sbx", "cli")


def sbx_init_bin():
    return find_binary("sbx-init", "init")


# ---- processes ------------------------------------------------------------

def own_cgroup_v2():
    """On a cgroup v2 test host (SANDBOXD_TEST_CGROUP: a slice with the
    controllers enabled, as the host lab sets up), a fresh cgroup holding
    only the daemon, as systemd gives a Delegate=yes service: the daemon
    refuses a cgroup it shares with the test runner.  None elsewhere."""
    parent = os.environ.get("SANDBOXD_TEST_CGROUP")
    if not parent:
        return None
    d = tempfile.mkdtemp(prefix="sbx-daemon-", suffix=".service", dir=parent)

    def enter():
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write("0")
    return enter


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def procs_with(marker):
    """PIDs of live (non-zombie) processes whose cmdline contains marker."""
    found = []
    m = marker.encode()
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{p}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if m in cmd and state != b"Z":
            found.append(int(p))
    return found


def wait_until(pred, timeout, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def marker():
    return "sbxmark" + uuid.uuid4().hex


def tag_of(mark):
    """The process name (comm, 15 characters) a marked workload gives
    itself.  The host sees a gVisor workload's cmdline nowhere (its tasks
    live inside the Sentry), but `runsc ps` lists their names."""
    return "sbx" + mark[-12:]


def name_self(mark):
    """Python statements that set the process name to tag_of(mark)."""
    return f"import ctypes; ctypes.CDLL(None).prctl(15, b'{tag_of(mark)}', 0, 0, 0); "


def sleeper(mark, seconds=300):
    """argv of a process that sleeps and carries mark in its own cmdline
    (seen by procs_with on the host) and tag_of(mark) as its name (seen by
    gvisor_procs_with inside gVisor)."""
    return ["python3", "-c", name_self(mark) + f"import time; time.sleep({seconds})", mark]


def ticker(mark, every=0.1):
    """argv of a process that prints "tick" every `every` s, forever; marked
    like sleeper()."""
    return ["python3", "-c", name_self(mark) +
            f"import time\nwhile True:\n print('tick', flush=True); time.sleep({every})", mark]


def runsc_for(daemon):
    """The runsc a daemon uses (its own env, else the run's, else PATH)."""
    return daemon.env.get("SANDBOXD_RUNSC") or os.environ.get("SANDBOXD_RUNSC") or "runsc"


def gvisor_procs_with(daemon, mark):
    """"id:pid" of the tasks named tag_of(mark) inside the gVisor sandboxes
    of this daemon, as `runsc ps` (gVisor's own process table, asked through
    runsc's control socket) lists them.  A sandbox runsc still lists as
    running but cannot answer counts as holding the task: absence is only
    believed when gVisor says so or the sandbox is gone."""
    root = os.path.join(daemon.state_dir, "gvisor-runsc")
    if not os.path.isdir(root):
        return []
    runsc = runsc_for(daemon)
    tag = tag_of(mark)

    def running_ids():
        r = subprocess.run([runsc, "--root", root, "list", "--format", "json"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"runsc list: {r.stderr.strip()}"
        return [c["id"] for c in json.loads(r.stdout or "null") or []
                if c.get("status") in ("created", "running", "paused")]

    found = []
    for cid in running_ids():
        # the table (this runsc's json is the pids alone):
        # UID PID PPID C TTY STIME TIME CMD, CMD being the task's name
        r = subprocess.run([runsc, "--root", root, "ps", cid],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            if cid in running_ids():
                found.append(f"{cid}:?")
            continue
        for line in r.stdout.splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 8 and cols[-1] == tag:
                found.append(f"{cid}:{cols[1]}")
    return found


def workload_procs(daemon, mark):
    """Live processes of a marked workload (sleeper, ticker, name_self)
    wherever it runs: host processes whose cmdline carries mark (process
    and container drivers) and tasks inside the daemon's gVisor sandboxes
    named tag_of(mark)."""
    return procs_with(mark) + gvisor_procs_with(daemon, mark)


def procs_using(path):
    """PIDs whose cmdline names path or that hold an fd under it: what a
    daemon on that (unique, temporary) state dir left behind."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                hit = path.encode() in f.read()
            if not hit:
                for fd in os.listdir(f"/proc/{p}/fd"):
                    try:
                        if os.readlink(f"/proc/{p}/fd/{fd}").startswith(path):
                            hit = True
                            break
                    except OSError:
                        pass
        except OSError:
            continue
        if hit:
            found.append(int(p))
    return found


def reap_leftovers(path):
    """Kills (by pid) what a test daemon on state dir `path` left behind;
    returns the pids so the caller can complain."""
    left = procs_using(path)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # kB → bytes
    raise KeyError(field)


# ---- the daemon -----------------------------------------------------------

class Daemon:
    """One sandboxd serve process on a state dir; restartable."""

    def __init__(self, state_dir, extra_args=(), env=None, sqlite=False):
        self.state_dir = str(state_dir)
        os.makedirs(self.state_dir, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_args = list(extra_args)
        # Environment overrides for this daemon only (e.g. SANDBOXD_RUNSC),
        # on top of the test run's own environment.
        self.env = dict(env or {})
        self.proc = None
        self.log_path = os.path.join(self.state_dir, "sandboxd.log")
        self.starts = 0
        # SANDBOXD_TEST_DATABASE=postgres: this state dir's own database;
        # sqlite: SQLite even then (a daemon in its own network namespace
        # cannot reach the test run's PostgreSQL server).
        self.database_url = None if sqlite else sbxpg.database_for(self.state_dir,
                                                                    sandboxd_bin())
        self.db_args = ["--database", self.database_url] if self.database_url else []

    def argv(self):
        return [sandboxd_bin(), "serve", "--listen", f"127.0.0.1:{self.port}",
                "--state-dir", self.state_dir, "--sbx-init", sbx_init_bin(),
                "--enable-unsafe-process-driver", "--log-format", "json"] + self.db_args \
            + self.extra_args

    def start(self, timeout=60, probed=True):
        """Starts and waits for /healthz; probed: also for every driver's
        start probe to finish (they run in the background), so that
        profiles are in their final state."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        for attempt in range(3):
            try:
                return self._start_once(timeout, probed)
            except RuntimeError:
                # free_port() only found a port free a moment ago: another
                # listener (this daemon's own egress proxy or DNS responder
                # among them) may take it first.  A first start moves on.
                if self.starts > attempt + 1 or not self._lost_its_port() or attempt == 2:
                    raise
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"

    def _lost_its_port(self):
        tail = self.log_tail(40).split("==== start #")[-1]
        return f"cannot listen on 127.0.0.1:{self.port}" in tail

    def _start_once(self, timeout, probed):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n==== start #{self.starts} ====\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log, start_new_session=True,
                                     env=dict(os.environ, **self.env),
                                     preexec_fn=own_cgroup_v2())
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited with {self.proc.returncode} at start:\n"
                                   + self.log_tail())
            try:
                if requests.get(self.url + "/healthz", timeout=1).status_code == 200:
                    if not probed or not self.probing():
                        return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"sandboxd not healthy within {timeout}s:\n" + self.log_tail())

    def probing(self):
        """Names of the profiles whose driver probe is still running."""
        r = requests.get(self.url + "/readyz", timeout=5)
        return r.json().get("checks", {}).get("probing", [])

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def healthy(self):
        try:
            return requests.get(self.url + "/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, timeout=10):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if not self.alive():
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return None

    def kill9(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, n=80):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return "(no log)"

    def create_key(self, tenant, admin=False):
        argv = [sandboxd_bin(), "key", "create", "--tenant", tenant, "--state-dir",
                self.state_dir] + self.db_args + (["--admin"] if admin else [])
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"key create failed: {r.stderr}"
        key = r.stdout.strip()
        assert key and "\n" not in key and " " not in key, f"key create printed {r.stdout!r}"
        return key

    def client(self, key, lang=None):
        return Client(self.url, key, lang)


# ---- the client -----------------------------------------------------------

class Client:
    """requests bound to a base URL and one API key (None → no header)."""

    def __init__(self, base, key, lang=None, timeout=120):
        self.base = base
        self.key = key
        self.lang = lang
        self.timeout = timeout
        self.s = requests.Session()

    def headers(self, extra=None):
        h = {}
        if self.key is not None:
            h["Authorization"] = f"Bearer {self.key}"
        if self.lang:
            h["Accept-Language"] = self.lang
        h.update(extra or {})
        return h

    def request(self, method, path, headers=None, **kw):
        kw.setdefault("timeout", self.timeout)
        return self.s.request(method, self.base + path, headers=self.headers(headers), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def with_lang(self, lang):
        return Client(self.base, self.key, lang, self.timeout)

    # -- conveniences used across the suite --

    def new_session(self, profile, **body):
        body = dict(body, profile=profile)
        r = self.post("/v1/sandbox/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def exec(self, sid, **body):
        r = self.post(f"/v1/sandbox/sessions/{sid}/exec", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    def new_execution(self, profile, **body):
        body = dict(body, profile=profile)
        r = self.post("/v1/sandbox/executions", json=body)
        assert r.status_code == 202, r.text
        return r.json()

    def list_all(self, path, field, **params):
        """Every object of a paginated list, following next_cursor."""
        out, cursor = [], None
        for _ in range(1000):
            q = dict(params, limit=200)
            if cursor:
                q["cursor"] = cursor
            r = self.get(path, params=q)
            assert r.status_code == 200, r.text
            out += r.json()[field]
            cursor = r.json()["next_cursor"]
            if not cursor:
                return out
        raise AssertionError("pagination never ends")

    def wait_execution(self, eid, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, min(30.0, deadline - time.monotonic()))
            r = self.get(f"/v1/sandbox/executions/{eid}", params={"wait_s": f"{left:.1f}"})
            assert r.status_code == 200, r.text
            e = r.json()
            if e["status"] not in ("queued", "running"):
                return e
            if time.monotonic() >= deadline:
                raise AssertionError(f"execution {eid} still {e['status']} after {timeout}s")


def assert_error(r, status, code, field=None):
    """The error envelope of DESIGN §4, exactly."""
    assert r.status_code == status, f"want {status} {code}, got {r.status_code}: {r.text[:500]}"
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"}, body
    e = body["error"]
    assert set(e) >= {"code", "message", "message_i18n", "request_id", "details"}, e
    assert e["code"] == code, e
    assert isinstance(e["message"], str) and e["message"], e
    assert set(e["message_i18n"]) == {"en", "fr"}, e
    assert e["message_i18n"]["en"] and e["message_i18n"]["fr"], e
    assert e["request_id"] and e["request_id"] == r.headers.get("X-Request-Id"), (e, r.headers)
    assert isinstance(e["details"], dict), e
    if isinstance(field, tuple):  # any of these names is a fair answer
        assert e["details"].get("field") in field, e
    elif field is not None:
        assert e["details"].get("field") == field, e
    return e


def raw_http(port, head, body_chunks, read_timeout=30):
    """Sends a request over a raw socket, tolerating the server closing early
    (e.g. a 413 answered before the body arrived); returns (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        try:
            s.sendall(head.encode())
            for c in body_chunks:
                s.sendall(c)
        except OSError:
            pass
        data = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
                if b"\r\n\r\n" in data:
                    hdr, _, rest = data.partition(b"\r\n\r\n")
                    m = re.search(rb"(?i)content-length:\s*(\d+)", hdr)
                    if m and len(rest) >= int(m.group(1)):
                        break
        except OSError:
            pass
    finally:
        s.close()
    if not data:
        return None, None
    hdr, _, rest = data.partition(b"\r\n\r\n")
    status = int(hdr.split(b" ", 2)[1])
    return status, rest


def normalise_ids(text):
    return ROUTE_ID_RE.sub("ID", text)


def json_dump(o):
    return json.dumps(o, indent=1, sort_keys=True)
