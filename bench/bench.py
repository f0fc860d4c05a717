#!/usr/bin/python3
"""bench.py — `make bench`: sandboxd side by side with its peers on this host,
in one run, written to docs/benchmarks.md.

Timed loops run in small C helpers compiled here (forkexec, spawnloop,
apiloop), never in Python, so that the numbers are the daemon's and the
peers', not the interpreter's. Anything that fails is reported in the table
as "failed: reason" instead of being dropped. See docs/benchmarks.md for the
method."""

import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon import Daemon, Failed, first_line, cpu_ticks, memory_snapshot, settle  # noqa: E402
import report  # noqa: E402
import gvbench  # noqa: E402
import imgbench  # noqa: E402
import limitsbench  # noqa: E402
import netbench  # noqa: E402
import e2bbench  # noqa: E402
import sdkbench  # noqa: E402
import mvbench  # noqa: E402
import wasmbench  # noqa: E402
import fleetbench  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = ("container", "process")
EXEC_NAME = "exec `true` in a ready session (API round trip)"
EXEC_CMD = "apiloop exec (keep-alive; 5 rounds of 10 warm-up + 200)"
RUNSC_EXEC_NAME = "`runsc exec` of `true` into a running runsc container (peer)"
GV_CREATE_NAME = "gvisor session create from the warm pool"
GV_COLD_NAME = "gvisor session create, pool disabled (`SANDBOXD_GVISOR_POOL_SIZE=0`: one `runsc run`)"
GV_ONESHOT_NAME = "one-shot `true` (POST + GET ?wait_s=30), warm pool"
GV_ONESHOT_COLD_NAME = "one-shot `true`, pool disabled (one `runsc run` per execution)"
PAUSE_MS = 200          # lets the warm pool refill between creates
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


# ---- helpers and sampling ---------------------------------------------------

