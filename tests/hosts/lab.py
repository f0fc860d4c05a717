#!/usr/bin/python3
"""lab.py — the host lab: boots real Debian kernels under QEMU and runs a
named subset of sandboxd's own suites inside each, with this machine's
userland shared read-only (virtiofs) and the build tree visible at its own
path.  Hosts and subsets are data (hosts.json); docs/hosts.md says why.

  tests/hosts/lab.py                    every host in hosts.json
  tests/hosts/lab.py debian12-v2        one host
  tests/hosts/lab.py --docs docs/hosts.md   also rewrite the results table

Kernels come from Debian's archive (apt-get download + dpkg-deb -x into the
cache, never installed).  KVM is used when a probe guest reaches a marker on
it, TCG otherwise.  One guest at a time, niced; every step has a timeout.
Exit status: 0 when every host booted and every result matched hosts.json
(pass, or fail where an xfail entry says so), 1 otherwise.
Stdlib only.
"""
import argparse
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
# kernel fetch, module closure, cpio: shared with scripts/microvm-assets.py
from debkernel import Cpio, fetch_kernel, host_khz, module_closure, run  # noqa: E402
QEMU = "qemu-system-x86_64"
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
BUSYBOX = "/bin/busybox"
PROBE_TIMEOUT = 25  # a real KVM guest reaches the marker in ~1 s; PVM dies or crawls


def log(msg):
    print("lab: " + msg, flush=True)


# ---------------------------------------------------------------- initramfs

def build_initramfs(path, order, blobs):
    c = Cpio()
    for d in ("bin", "dev", "proc", "sys", "tmp", "modules"):
        c.dir(d)
    c.file("bin/busybox", open(BUSYBOX, "rb").read(), 0o755)
    c.file("init", open(os.path.join(HERE, "init.sh"), "rb").read(), 0o755)
    c.file("modules.order", ("\n".join(order) + "\n").encode())
    for name in order:
        c.file(f"modules/{name}.ko", blobs[name])
    with open(path, "wb") as f:
        f.write(c.bytes())


# ---------------------------------------------------------------- QEMU

