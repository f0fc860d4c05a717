"""limitsbench.py — the reliability rows of `make bench` (issue 13): how
long `sandboxd serve` takes to answer /healthz, and what the daemon holds
(VmRSS, open fds, threads) idle, under the heaviest load one tenant can put
on it within the defaults that this host can run, and with 1,000 open
connections.  `bench.py --only limits` runs just these."""

import os
import signal
import socket
import subprocess
import time

from daemon import Daemon, Failed, free_port, settle

FLOOD_SOURCES = ["127.0.0.%d" % i for i in range(2, 22)]  # 20 addresses, under 64 each
FLOOD_PER_SOURCE = 50
MAX_LOAD_SESSIONS = 8  # a ceiling for this host, should no tenant-wide limit refuse first
# Each background process writes 2 MiB to stdout and to stderr (twice the
# 1 MiB a stream keeps by default), then sleeps: the daemon holds the most
# output it keeps per process, and no CPU is burnt once it is written.
OUTPUT_CMD = ["sh", "-c", "head -c 2097152 /dev/zero | tr '\\0' o; "
              "head -c 2097152 /dev/zero | tr '\\0' e >&2; exec sleep 600"]


def log(msg):
    import sys
    print("bench: " + msg, file=sys.stderr, flush=True)


def footprint(pid):
    """VmRSS (KiB), open fds and threads of pid."""
    out = {"fds": len(os.listdir("/proc/%d/fd" % pid))}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss_kib"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    return out


def healthz_once(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def start_to_healthy_us(b, i, env, timeout=120):
    state = os.path.join(b.tmp, "state-start%d" % i)
    os.makedirs(state, exist_ok=True)
    port = free_port()
    with open(os.path.join(b.tmp, "daemon-start%d.log" % i), "w") as logf:
        t0 = time.monotonic()
        p = subprocess.Popen([os.path.join(b.build, "sandboxd"), "serve", "--listen",
                              "127.0.0.1:%d" % port, "--state-dir", state, "--log-level", "warn",
                              "--enable-unsafe-process-driver"], stdout=logf,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env={k: v for k, v in dict(os.environ, **env).items()
                                  if v is not None})
    try:
        while not healthz_once(port):
            if p.poll() is not None:
                raise Failed("daemon exited with %d" % p.returncode)
            if time.monotonic() - t0 > timeout:
                raise Failed("no healthy /healthz within %d s" % timeout)
            time.sleep(0.005)
        return (time.monotonic() - t0) * 1e6
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


SERVE_VARIANTS = [
    ("limits.serve_healthz", "this run's environment", {}),
    ("limits.serve_healthz_norunsc", "no runsc (`SANDBOXD_RUNSC=/nonexistent`: no gvisor probe)",
     {"SANDBOXD_RUNSC": "/nonexistent/runsc"}),
    ("limits.serve_healthz_probe", "runsc's platform probed (no `SANDBOXD_GVISOR_PLATFORM`)",
     {"SANDBOXD_GVISOR_PLATFORM": None}),
]


def serve_rows(b, n=5):
    given = ", ".join("%s=%s" % (k, os.environ[k]) for k in
                      ("SANDBOXD_GVISOR_PLATFORM", "SANDBOXD_RUNSC") if k in os.environ)
    for key, what, env in SERVE_VARIANTS:
        if key == "limits.serve_healthz":
            what += " (%s)" % (given or "no SANDBOXD_GVISOR_PLATFORM, SANDBOXD_RUNSC")
        k = 3 if key.endswith("_probe") else n  # each may wait out a hung probe
        b.row(key, "`sandboxd serve` → first `200` from `/healthz`, %s" % what,
              "sandboxd serve (fresh state dir); GET /healthz every 5 ms",
              lambda env=env, k=k: [start_to_healthy_us(b, i, env) for i in range(k)])


def start_processes(d, sid):
    """Background processes in sid until the daemon refuses one: (count,
    the refusal's details.limit)."""
    for n in range(10000):
        code, js = d.call("POST", "/v1/sandbox/sessions/%s/exec" % sid,
                          {"command": OUTPUT_CMD, "background": True})
        if code == 429:
            det = (js or {}).get("error", {}).get("details", {}) if isinstance(js, dict) else {}
            return n, det.get("limit") or "429"
        if code not in (200, 202):
            raise Failed("background exec #%d: HTTP %d %s" % (n + 1, code, js))
    return 10000, None


def tenant_load(b, prof):
    """One tenant's sessions, each with as many background processes as the
    daemon accepts, each writing past its streams' retention, until a
    tenant-wide limit refuses (or MAX_LOAD_SESSIONS sessions)."""
    d = Daemon(b.build, b.tmp, "load")
    sids, per_session, stop = [], [], None
    try:
        d.start()
        settle(d)
        idle = footprint(d.pid)
        while len(sids) < MAX_LOAD_SESSIONS:
            code, js = d.call("POST", "/v1/sandbox/sessions", {"profile": prof})
            if code == 429:
                stop = (js.get("error", {}).get("details", {}).get("limit") or "429") + \
                    " (session create)"
                break
            if code != 201:
                raise Failed("session create: HTTP %d %s" % (code, js))
            sids.append(js["id"])
            n, limit = start_processes(d, sids[-1])
            per_session.append(n)
            stop = limit
            if n == 0 or (limit and "tenant" in limit):
                break
        loaded = wait_steady(d)
        t0 = time.monotonic()
        ok = healthz_once(d.port)
        return {"profile": prof, "sessions": len(sids), "procs": per_session, "idle": idle,
                "loaded": loaded, "stop": stop, "healthz_ok": ok,
                "healthz_ms": (time.monotonic() - t0) * 1e3}
    finally:
        for sid in sids:
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)
        d.stop()