def compile_helpers(tmp):
    out = {}
    curl = subprocess.run(["curl-config", "--libs"], capture_output=True, text=True)
    libs = {"apiloop": curl.stdout.split() + ["-lpthread"]}
    for name in ("forkexec", "spawnloop", "apiloop"):
        exe = os.path.join(tmp, name)
        cmd = ["cc", "-O2", "-Wall", "-Wextra", "-o", exe,
               os.path.join(HERE, name + ".c")] + libs.get(name, [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("bench: cannot compile %s: %s" % (name, r.stderr))
        out[name] = exe
    return out


def samples_of(cmd, timeout=600, env=None):
    env = dict(env or os.environ, NO_PROXY="*", no_proxy="*")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Failed("timed out after %d s" % timeout)
    if r.returncode != 0:
        raise Failed(first_line(r.stderr, "exit %d" % r.returncode))
    return [float(x) for x in r.stdout.split()]


def stats(xs):
    s = sorted(xs)
    if not s:
        raise Failed("no samples")

    def pct(q):
        return s[min(len(s) - 1, int(q * len(s)))]
    return {"n": len(s), "p50": pct(0.5), "p90": pct(0.9), "p95": pct(0.95), "p99": pct(0.99),
            "min": s[0], "max": s[-1]}


class Bench:
    def __init__(self, build, tmp, helpers):
        self.build = build
        self.tmp = tmp
        self.h = helpers
        self.rows = {}        # key -> row dict (see report.py)
        self.facts = {}       # free-form numbers for the report
        self.profiles = {}    # name -> profile object or failure reason
        self.samples = samples_of

    def row(self, key, name, cmd, fn):
        """Runs fn() -> samples (µs); records stats or the failure."""
        t0 = time.time()
        try:
            self.rows[key] = {"name": name, "cmd": cmd, "stats": stats(fn())}
        except Failed as e:
            self.rows[key] = {"name": name, "cmd": cmd, "failed": str(e)}
        log("%-44s %s (%.1fs)" % (key, report.cell(self.rows[key]), time.time() - t0))

    def fail(self, key, name, cmd, reason):
        self.rows[key] = {"name": name, "cmd": cmd, "failed": reason}
        log("%-44s failed: %s" % (key, reason))

    def api(self, d, *args, **kw):
        return [self.h["apiloop"], "-u", d.url, "-k", d.key] + [str(a) for a in args]

    # ---- peers -------------------------------------------------------------

    def peer(self, key, name, argv, n, warm=3):
        def run():
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                   stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise Failed(str(e))
            if r.returncode != 0:
                raise Failed(first_line(r.stderr or r.stdout, "exit %d" % r.returncode))
            return samples_of([self.h["spawnloop"], str(n), str(warm)] + argv)
        self.row(key, name, " ".join(argv), run)

    def peers(self):
        self.peer("firejail", "`firejail --quiet --noprofile true`",
                  ["firejail", "--quiet", "--noprofile", "true"], 100)
        # `runsc do true` is timed with the gvisor rows, in alternating batches

    # ---- gvisor (issue 6) ----------------------------------------------------

    def gvisor_rows(self, d, rounds=3):
        """Issue 6, in alternating batches so that load from other work on
        the host weighs on all alike: exec `true` in a live gvisor session (a
        message to sbx-init inside gVisor), `runsc exec` into a running
        container, `runsc do true`; one-shot `true` and session create from
        the warm pool (1.5 s apart: it refills) and on a second daemon with
        the pools disabled (every request one `runsc run`)."""
        p = self.profiles.get("gvisor")
        platform = p.get("platform") if isinstance(p, dict) else None
        do = ["runsc", "--rootless=false", "--network=none",
              "--platform=" + (platform or "ptrace"), "do", "true"]
        do_name = "`runsc do true` (platform %s)" % (platform or "ptrace")
        self.precheck("runsc", do_name, do)
        gone = "failed" in self.rows.get("runsc", {})
        rows = {"gvisor.exec": (EXEC_NAME, "apiloop exec (keep-alive; %d rounds of 3 warm-up + 25)"
                                % rounds),
                "gvisor.runsc_exec": (RUNSC_EXEC_NAME, ""),
                "gvisor.oneshot": (GV_ONESHOT_NAME, "apiloop oneshot -p 1500 (%d rounds of 4)" % rounds),
                "gvisor.oneshot_cold": (GV_ONESHOT_COLD_NAME,
                                        "apiloop oneshot -p 300 (%d rounds of 4), daemon with "
                                        "SANDBOXD_GVISOR_POOL_SIZE=0" % rounds),
                "gvisor.create": (GV_CREATE_NAME, "apiloop create -p 1500 (%d rounds of 3)" % rounds),
                "gvisor.create_cold": (GV_COLD_NAME, "apiloop create -p 300 (%d rounds of 3), "
                                       "daemon with SANDBOXD_GVISOR_POOL_SIZE=0" % rounds)}
        if not isinstance(p, dict):
            for k, (name, cmd) in rows.items():
                self.fail(k, name, cmd, str(p))
            if not gone:  # the peer alone
                self.row("runsc", do_name, " ".join(do), lambda: samples_of(
                    [self.h["spawnloop"], "15", "1"] + do))
            return
        cold = Daemon(self.build, self.tmp, "gvisor-nopool",
                      {"SANDBOXD_POOL_SIZE": "0", "SANDBOXD_GVISOR_POOL_SIZE": "0"})
        peer = gvbench.RunscContainer(self.tmp, platform or "ptrace")
        sid = None
        oneshot = '{"profile":"gvisor","command":["true"]}'
        try:
            try:
                sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "gvisor"})["id"]
            except Failed as e:
                self.fail("gvisor.exec", *rows["gvisor.exec"], "session create: " + str(e))
            try:
                peer.start()
                argv = peer.exec_argv()
                rows["gvisor.runsc_exec"] = (RUNSC_EXEC_NAME, " ".join(argv[:1] + argv[4:]) +
                                             " (%d rounds of 1 warm-up + 10)" % rounds)
            except Failed as e:
                self.fail("gvisor.runsc_exec", *rows["gvisor.runsc_exec"], str(e))
            try:
                cold.start()
                cold.must("POST", "/v1/sandbox/executions", {"profile": "gvisor",
                                                             "command": ["true"]})
            except Failed as e:
                for k in ("gvisor.oneshot_cold", "gvisor.create_cold"):
                    self.fail(k, *rows[k], "daemon without pools: " + str(e))
            time.sleep(1.5)
            batches = [
                ("gvisor.exec", d, lambda: self.api(d, "-n", 25, "-w", 3, "exec", sid)),
                ("gvisor.runsc_exec", None, lambda: [self.h["spawnloop"], "10", "1"] + argv),
                ("runsc", None, lambda: [self.h["spawnloop"], "5", "1"] + do),
                ("gvisor.oneshot", d, lambda: self.api(d, "-n", 4, "-p", 1500, "oneshot", oneshot)),
                ("gvisor.oneshot_cold", cold,
                 lambda: self.api(cold, "-n", 4, "-p", 300, "oneshot", oneshot)),
                ("gvisor.create", d, lambda: self.api(d, "-n", 3, "-p", 1500, "create",
                                                      '{"profile":"gvisor"}')),
                ("gvisor.create_cold", cold, lambda: self.api(cold, "-n", 3, "-p", 300, "create",
                                                              '{"profile":"gvisor"}')),
            ]
            names = dict(rows, runsc=(do_name, " ".join(do) + " (%d rounds of 1 warm-up + 5)" % rounds))
            for rnd in range(rounds):
                for key, _, argv_fn in batches:
                    if key == "runsc" and gone:
                        continue
                    self.add_samples(key, *names[key], lambda: samples_of(argv_fn()))
                log("gvisor round %d/%d done" % (rnd + 1, rounds))
            self.finish_rows()
        finally:
            if sid:
                d.call("DELETE", "/v1/sandbox/sessions/" + sid)
            peer.stop()
            cold.stop()

    # ---- the daemon --------------------------------------------------------

    def discover_profiles(self, d):
        js = d.must("GET", "/v1/sandbox/profiles")
        byname = {p["name"]: p for p in js.get("profiles", [])}
        for name in PROFILES + ("gvisor",):
            p = byname.get(name)
            if not p:
                self.profiles[name] = "not offered by this daemon"
            elif not p.get("available"):
                self.profiles[name] = "unavailable: %s" % (p.get("reason") or "no reason given")
            else:
                self.profiles[name] = p

    def cpu_split(self, d):
        pids = d.tree()
        return (cpu_ticks(d.pid, False),
                sum(cpu_ticks(p, True) for p in pids[1:]))

    def add_samples(self, key, name, cmd, fn):
        """Accumulates one batch of samples into a row measured in rounds."""
        r = self.rows.setdefault(key, {"name": name, "cmd": cmd, "samples": [], "rounds": 0})
        if "failed" in r:
            return False
        try:
            r["samples"] += fn()
            r["rounds"] += 1
            return True
        except Failed as e:
            r["failed"] = "%s (in round %d)" % (e, r["rounds"] + 1)
            log("%-44s failed: %s" % (key, r["failed"]))
            return False

    def finish_rows(self):
        for key, r in self.rows.items():
            if "samples" in r:
                xs = r.pop("samples")
                if "failed" not in r:
                    r["stats"] = stats(xs)
                    log("%-44s %s" % (key, report.cell(r)))

    def interleaved(self, d, rounds=5):
        """The ratios that DESIGN §10 sets targets on, measured in alternating
        batches (bare fork+exec, bwrap, an API exec per profile) so that load
        from other work on the host weighs on all of them alike."""
        sids = {}
        for prof in PROFILES:
            if isinstance(self.profiles.get(prof), dict):
                try:
                    sids[prof] = d.must("POST", "/v1/sandbox/sessions", {"profile": prof})["id"]
                except Failed as e:
                    self.fail(prof + ".exec", EXEC_NAME, EXEC_CMD, "session create: " + str(e))
        bw = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"]
        self.precheck("bwrap", "`bwrap --unshare-all true`", bw)
        execs = 0
        for rnd in range(rounds):
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if self.add_samples("bare", "bare fork+execve(`/bin/true`)+waitpid", "forkexec",
                                lambda: samples_of([self.h["forkexec"], "200", "10"])):
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                self.facts["bare_cpu_s"] = self.facts.get("bare_cpu_s", 0) + (
                    ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)
                self.facts["bare_cpu_n"] = self.facts.get("bare_cpu_n", 0) + 210
            self.add_samples("bwrap", "`bwrap --unshare-all true`", " ".join(bw),
                             lambda: samples_of([self.h["spawnloop"], "60", "2"] + bw))
            for prof, sid in sids.items():
                c0 = self.cpu_split(d)
                ok = self.add_samples(prof + ".exec", EXEC_NAME, EXEC_CMD, lambda: samples_of(
                    self.api(d, "-n", 200, "-w", 10, "exec", sid)))
                c1 = self.cpu_split(d)
                if ok:
                    execs += 210
                    for i, part in enumerate(("daemon", "sandbox")):
                        k = "%s.cpu_%s_ticks" % (prof, part)
                        self.facts[k] = self.facts.get(k, 0) + c1[i] - c0[i]
                    self.facts[prof + ".cpu_execs"] = self.facts.get(prof + ".cpu_execs", 0) + 210
            if execs >= 1000 and "rss_after_kib" not in self.facts:
                self.facts["rss_after_kib"] = d.rss_kib()
                self.facts["rss_after_what"] = "%d session execs" % execs
            log("round %d/%d done" % (rnd + 1, rounds))
        for prof in sids:
            n = self.facts.get(prof + ".cpu_execs")
            if n:
                for part in ("daemon", "sandbox"):
                    self.facts["%s.cpu_%s_us" % (prof, part)] = \
                        self.facts["%s.cpu_%s_ticks" % (prof, part)] * 1e6 / CLK_TCK / n
        self.finish_rows()

    def precheck(self, key, name, argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                self.fail(key, name, " ".join(argv),
                          first_line(r.stderr or r.stdout, "exit %d" % r.returncode))
        except (OSError, subprocess.TimeoutExpired) as e:
            self.fail(key, name, " ".join(argv), str(e))

    def analysis_session(self, d, prof):
        try:
            return d.must("POST", "/v1/sandbox/sessions", {"profile": prof})["id"]
        except Failed as e:
            self.facts["analysis_error"] = "session create: %s" % e
            return None

    def create_suite(self, d, prof):
        body = '{"profile":"%s"}' % prof
        self.row(prof + ".create_paused", "session create, warm pool (%d ms pause between)" % PAUSE_MS,
                 "apiloop create -p %d (POST timed, DELETE not)" % PAUSE_MS,
                 lambda: samples_of(self.api(d, "-n", 40, "-w", 2, "-p", PAUSE_MS, "create", body)))
        self.row(prof + ".create_b2b", "session create, back-to-back (pool drains)",
                 "apiloop create (POST timed, DELETE not)",
                 lambda: samples_of(self.api(d, "-n", 60, "-w", 2, "create", body)))

    def oneshot_suite(self, d, prof):
        body = '{"profile":"%s","command":["true"]}' % prof
        self.row(prof + ".oneshot_paused", "one-shot `true` (POST + GET ?wait_s=30), %d ms pause" % PAUSE_MS,
                 "apiloop oneshot -p %d" % PAUSE_MS,
                 lambda: samples_of(self.api(d, "-n", 30, "-w", 2, "-p", PAUSE_MS, "oneshot", body)))
        self.row(prof + ".oneshot_b2b", "one-shot `true`, back-to-back",
                 "apiloop oneshot",
                 lambda: samples_of(self.api(d, "-n", 30, "-w", 2, "oneshot", body)))

    def hold_and_measure(self, d, prof, count=200):
        """Creates count idle sessions, measures, deletes them."""
        key = prof + ".idle_mem"
        try:
            settle(d)
            a = memory_snapshot(d)
            r = subprocess.run(self.api(d, "-n", count, "hold", '{"profile":"%s"}' % prof),
                               capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, NO_PROXY="*"))
            ids = r.stdout.split()
            if r.returncode != 0:
                raise Failed("after %d sessions: %s" % (len(ids), first_line(r.stderr)))
            time.sleep(1.5)
            b = memory_snapshot(d)
            delta = {k: (b[k] - a[k]) / count for k in a}
            delta.update(count=count, before=a, after=b)
            self.facts[key] = delta
            log("%s: %.0f KiB Pss + %.0f KiB sandbox-cgroup kmem + %.0f KiB daemon-cgroup kmem"
                " per session (host-wide %.0f KiB)" % (key, delta["pss_kib"], delta["cg_kmem_kib"],
                                                      delta["own_kmem_kib"], delta["host_used_kib"]))
        except Failed as e:
            self.facts[key] = {"failed": str(e)}
            log("%s failed: %s" % (key, e))
            ids = locals().get("ids") or []
        for sid in ids:
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)

    def throughput(self, d, sid):
        if shutil.which("wrk"):
            for key, path, hdr in (("rps.healthz", "/healthz", []),
                                   ("rps.session_get", "/v1/sandbox/sessions/%s" % sid,
                                    ["-H", "Authorization: Bearer " + d.key])):
                if key == "rps.session_get" and not sid:
                    continue
                cmd = ["wrk", "-t2", "-c32", "-d5s"] + hdr + [d.url + path]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
                m = re.search(r"Requests/sec:\s+([\d.]+)", r.stdout)
                bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", r.stdout)
                self.facts[key] = {
                    "tool": "wrk -t2 -c32 -d5s" + (" -H 'Authorization: Bearer …'" if hdr else ""),
                    "path": path.replace(sid or "-", "{id}"),
                    "rps": float(m.group(1)) if m else None,
                    "errors": int(bad.group(1)) if bad else 0,
                    "failed": None if m else first_line(r.stderr or r.stdout)}
                log("%s: %s req/s" % (key, self.facts[key]["rps"]))
        else:
            r = subprocess.run(self.api(d, "-t", 4, "-d", 5, "rps", "/healthz"),
                               capture_output=True, text=True, timeout=60)
            m = re.match(r"requests (\d+) errors (\d+) seconds ([\d.]+)", r.stdout)
            self.facts["rps.healthz"] = {
                "tool": "apiloop rps, 4 threads, 5 s (wrk not installed)", "path": "/healthz",
                "rps": int(m.group(1)) / float(m.group(3)) if m else None,
                "errors": int(m.group(2)) if m else 0,
                "failed": None if m else first_line(r.stderr)}

    # ---- where the time goes -----------------------------------------------

    def floors(self, d, sid):
        self.row("floor.healthz", "GET /healthz (HTTP floor, no auth, no store)",
                 "apiloop get /healthz",
                 lambda: samples_of(self.api(d, "-n", 2000, "-w", 100, "get", "/healthz")))
        if sid:
            self.row("floor.session_get", "GET /v1/sandbox/sessions/{id} (auth + store read)",
                     "apiloop get /v1/sandbox/sessions/{id}",
                     lambda: samples_of(self.api(d, "-n", 1000, "-w", 50, "get",
                                                 "/v1/sandbox/sessions/" + sid)))

    def perf_stat(self, d, sid, n=300):
        if not shutil.which("perf") or not sid:
            return
        pids = ",".join(str(p) for p in d.tree())
        p = subprocess.Popen(["perf", "stat", "-x", ",", "-e",
                              "task-clock,context-switches,cpu-migrations,page-faults",
                              "-p", pids], stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        try:
            samples_of(self.api(d, "-n", n, "exec", sid))
        except Failed as e:
            log("perf stat loop failed: %s" % e)
            self.facts.setdefault("analysis_error", "perf stat loop: %s" % e)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        out = {}
        for line in err.splitlines():
            f = line.split(",")
            if len(f) >= 3 and f[2] in ("task-clock", "context-switches", "cpu-migrations", "page-faults"):
                try:
                    out[f[2]] = float(f[0]) / n
                except ValueError:
                    out[f[2]] = None
        self.facts["perf"] = {"n": n, "per_exec": out, "error": None if out else first_line(err)}

    def strace_summary(self, d, sid, n=200):
        if not shutil.which("strace") or not sid:
            return
        args = ["strace", "-c", "-f", "-S", "time"]
        for pid in d.tree():
            args += ["-p", str(pid)]
        p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        try:
            samples = samples_of(self.api(d, "-n", n, "exec", sid))
            self.facts["strace.p50_us"] = stats(samples)["p50"]
        except Failed as e:
            log("strace loop failed: %s" % e)
            self.facts.setdefault("analysis_error", "strace loop: %s" % e)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        with open(os.path.join(self.tmp, "strace-c.txt"), "w") as f:
            f.write(err)
        rows = []
        for line in err.splitlines():
            f = line.split()
            if len(f) >= 5 and re.match(r"^[\d.]+$", f[0]) and f[-1] != "total":
                calls = int(f[3])
                errs = int(f[4]) if len(f) == 6 else 0
                rows.append((f[-1], float(f[1]), calls / n, errs))
        self.facts["strace"] = {"n": n, "rows": rows[:15]}

    def strace_timeline(self, d, sid):
        if not shutil.which("strace") or not sid:
            return
        out = os.path.join(self.tmp, "timeline.txt")
        tree = d.tree()
        args = ["strace", "-f", "-ttt", "-o", out, "-e",
                "trace=%process,recvfrom,sendmsg,sendto,recvmsg,pwrite64,fdatasync,fsync"]
        for pid in tree:
            args += ["-p", str(pid)]
        p = subprocess.Popen(args, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            samples_of(self.api(d, "-n", 1, "-w", 2, "exec", sid))
        except Failed as e:
            log("timeline exec failed: %s" % e)
            self.facts.setdefault("analysis_error", "timeline exec: %s" % e)
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
        threads = set(int(t) for t in os.listdir("/proc/%d/task" % d.pid))
        comms = {}
        for pid in tree:
            try:
                comms[pid] = open("/proc/%d/comm" % pid).read().strip()
            except OSError:
                pass
        self.facts["timeline"] = report.parse_timeline(out, threads, set(tree), comms)

    # ---- the whole run -----------------------------------------------------

    def daemon_part(self):
        d = Daemon(self.build, self.tmp, "main")
        try:
            d.start()
        except Failed as e:
            for prof in PROFILES:
                self.profiles[prof] = "daemon failed: %s" % e
            d.stop()
            return
        try:
            self.facts["serve_to_healthz_ms"] = d.healthz_s * 1000
            if d.probed_s is not None:
                self.facts["serve_to_probed_ms"] = d.probed_s * 1000
            time.sleep(1.0)
            self.facts["rss_idle_kib"] = d.rss_kib()
            self.discover_profiles(d)
            self.interleaved(d)
            usable = [p for p in PROFILES if isinstance(self.profiles[p], dict)]
            for prof in PROFILES:
                if prof not in usable:
                    log("profile %s: %s" % (prof, self.profiles[prof]))
            for prof in usable:
                self.create_suite(d, prof)
                self.oneshot_suite(d, prof)
            main = usable[0] if usable else None
            self.facts["analysis_profile"] = main
            sid = self.analysis_session(d, main) if main else None
            self.gvisor_rows(d)
            self.floors(d, sid)
            self.perf_stat(d, sid)
            self.strace_summary(d, sid)
            self.strace_timeline(d, sid)
            self.throughput(d, sid)
            self.caps_part(d)
            for prof in PROFILES:
                if isinstance(self.profiles[prof], dict):
                    self.hold_and_measure(d, prof)
                    settle(d)
            self.facts["rss_end_kib"] = d.rss_kib()
        finally:
            d.stop()

    def only(self, parts):
        """--only: the named parts, with the profiles from a short-lived daemon."""
        d = Daemon(self.build, self.tmp, "only")
        try:
            d.start()
            self.discover_profiles(d)
            if "gvisor" in parts:
                self.gvisor_rows(d)
            if "exec" in parts:
                self.exec_part(d)
        finally:
            d.stop()
        for name, fn in (("nopool", self.nopool_part), ("net", lambda: netbench.net_part(self)),
                         ("images", lambda: imgbench.image_part(self)),
                         ("store", self.store_part), ("trace", self.trace_part),
                         ("limits", lambda: limitsbench.limits_part(self)),
                         ("e2b", lambda: e2bbench.e2b_part(self)),
                         ("sdk", lambda: sdkbench.sdk_part(self)),
                         ("microvm", lambda: mvbench.microvm_part(self)),
                         ("wasm", lambda: wasmbench.wasm_part(self)),
                         ("fleet", lambda: fleetbench.fleet_part(self))):
            if name in parts:
                fn()

    def exec_part(self, d, prof="container"):
        """--only exec: the exec-path targets alone (bare fork+exec against an
        API exec in a ready session, pooled create, one-shot), for working on
        the exec path."""
        self.interleaved(d)
        if isinstance(self.profiles.get(prof), dict):
            self.create_suite(d, prof)
            self.oneshot_suite(d, prof)

    def caps_part(self, d, prof="container"):
        """Issue 4: streams and contexts, on one fresh session of prof."""
        import caps
        if not isinstance(self.profiles.get(prof), dict):
            return
        try:
            sid = d.must("POST", "/v1/sandbox/sessions", {"profile": prof})["id"]
        except Failed as e:
            return self.fail(prof + ".stream_ttfb", "streamed exec, first byte", "", str(e))

        def wrap(fn, *a):
            try:
                return fn(d, sid, *a)
            except caps.Failed as e:
                raise Failed(str(e))
        self.row(prof + ".stream_ttfb", "streamed exec: request → first `stdout` event",
                 "POST …/exec Accept: text/event-stream, `echo x; sleep 0.05`",
                 lambda: wrap(caps.stream_ttfb))
        got = {}

        def tput():
            xs, facts = wrap(caps.stream_throughput)
            got.update(facts)
            return xs
        key = prof + ".stream_100m"
        self.row(key, "streamed exec of `yes | head -c 100M` (whole stream)",
                 "POST …/exec Accept: text/event-stream, bytes read raw", tput)
        st = self.rows[key].get("stats")
        if st:
            mbs = 100.0 / (st["p50"] / 1e6)
            self.rows[key]["name"] += " = %.0f MiB/s of output" % mbs
            self.facts["stream_mib_s"] = mbs
        self.row(prof + ".context_run", "context `run` of `1+1` (stateful Python)",
                 "POST …/contexts/{cid}/run {\"code\":\"1+1\"}", lambda: wrap(caps.context_runs))
        self.row(prof + ".python_fresh", "… vs exec `python3 -c 'print(1+1)'` (fresh interpreter)",
                 "POST …/exec python3 -c", lambda: wrap(caps.python_fresh))
        self.row(prof + ".audited_patch", "PATCH session metadata (store update + one audit append)",
                 "PATCH …/sessions/{id} {\"metadata\":…} on one keep-alive connection",
                 lambda: wrap(caps.audited_patch))
        st = self.rows[prof + ".audited_patch"].get("stats")
        if st:
            self.rows[prof + ".audited_patch"]["name"] += " = %.0f appends/s serial" % (
                1e6 / st["p50"])

    def nopool_part(self):
        key = "container.create_nopool"
        name = "session create, pool disabled (`SANDBOXD_POOL_SIZE=0`)"
        cmd = "apiloop create -p 50"
        if not isinstance(self.profiles.get("container"), dict):
            return self.fail(key, name, cmd, str(self.profiles.get("container")))
        d = Daemon(self.build, self.tmp, "nopool", {"SANDBOXD_POOL_SIZE": "0"})
        try:
            d.start()
            self.row(key, name, cmd, lambda: samples_of(
                self.api(d, "-n", 30, "-w", 2, "-p", 50, "create", '{"profile":"container"}')))
        except Failed as e:
            self.fail(key, name, cmd, str(e))
        finally:
            d.stop()

    def store_part(self, rounds=3):
        """Exec round trip on the process profile with the SQLite store vs
        PostgreSQL (a throw-away server from tests/integration/sbxpg.py),
        in alternating batches."""
        name = "exec `true` in a ready session, %s store"
        cmd = "apiloop exec (%d rounds of 10 warm-up + 200), daemon on %s"
        keys = {b: "process.exec_store_" + b for b in ("sqlite", "postgres")}
        if not isinstance(self.profiles.get("process"), dict):
            for b, k in keys.items():
                self.fail(k, name % b, cmd % (rounds, b), str(self.profiles.get("process")))
            return
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
        import sbxpg  # noqa: E402
        daemons, sids, pg = {}, {}, None
        try:
            daemons["sqlite"] = Daemon(self.build, self.tmp, "store-sqlite")
            try:
                pg = sbxpg.PgServer().start()
                db = pg.database()
                app = pg.app_url(db)
                r = subprocess.run([os.path.join(self.build, "sandboxd"), "db", "init", "--database",
                                    app, "--owner-url", pg.owner_url(db)],
                                   capture_output=True, text=True, timeout=60)
                if r.returncode != 0:
                    raise Failed("db init: " + first_line(r.stderr))
                daemons["postgres"] = Daemon(self.build, self.tmp, "store-postgres",
                                             {"SANDBOXD_DATABASE_URL": app})
            except (Failed, OSError, RuntimeError) as e:
                self.fail(keys["postgres"], name % "postgres", cmd % (rounds, "postgres"), str(e))
            for b, d in daemons.items():
                try:
                    d.start()
                    sids[b] = d.must("POST", "/v1/sandbox/sessions", {"profile": "process"})["id"]
                except Failed as e:
                    self.fail(keys[b], name % b, cmd % (rounds, b), str(e))
            for _ in range(rounds):
                for b, sid in sids.items():
                    self.add_samples(keys[b], name % b, cmd % (rounds, b), lambda: samples_of(
                        self.api(daemons[b], "-n", 200, "-w", 10, "exec", sid)))
            self.finish_rows()
        finally:
            for d in daemons.values():
                d.stop()
            if pg:
                pg.stop()

    def trace_part(self, rounds=3):
        """Issue 8: the cost of tracing — exec round trip on the process
        profile with no OTLP endpoint vs spans exported to a local receiver
        (a Python http.server on 127.0.0.1 answering 200), alternating."""
        import http.server
        import threading

        class Sink(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        name = "exec `true` in a ready session, tracing %s"
        cmd = "apiloop exec (%d rounds of 10 warm-up + 200), %s"
        how = {"off": "no OTLP endpoint",
               "on": "spans exported to a local OTLP/HTTP receiver (every 200 ms)"}
        keys = {m: "process.exec_trace_" + m for m in how}
        if not isinstance(self.profiles.get("process"), dict):
            for m, k in keys.items():
                self.fail(k, name % m, cmd % (rounds, how[m]), str(self.profiles.get("process")))
            return
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        env_on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % srv.server_address[1],
                  "OTEL_BSP_SCHEDULE_DELAY": "200"}
        daemons = {"off": Daemon(self.build, self.tmp, "trace-off"),
                   "on": Daemon(self.build, self.tmp, "trace-on", env_on)}
        sids = {}
        try:
            for m, d in daemons.items():
                try:
                    d.start()
                    sids[m] = d.must("POST", "/v1/sandbox/sessions", {"profile": "process"})["id"]
                except Failed as e:
                    self.fail(keys[m], name % m, cmd % (rounds, how[m]), str(e))
            for _ in range(rounds):
                for m, sid in sids.items():
                    self.add_samples(keys[m], name % m, cmd % (rounds, how[m]), lambda: samples_of(
                        self.api(daemons[m], "-n", 200, "-w", 10, "exec", sid)))
            self.finish_rows()
        finally:
            for d in daemons.values():
                d.stop()
            srv.shutdown()
            srv.server_close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="docs/benchmarks.md")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, traces)")
    ap.add_argument("--only", default="", metavar="PARTS",
                    help="comma list of parts to run (exec,gvisor,nopool,net,images,store,trace,limits,"
                         "e2b,sdk,microvm,wasm,fleet), "
                         "for working on one part; the report then has only those rows")
    ap.add_argument("--splice", action="store_true",
                    help="with --only microvm, wasm and/or fleet: replace that section of the "
                         "existing --out file instead of writing a report of that part alone")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.access(os.path.join(build, "sandboxd"), os.X_OK):
        sys.exit("bench: no sandboxd in %s (build first)" % build)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-")
    try:
        b = Bench(build, tmp, compile_helpers(tmp))
        b.facts["host"] = report.host_info()
        b.facts["build"] = a.build
        b.facts["buildtype"] = report.buildtype(build)
        if a.only:
            b.only(a.only.split(","))
        else:
            b.peers()
            b.daemon_part()
            b.nopool_part()
            netbench.net_part(b)
            imgbench.image_part(b)
            b.store_part()
            b.trace_part()
            limitsbench.limits_part(b)
            e2bbench.e2b_part(b)
            sdkbench.sdk_part(b)
            mvbench.microvm_part(b)
            wasmbench.wasm_part(b)
            fleetbench.fleet_part(b)
        b.facts["host"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        b.facts["runtime_s"] = time.time() - t0
        text = report.render(b.rows, b.facts, b.profiles)
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        if a.splice:
            parts = a.only.split(",") if a.only else ["microvm"]
            for part, heading, after in (("microvm", "## microVM", None),
                                         ("wasm", wasmbench.HEADING, "## microVM"),
                                         ("fleet", fleetbench.HEADING, wasmbench.HEADING)):
                if part in parts:
                    mvbench.splice(a.out, text, heading, after)
        else:
            with open(a.out, "w") as f:
                f.write(text)
        if a.only and not a.splice:  # a partial run's raw numbers too, for comparing two builds
            import json
            with open(a.out + ".json", "w") as f:
                json.dump({"rows": b.rows, "facts": b.facts}, f, indent=1, default=str)
        log("wrote %s in %.0f s" % (a.out, time.time() - t0))
    finally:
        if a.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