class Guest:
    """One QEMU microvm with its virtiofsd daemons; serial console to a file
    and scanned for markers; killed (whole process groups) on timeout."""

    def __init__(self, rundir, kernel, initrd, cmdline, accel, mem, smp, shares, scratch=None):
        self.rundir, self.procs, self.lines = rundir, [], []
        self.console = open(os.path.join(rundir, "console.log"), "w")
        self.markers = {}
        self.event = threading.Event()
        args = ["nice", "-n", "10", QEMU, "-M",
                "microvm,x-option-roms=off,isa-serial=on,pcie=off"
                + (",memory-backend=mem" if shares else ""),
                # vhost-user (virtiofsd) needs modern virtio; microvm's mmio
                # transport defaults to legacy
                "-global", "virtio-mmio.force-legacy=false",
                "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                "-m", f"{mem}M", "-smp", str(smp), "-serial", "stdio", "-monitor", "none",
                "-kernel", kernel, "-initrd", initrd, "-append", cmdline]
        if accel == "kvm":
            args += ["-accel", "kvm", "-cpu", "host"]
        else:
            args += ["-accel", "tcg,thread=multi", "-cpu", "max"]
        if shares:
            args += ["-object", f"memory-backend-memfd,id=mem,size={mem}M,share=on"]
        if scratch:
            args += ["-drive", f"file={scratch},if=none,id=scratch,format=raw,cache=unsafe",
                     "-device", "virtio-blk-device,drive=scratch"]
        for i, (tag, sock) in enumerate(shares):
            args += ["-chardev", f"socket,id=fs{i},path={sock}",
                     "-device", f"vhost-user-fs-device,chardev=fs{i},tag={tag}"]
        self.args = args

    def spawn_virtiofsd(self, sock, source, readonly):
        """virtiofsd serving source; read-only by serving a read-only bind
        mount of it made in a private mount namespace (QEMU 7.2's virtiofsd
        has no read-only switch, and the host's mounts stay as they are)."""
        vlog = open(os.path.join(self.rundir, f"virtiofsd-{os.path.basename(sock)}.log"), "w")
        vfs = [VIRTIOFSD, f"--socket-path={sock}", "-o", "cache=always", "-o", "no_posix_lock",
               "-o", "sandbox=namespace"]
        if readonly:
            mnt = os.path.join(self.rundir, "ro-" + os.path.basename(sock))
            os.makedirs(mnt, exist_ok=True)
            script = ('mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && '
                      'shift 2 && exec "$@"')
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                   source, mnt, *vfs, "-o", f"source={mnt}"]
        else:
            cmd = vfs + ["-o", f"source={source}"]
        p = subprocess.Popen(["nice", "-n", "10", *cmd], stdout=vlog, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        deadline = time.time() + 20
        while not os.path.exists(sock):
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"virtiofsd for {source} did not start (see {vlog.name})")
            time.sleep(0.05)

    def start(self):
        with open(os.path.join(self.rundir, "qemu.cmd"), "w") as f:
            f.write(" ".join(self.args) + "\n")
        self.qemu = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(self.qemu)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.qemu.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.console.write(line + "\n")
            self.console.flush()
            marks = [line.split()[0]] if line.startswith("LAB_") else []
            marks += [m for m in ("KVM internal error", "Kernel panic") if m in line]
            for mark in marks:
                self.markers.setdefault(mark, (time.time(), line))
                self.event.set()
            if line.startswith("lab: "):
                print(f"  [{os.path.basename(self.rundir)}] {line[5:]}", flush=True)
        self.event.set()

    def wait(self, stages, budget):
        """Wait for QEMU to exit within budget seconds, each (marker, seconds)
        of stages reached in time after the previous one; returns (exit
        status or None, why it was stopped)."""
        t0 = last = time.time()
        pending = list(stages)
        while self.qemu.poll() is None:
            now = time.time()
            while pending and pending[0][0] in self.markers:
                last = self.markers[pending[0][0]][0]
                pending.pop(0)
            if pending and now - last > pending[0][1]:
                return None, f"no {pending[0][0]} within {pending[0][1]} s"
            if now - t0 > budget:
                return None, f"guest still running after {budget} s"
            self.event.wait(1)
            self.event.clear()
        return self.qemu.returncode, None

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.console.close()