def wait_steady(d, timeout=120):
    """The footprint once RSS has stopped growing (output all read)."""
    end, last, steady = time.time() + timeout, None, 0
    while time.time() < end and steady < 4:
        time.sleep(1)
        cur = footprint(d.pid)
        steady = steady + 1 if last and abs(cur["rss_kib"] - last["rss_kib"]) < 512 else 0
        last = cur
    return last


def connections(b, count_per_source=FLOOD_PER_SOURCE):
    d = Daemon(b.build, b.tmp, "conns", {"SANDBOXD_REQUEST_HEAD_TIMEOUT": "120"})
    socks = []
    try:
        d.start()
        settle(d)
        idle = footprint(d.pid)
        for src in FLOOD_SOURCES:
            for _ in range(count_per_source):
                s = socket.socket()
                s.bind((src, 0))
                s.connect(("127.0.0.1", d.port))
                socks.append(s)
        n = len(socks)
        end = time.time() + 60
        while footprint(d.pid)["threads"] < idle["threads"] + n and time.time() < end:
            time.sleep(0.2)
        time.sleep(1)
        held = footprint(d.pid)
        t0 = time.monotonic()
        ok = healthz_once(d.port)
        return {"count": n, "idle": idle, "held": held, "healthz_ok": ok,
                "healthz_ms": (time.monotonic() - t0) * 1e3}
    finally:
        for s in socks:
            s.close()
        d.stop()


def limits_part(b):
    serve_rows(b)
    prof = next((p for p in ("container", "process") if isinstance(b.profiles.get(p), dict)), None)
    if prof:
        try:
            b.facts["limits.load"] = tenant_load(b, prof)
        except Failed as e:
            b.facts["limits.load"] = {"failed": str(e)}
        log("limits.load: %s" % b.facts["limits.load"])
    try:
        b.facts["limits.conns"] = connections(b)
    except (Failed, OSError) as e:
        b.facts["limits.conns"] = {"failed": str(e)}
    log("limits.conns: %s" % b.facts["limits.conns"])


def fmt_s(us):
    return "%.2f s" % (us / 1e6) if us >= 1e6 else "%.0f ms" % (us / 1e3)


def _fp(f):
    return "%.1f MiB | %d | %d" % (f["rss_kib"] / 1024.0, f["fds"], f["threads"])