def probe_accel(rundir, kernel, initrd, base_cmdline):
    """kvm if /dev/kvm opens and a probe guest reaches its marker on it."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as e:
        return "tcg", f"/dev/kvm: {e.strerror}"
    pdir = os.path.join(rundir, "kvm-probe")
    os.makedirs(pdir, exist_ok=True)
    g = Guest(pdir, kernel, initrd, base_cmdline + " lab.probe=1", "kvm", 256, 1, [])
    t0 = time.time()
    g.start()
    try:
        deadline = t0 + PROBE_TIMEOUT
        while time.time() < deadline and g.qemu.poll() is None:
            if "LAB_PROBE_OK" in g.markers:
                return "kvm", f"probe guest booted on KVM in {time.time() - t0:.1f} s"
            if "KVM internal error" in g.markers:
                break
            g.event.wait(0.5)
            g.event.clear()
        if "LAB_PROBE_OK" in g.markers:
            return "kvm", f"probe guest booted on KVM in {time.time() - t0:.1f} s"
        why = g.markers.get("KVM internal error", (0, "no marker within "
                                                    f"{PROBE_TIMEOUT} s"))[1].strip()
        return "tcg", f"/dev/kvm opens but a Debian kernel does not boot on it ({why})"
    finally:
        g.stop()


# ---------------------------------------------------------------- one host

def meson_tests(build, suite, names, exclude):
    """The meson tests of suite (all, or those named), as meson would run
    them: command, environment, timeout."""
    out = run(["meson", "introspect", "--tests", build], timeout=120).stdout
    tests = [t for t in json.loads(out) if any(s.split(":")[-1] == suite for s in t["suite"])
             and (not names or t["name"] in names) and t["name"] not in exclude]
    if not tests:
        raise RuntimeError(f"no meson tests in suite {suite} of {build}")
    return [{"name": t["name"], "cmd": t["cmd"], "env": t["env"], "timeout": t["timeout"],
             "workdir": t.get("workdir")} for t in tests]


def expand_subsets(cfg, host, build, only=None):
    items = []
    for name in only or host["subsets"]:
        if name not in cfg["subsets"]:
            raise SystemExit(f"lab: unknown subset {name} (hosts.json has {', '.join(cfg['subsets'])})")
        s = dict(cfg["subsets"][name])
        s["name"] = name
        if s["kind"] == "meson":
            s["meson_tests"] = meson_tests(build, s["suite"], s.get("tests"), s.get("exclude", {}))
            s["timeout"] = sum(s.get("timeouts", {}).get(t["name"], s.get("test_timeout", t["timeout"]))
                               for t in s["meson_tests"])
        items.append(s)
    return items


def classify(results, xfail):
    """Each guest result against the host's xfail patterns: pass, fail,
    skip, xfail (failed as listed), xpass (listed but passed: an error)."""
    out = []
    for r in results:
        pattern, reason = next(((pat, why) for pat, why in xfail.items()
                                if fnmatch.fnmatchcase(r["id"], pat)), (None, None))
        o = r["outcome"]
        if reason is not None and o == "fail":
            o = "xfail"
        elif reason is not None and o == "pass":
            o = "xpass"
        out.append(dict(r, verdict=o, xfail_reason=reason, xfail_pattern=pattern))
    return out


def rejudge_host(name, host, args):
    """The last run's summary of host, its tests judged again against the
    current xfail list (no boot): for the table after editing hosts.json."""
    rundir = os.path.join(args.out, name)
    with open(os.path.join(rundir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(rundir, "out", "results.json")) as f:
        summary["tests"] = classify(json.load(f).get("tests", []), host.get("xfail", {}))
    summary.setdefault("finished", os.stat(os.path.join(rundir, "summary.json")).st_mtime)
    summary["rejudged"] = True
    return summary


def run_host(name, host, cfg, args, accel_cache):
    if args.rejudge:
        return rejudge_host(name, host, args)
    t_start = time.time()
    rundir = os.path.join(args.out, name)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(os.path.join(rundir, "out"))
    kernel, moddir, release = fetch_kernel(args.cache, host["suite"], host["package"],
                                           log=lambda m: log(f"{name}: {m}"))
    order, blobs, absent = module_closure(moddir, cfg["modules"])
    if absent:
        log(f"{name}: modules not in {release} (built in or gone): {', '.join(absent)}")
    initrd = os.path.join(rundir, "initramfs.cpio")
    build_initramfs(initrd, order, blobs)
    base = (f"console=ttyS0 quiet reboot=k panic=-1 tsc_early_khz={host_khz()} tsc=reliable "
            "no_timer_check 8250.nr_uarts=1 i8042.noaux i8042.nokbd i8042.nopnp")
    t_fetch = time.time() - t_start
    if "accel" not in accel_cache:
        accel_cache["accel"] = (args.accel, "forced") if args.accel != "auto" else \
            probe_accel(args.out, kernel, initrd, base)
        log(f"accelerator: {accel_cache['accel'][0]} ({accel_cache['accel'][1]})")
    accel = accel_cache["accel"][0]

    spec = {"host": name, "cgroup": host["cgroup"], "repo": REPO, "build": args.build,
            "items": expand_subsets(cfg, host, args.build, args.subsets), "out": "/lab/out",
            "rlimits": cfg.get("rlimits", {})}
    with open(os.path.join(rundir, "out", "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
    budget = sum(i.get("timeout", 300) for i in spec["items"]) + 180
    cmdline = (f"{base} {host.get('cmdline', '')} lab.guest={HERE}/guest.py "
               f"lab.tmpfs={','.join(host.get('tmpfs', []))}")
    if host.get("init") == "systemd":  # init.sh hands over to systemd
        cmdline += " lab.init=systemd"
    scratch = os.path.join(rundir, "scratch.img")
    with open(scratch, "wb") as f:
        f.truncate(args.disk << 30)
    run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", scratch], timeout=120)
    shares = [("hostroot", os.path.join(rundir, "vfs-root.sock")),
              ("labout", os.path.join(rundir, "vfs-out.sock"))]
    mem = args.mem or host.get("mem", 1536)
    g = Guest(rundir, kernel, initrd, cmdline, accel, mem, args.smp, shares, scratch)
    t_boot = time.time()
    rc = None
    try:
        g.spawn_virtiofsd(shares[0][1], "/", readonly=True)
        g.spawn_virtiofsd(shares[1][1], os.path.join(rundir, "out"), readonly=False)
        g.start()
        rc, stopped = g.wait([("LAB_MARK_INIT", 180), ("LAB_ROOT_OK", 180)], budget)
    finally:
        g.stop()
        os.unlink(scratch)
    t_total = time.time() - t_start
    boot = g.markers.get("LAB_MARK_INIT", (None,))[0]
    summary = {"host": name, "title": host.get("title", name), "kernel": release,
               "cgroup": host["cgroup"], "accel": accel, "seconds": round(t_total, 1),
               "fetch_seconds": round(t_fetch, 1),
               "init_seconds": round(boot - t_boot, 1) if boot else None, "problems": []}
    if rc is None:
        summary["problems"].append(f"{stopped}: killed")
    if "LAB_FATAL" in g.markers:
        summary["problems"].append(g.markers["LAB_FATAL"][1].strip())
    if "Kernel panic" in g.markers:
        summary["problems"].append(g.markers["Kernel panic"][1].strip())
    res_path = os.path.join(rundir, "out", "results.json")
    results = {}
    if os.path.exists(res_path):
        with open(res_path) as f:
            results = json.load(f)
    else:
        summary["problems"].append("no results.json from the guest (see console.log)")
    summary["guest_kernel"] = results.get("uname")
    summary["guest_cgroup"] = results.get("cgroup_fs")
    summary["subsets"] = results.get("subsets", [])
    for s in summary["subsets"]:
        if s.get("problem"):
            summary["problems"].append(f"{s['name']}: {s['problem']}")
    summary["tests"] = classify(results.get("tests", []), host.get("xfail", {}))
    summary["finished"] = time.time()
    with open(os.path.join(rundir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary


# ---------------------------------------------------------------- reporting

def counts(summary):
    c = {}
    for t in summary["tests"]:
        c[t["verdict"]] = c.get(t["verdict"], 0) + 1
    return c


def host_ok(summary):
    c = counts(summary)
    return not summary["problems"] and not c.get("fail") and not c.get("xpass") and summary["tests"]


def print_report(summaries):
    print("\nlab: results")
    for s in summaries:
        c = counts(s)
        print(f"  {s['host']:<13} {s['kernel'] or '?':<24} {s['cgroup']}  {s['accel']}  "
              f"{s['seconds']:6.1f} s (boot to /init {s['init_seconds']} s)  "
              + " ".join(f"{k}={v}" for k, v in sorted(c.items()))
              + ("  OK" if host_ok(s) else "  FAILED"))
        for sub in s["subsets"]:
            print(f"      {sub['name']:<20} {sub['seconds']:6.1f} s  rc={sub['rc']}")
        for p in s["problems"]:
            print(f"      problem: {p}")
        xfails = {}
        for t in s["tests"]:
            if t["verdict"] == "xfail":
                xfails.setdefault(t["xfail_reason"], []).append(t["id"])
            elif t["verdict"] in ("fail", "xpass"):
                extra = ("  [listed as xfail but passed: remove the entry]"
                         if t["verdict"] == "xpass" else "")
                print(f"      {t['verdict'].upper():<5} {t['id']}{extra}")
                for e in (t.get("error") or [])[:4]:
                    print(f"            {e[:200]}")
        for why, ids in xfails.items():
            print(f"      XFAIL {ids[0]}" + (f" and {len(ids) - 1} more" if len(ids) > 1 else "")
                  + f": {why[:160]}")


def table_md(summaries):
    rows = ["| host | kernel | cgroup | accel | time | passed | failed | xfail | skipped | failing tests |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        c = counts(s)
        bad = [f"{t['verdict']} {t['id']}" for t in s["tests"] if t["verdict"] in ("fail", "xpass")]
        pats = []
        for t in s["tests"]:  # xfails by the hosts.json entry they matched
            if t["verdict"] == "xfail" and t["xfail_pattern"] not in pats:
                pats.append(t["xfail_pattern"])
        bad += [f"xfail {p}" for p in pats] + [f"problem: {p}" for p in s["problems"]]
        rows.append(f"| {s['host']} | {s['guest_kernel'] or s['kernel']} | {s['guest_cgroup'] or s['cgroup']} "
                    f"| {s['accel']} | {s['seconds']:.0f} s | {c.get('pass', 0)} | {c.get('fail', 0)} "
                    f"| {c.get('xfail', 0)} | {c.get('skip', 0)} | "
                    + ("<br>".join(f"`{b}`" for b in bad) or "—") + " |")
    when = max(s.get("finished") or time.time() for s in summaries)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    again = (f", judged against hosts.json of `{commit}`" if any(s.get("rejudged") for s in summaries)
             else f" at commit `{commit}`")
    return (f"Run finished {stamp}{again} (`tests/hosts/lab.py`, "
            f"{sum(s['seconds'] for s in summaries):.0f} s in all, TCG on 2 shared cores):\n\n"
            + "\n".join(rows) + "\n")


def update_docs(path, text):
    begin, end = "<!-- lab-table:begin -->", "<!-- lab-table:end -->"
    doc = open(path).read()
    if begin not in doc or end not in doc:
        raise SystemExit(f"lab: {path} has no {begin} … {end} section")
    head, rest = doc.split(begin, 1)
    _old, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text + end + tail)


def _terminate(signum, _frame):
    raise SystemExit(f"lab: signal {signum}")  # unwinds through Guest.stop()


def main():
    signal.signal(signal.SIGTERM, _terminate)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hosts", nargs="*", help="host names from hosts.json (default: all)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--out", default=None, help="run directory (default: BUILD/hosts)")
    ap.add_argument("--cache", default=os.environ.get("SANDBOXD_TEST_CACHE",
                                                      "/var/cache/sandboxd-test"))
    ap.add_argument("--accel", choices=("auto", "kvm", "tcg"),
                    default=os.environ.get("SANDBOXD_LAB_ACCEL", "auto"))
    ap.add_argument("--mem", type=int, default=None,
                    help="guest RAM in MiB (default: the host's mem in hosts.json, else 1536)")
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--disk", type=int, default=8, help="sparse ext4 scratch disk in GiB")
    ap.add_argument("--subsets", type=lambda v: v.split(","),
                    help="comma-separated subsets to run instead of each host's own")
    ap.add_argument("--config", default=os.path.join(HERE, "hosts.json"))
    ap.add_argument("--rejudge", action="store_true",
                    help="boot nothing: judge the last run's results against hosts.json again")
    ap.add_argument("--docs", help="rewrite the lab table in this markdown file")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out or os.path.join(args.build, "hosts"))
    with open(args.config) as f:
        cfg = json.load(f)
    names = args.hosts or list(cfg["hosts"])
    for n in names:
        if n not in cfg["hosts"]:
            raise SystemExit(f"lab: unknown host {n} (hosts.json has {', '.join(cfg['hosts'])})")
    if not os.path.exists(os.path.join(args.build, "build.ninja")):
        raise SystemExit(f"lab: no build in {args.build} (run make first)")
    os.makedirs(args.out, exist_ok=True)
    summaries, accel = [], {}
    for n in names:
        log(f"{n}: {cfg['hosts'][n].get('title', '')}")
        try:
            summaries.append(run_host(n, cfg["hosts"][n], cfg, args, accel))
        except Exception as e:  # a host that cannot even start fails, the others still run
            summaries.append({"host": n, "title": n, "kernel": None, "cgroup": cfg["hosts"][n]["cgroup"],
                              "accel": accel.get("accel", ("?",))[0], "seconds": 0.0,
                              "init_seconds": None, "problems": [f"{type(e).__name__}: {e}"],
                              "subsets": [], "tests": [], "guest_kernel": None, "guest_cgroup": None})
    print_report(summaries)
    table = table_md(summaries)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    if args.docs:
        update_docs(args.docs, table)
        log(f"table written to {args.docs}")
    return 0 if all(host_ok(s) for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