def section(rows, facts):
    if "limits.serve_healthz" not in rows and "limits.load" not in facts:
        return []
    L = ["## Start and footprint under load (issue 13)", "",
         "| Measurement | n | p50 | p90 | min |", "|---|---|---|---|---|"]
    for key, _, _ in SERVE_VARIANTS:
        r = rows.get(key)
        st = r and r.get("stats")
        if st:
            L.append("| %s | %d | %s | %s | %s |" % (r["name"], st["n"], fmt_s(st["p50"]),
                                                   fmt_s(st["p90"]), fmt_s(st["min"])))
        elif r:
            L.append("| %s | failed: %s | | | |" % (r["name"], r.get("failed")))
    L.append("")
    L += ["| Daemon state | VmRSS | open fds | threads |", "|---|---|---|---|"]
    ld = facts.get("limits.load") or {}
    cn = facts.get("limits.conns") or {}
    if ld.get("idle"):
        L.append("| idle (pools filled) | %s |" % _fp(ld["idle"]))
    if ld.get("loaded"):
        L.append("| one tenant: %d `%s` session(s) with %s background processes, each past its "
                 "streams' retention (2 MiB to stdout and to stderr) | %s |" % (
                     ld["sessions"], ld["profile"], "+".join(str(n) for n in ld["procs"]),
                     _fp(ld["loaded"])))
    elif ld.get("failed"):
        L.append("| one tenant's load | failed: %s | | |" % ld["failed"])
    if cn.get("held"):
        L.append("| %d idle connections from %d addresses | %s |" % (
            cn["count"], len(FLOOD_SOURCES), _fp(cn["held"])))
    elif cn.get("failed"):
        L.append("| 1,000 idle connections | failed: %s | | |" % cn["failed"])
    L.append("")
    if ld.get("loaded"):
        procs = sum(ld["procs"])
        drss = ld["loaded"]["rss_kib"] - ld["idle"]["rss_kib"]
        dfds = ld["loaded"]["fds"] - ld["idle"]["fds"]
        tenant_wide = ld.get("stop") and "tenant" in ld["stop"]
        L += ["`/healthz` under that load: %s in %.0f ms. The load grew the daemon by %.1f MiB "
              "of RSS and %d fds (%.0f KiB and %.1f fds per background process). %s" % (
                  "200" if ld.get("healthz_ok") else "FAILED", ld.get("healthz_ms", 0),
                  drss / 1024.0, dfds, drss / max(procs, 1), dfds / max(procs, 1),
                  ("It stopped where the defaults stop one tenant: the next process was refused "
                   "with `429`, `details.limit` `%s`." % ld["stop"]) if tenant_wide else
                  ("It stopped at this host's ceiling of %d sessions (last refusal: `%s`), not at "
                   "a tenant-wide limit." % (MAX_LOAD_SESSIONS, ld.get("stop")))), ""]
    if cn.get("held"):
        d = cn["held"]["rss_kib"] - cn["idle"]["rss_kib"]
        L += ["Per open connection: %.0f KiB of RSS, %.2f fds, %.2f threads; `/healthz` with "
              "them open: %s in %.0f ms." % (d / cn["count"],
                                             (cn["held"]["fds"] - cn["idle"]["fds"]) / cn["count"],
                                             (cn["held"]["threads"] - cn["idle"]["threads"]) /
                                             cn["count"],
                                             "200" if cn["healthz_ok"] else "FAILED",
                                             cn["healthz_ms"]), ""]
    L += ["Method: `bench/limitsbench.py`. Start: `sandboxd serve` on a fresh state dir, "
          "`GET /healthz` on a new connection every 5 ms from the moment of `exec`. Load: "
          "background execs (`\"background\":true`) of a shell that writes 2 MiB to stdout and "
          "2 MiB to stderr, then sleeps, in each session until the daemon "
          "answers 429, in new sessions until a tenant-wide limit answers 429, then VmRSS, `/proc/PID/fd` and `Threads` of the daemon once VmRSS moves "
          "less than 512 KiB a second. Connections: plain TCP connections that send nothing, "
          "from 127.0.0.2–21 (under the per-address limit), on a daemon with "
          "`SANDBOXD_REQUEST_HEAD_TIMEOUT=120` so that they stay while measured.", ""]
    return L
