"""report.py — turns bench.py's rows and facts into docs/benchmarks.md: host
description, the verdict against DESIGN §10, every latency with its ratios,
memory, throughput, and where the time of an exec goes."""

import datetime
import os
import platform
import re
import subprocess

MIB = 1024.0


def _run_first(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "not installed"


def cgroup_desc():
    v1, v2 = [], []
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fs, opts = line.split()[:4]
            if fs == "cgroup":
                ctrls = [o for o in opts.split(",") if o not in ("rw", "ro", "nosuid", "nodev",
                                                              "noexec", "relatime")]
                v1.append(",".join(ctrls))
            elif fs == "cgroup2":
                path = os.path.join(mnt, "cgroup.controllers")
                try:
                    ctrl = open(path).read().strip()
                except OSError:
                    ctrl = ""
                v2.append("%s (%s)" % (mnt, ctrl or "no controllers"))
    if v1:
        return "v1 (%s)%s" % ("; ".join(sorted(v1)), "; cgroup2 at " + ", ".join(v2) if v2 else "")
    return "v2 at " + ", ".join(v2) if v2 else "none mounted"


def buildtype(build):
    """The Meson buildtype of a build dir (from meson-info), or "unknown"."""
    import json
    try:
        with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
            for o in json.load(f):
                if o.get("name") == "buildtype":
                    return o.get("value")
    except (OSError, ValueError):
        pass
    return "unknown"


def host_info():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gib": mem / MIB / MIB,
        "kernel": platform.release(),
        "os": _run_first(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "cgroup": cgroup_desc(),
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
        "bwrap": _run_first(["bwrap", "--version"]),
        "firejail": _run_first(["firejail", "--version"]),
        "runsc": _run_first(["runsc", "--version"]),
        "wrk": _run_first(["sh", "-c", "wrk -v 2>&1 | head -1"]),
    }


# ---- formatting ---------------------------------------------------------------

def fmt_us(x):
    if x is None:
        return "—"
    return "%.0f µs" % x if x < 1000 else "%.2f ms" % (x / 1000)


def cell(row):
    if "failed" in row:
        return "failed: " + row["failed"]
    s = row["stats"]
    return "p50 %s / p90 %s (n=%d)" % (fmt_us(s["p50"]), fmt_us(s["p90"]), s["n"])


def p50(rows, key):
    r = rows.get(key)
    return r["stats"]["p50"] if r and "stats" in r else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_ratio(x):
    if x is None:
        return "—"
    return "%.2f×" % x if x >= 0.1 else "%.3f×" % x


def verdict(ok):
    return "—" if ok is None else ("**met**" if ok else "**not met**")


# ---- the timeline of one exec -----------------------------------------------

LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def parse_timeline(path, daemon_threads, tree_pids, comms=None):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    ev = []
    for ln in lines:
        m = LINE.match(ln)
        if m:
            ev.append((int(m.group(1)), float(m.group(2)), m.group(3)))
    start = None
    for i, (_, _, txt) in enumerate(ev):
        if txt.startswith("recvfrom(") and "POST /v1/sandbox/sessions/" in txt:
            start = i
    if start is None:
        return None
    labels = {t: "daemon" for t in daemon_threads}
    for pid in tree_pids:
        labels.setdefault(pid, (comms or {}).get(pid, "sbx-init"))
    out = []
    t0 = ev[start][1]
    for pid, ts, txt in ev[:start]:
        _learn(labels, pid, txt)
    for pid, ts, txt in ev[start:]:
        _learn(labels, pid, txt)
        who = labels.get(pid, "new process")
        out.append(("%+8.3f" % ((ts - t0) * 1000), "%s[%d]" % (who, pid), _shorten(txt)))
        if (txt.startswith("sendmsg(") or txt.startswith("sendto(")) and "HTTP/1.1" in txt:
            break
    return out[:80]


def _learn(labels, pid, txt, pending={}):
    """Names new pids after their parent (threads keep the parent's name,
    processes get "→child") and after the program they exec."""
    m = re.match(r"(clone3?|vfork|fork)\((.*)<unfinished", txt)
    if m:
        pending[pid] = m.group(2)
        return
    m = re.match(r"(clone3?|vfork|fork)\((.*)\)\s+=\s+(\d+)", txt)
    r = re.match(r"<\.\.\. (clone3?|vfork|fork) resumed>.*=\s+(\d+)", txt)
    if m or r:
        flags = m.group(2) if m else pending.pop(pid, "")
        child = int(m.group(3) if m else r.group(2))
        parent = labels.get(pid, "pid %d" % pid)
        labels[child] = parent if "CLONE_THREAD" in flags else parent + "→child"
    m = re.match(r'execve\("([^"]+)"', txt)
    if m:
        labels[pid] = os.path.basename(m.group(1))


def _shorten(txt, n=110):
    txt = re.sub(r"\s+", " ", txt)
    return txt if len(txt) <= n else txt[:n - 1] + "…"


# ---- the document ---------------------------------------------------------------

def _row_line(rows, key, prof):
    r = rows.get(key)
    if not r:
        return None
    bare, bwrap = p50(rows, "bare"), p50(rows, "bwrap")
    if "failed" in r:
        return "| %s | %s | failed: %s | | | | | |" % (r["name"], prof, r["failed"].replace("|", "/"))
    s = r["stats"]
    return "| %s | %s | %d | %s | %s | %s | %s | %s |" % (
        r["name"], prof, s["n"], fmt_us(s["p50"]), fmt_us(s["p90"]), fmt_us(s["p99"]),
        fmt_ratio(ratio(s["p50"], bare)), fmt_ratio(ratio(s["p50"], bwrap)))


def _targets(rows, facts, profiles):
    out = []
    bare, bwrap = p50(rows, "bare"), p50(rows, "bwrap")

    def why(key):
        r = rows.get(key)
        if r and "failed" in r:
            return "failed: " + r["failed"]
        return "not measured (%s)" % (profiles.get(key.split(".")[0]) if isinstance(
            profiles.get(key.split(".")[0]), str) else "see table")

    ex = p50(rows, "container.exec")
    r1 = ratio(ex, bare)
    out.append(("exec `true` in a ready `container` session ≤ 1.5× bare fork+exec",
                "%s vs %s = %s" % (fmt_us(ex), fmt_us(bare), fmt_ratio(r1)) if r1 else why("container.exec"),
                verdict(r1 <= 1.5 if r1 else None)))
    r2 = ratio(ex, bwrap)
    out.append(("… and ≥ 2× faster than `bwrap --unshare-all true` (≤ 0.5×)",
                "%s vs %s = %s" % (fmt_us(ex), fmt_us(bwrap), fmt_ratio(r2)) if r2 else why("container.exec"),
                verdict(r2 <= 0.5 if r2 else None)))
    cp, cb = p50(rows, "container.create_paused"), p50(rows, "container.create_b2b")
    out.append(("session create with a warm pool ≤ 2 ms round trip",
                ("%s with pauses; %s back-to-back" % (fmt_us(cp), fmt_us(cb))) if cp else why("container.create_paused"),
                verdict(cp <= 2000 if cp else None)))
    cn = p50(rows, "container.create_nopool")
    r3 = ratio(cn, bwrap)
    out.append(("session create without a pool no slower than bwrap",
                "%s vs %s = %s" % (fmt_us(cn), fmt_us(bwrap), fmt_ratio(r3)) if r3 else why("container.create_nopool"),
                verdict(r3 <= 1.0 if r3 else None)))
    os_ = p50(rows, "container.oneshot_paused")
    over = os_ - bare if os_ and bare else None
    out.append(("one-shot execution overhead over the bare command ≤ 5 ms",
                "%s − %s = %s" % (fmt_us(os_), fmt_us(bare), fmt_us(over)) if over is not None else why("container.oneshot_paused"),
                verdict(over <= 5000 if over is not None else None)))
    r4 = ratio(os_, bwrap)
    out.append(("cold one-shot `true` no slower than `bwrap --unshare-all true` (issue 3)",
                "%s vs %s = %s" % (fmt_us(os_), fmt_us(bwrap), fmt_ratio(r4)) if r4 else why("container.oneshot_paused"),
                verdict(r4 <= 1.0 if r4 else None)))
    im = facts.get("container.idle_mem")
    if im and "failed" not in im:
        per = im["pss_kib"] + im["cg_kmem_kib"] + im["own_kmem_kib"]
        out.append(("≤ 1 MiB host memory per idle `container` session (200 sessions)",
                    "%.0f KiB (Pss %.0f + sandbox-cgroup kmem %.0f + daemon-cgroup kmem %.0f); host-wide %.0f KiB"
                    % (per, im["pss_kib"], im["cg_kmem_kib"], im["own_kmem_kib"], im["host_used_kib"]),
                    verdict(per <= 1024)))
    else:
        out.append(("≤ 1 MiB host memory per idle `container` session (200 sessions)",
                    "failed: " + im["failed"] if im else why("container.idle_mem"), "—"))
    rss = facts.get("rss_idle_kib")
    out.append(("daemon ≤ 20 MiB RSS idle", "%.1f MiB" % (rss / MIB) if rss else "not measured",
                verdict(rss <= 20 * MIB if rss else None)))
    rp = facts.get("rps.healthz") or {}
    out.append(("≥ 10k simple API requests/s on 2 cores",
                "%.0f req/s (`GET /healthz`, %s)" % (rp["rps"], rp["tool"]) if rp.get("rps") else
                "failed: %s" % rp.get("failed", "not measured"),
                verdict(rp["rps"] >= 10000 if rp.get("rps") else None)))
    g = profiles.get("gvisor")
    rd = p50(rows, "runsc")
    for key, what in (("gvisor.oneshot", "warm pool (the default)"),
                      ("gvisor.oneshot_cold", "pool disabled")):
        gx = p50(rows, key)
        if isinstance(g, str):
            gm, gv = "not measurable: %s" % g, "—"
        elif gx and rd:
            gm = "one-shot `true` %s vs `runsc do true` %s = %s" % (
                fmt_us(gx), fmt_us(rd), fmt_ratio(ratio(gx, rd)))
            gv = verdict(gx <= 1.1 * rd)
        else:
            gm, gv = "failed: %s" % (rows.get(key) or {}).get("failed", "not measured"), "—"
        out.append(("gvisor one-shot execution within 1.1× of a bare `runsc do` (issue 6), "
                    + what, gm, gv))
    return out


# ---- issues 5, 6, 7: side by side ------------------------------------------

def _side_table(rows, spec, base_title):
    """spec: (key, base key or None, note).  One line per row: n, p50, p95,
    p99, and the ratio of its p50 to its base's p50."""
    L = ["| Measurement | n | p50 | p95 | p99 | %s |" % base_title, "|---|---|---|---|---|---|"]
    for key, base, note in spec:
        r = rows.get(key)
        if not r:
            continue
        name = r["name"] + (" " + note if note else "")
        if "failed" in r:
            L.append("| %s | failed: %s | | | | |" % (name, r["failed"].replace("|", "/")))
            continue
        s = r["stats"]
        rt = ratio(s["p50"], p50(rows, base)) if base else None
        L.append("| %s | %d | %s | %s | %s | %s |" % (
            name, s["n"], fmt_us(s["p50"]), fmt_us(s.get("p95")), fmt_us(s["p99"]),
            fmt_ratio(rt) if base else "(base)"))
    return L + [""]


def _e2b_section(rows):
    """The E2B-compatible surface (bench/e2bbench.py): the SDK against our exec."""
    if not any(k.startswith("e2b.") for k in rows):
        return []
    return ["## The E2B SDK against our own API", "",
            "One `container` session each, alternating batches; ratios against our exec "
            "by fetch from the same node process.  `commands.run` runs `bash -l -c` as a "
            "background process and answers a Connect stream (start, data, end envelopes "
            "from a follower thread), so the `bash -l -c true` row is its like-for-like base.",
            ""] + _side_table(rows, [
                ("e2b.api_true", None, ""), ("e2b.api_bash", "e2b.api_true", ""),
                ("e2b.sdk", "e2b.api_true", ""), ("e2b.apiloop", "e2b.api_true", "")],
                "× fetch exec `true`")


def _network_section(rows, facts):
    if not any(k.startswith("net.") for k in rows):
        return []
    L = ["## Network policy (issue 5)", "",
         "One daemon started with the test internet's `--resolve` pins and `--dns-upstream` "
         "(tests/integration/networld.py: a netns on 198.51.100.0/24 and 203.0.113.0/24 "
         "serving HTTP); every batch alternates with its base, so host load weighs on both.", ""]
    L += _side_table(rows, [("net.create_plain", None, ""),
                            ("net.create_none", "net.create_plain", ""),
                            ("net.create_allow", "net.create_plain", "")], "× plain none")
    fp = facts.get("net.footprint") or {}
    L += ["Rows: a `none` create on a daemon that has no `--resolve`/`--dns-upstream` (the base); "
          "the same on the daemon with the test internet's settings (the `none` path must not "
          "pay for the feature: no veth, no rules, no DNS); a create with a one-domain allowlist "
          "(a veth pair from the address pool, the per-sandbox nft rules, the DNS responder and "
          "proxy entries).", ""]
    if "none" in fp:
        L += ["Footprint on the host, %d sessions of each kind held open at once, per session: "
              "`none` adds %.1f host links and %.1f lines of nft rules; an allowlist adds "
              "%.1f host links (its veth end) and %.1f lines of nft rules." % (
                  fp["count"], fp["none"]["links"], fp["none"]["nft_lines"],
                  fp["allowlist"]["links"], fp["allowlist"]["nft_lines"]), ""]
    elif fp.get("failed"):
        L += ["Footprint: failed: %s" % fp["failed"], ""]
    L += ["HTTP GET of `http://allowed.test.example/` (a new TCP connection per request, "
          "Python urllib, timed inside the loop so interpreter start is excluded):", ""]
    L += _side_table(rows, [("net.http_direct", None, ""),
                            ("net.http_proxy", "net.http_direct", ""),
                            ("net.http_transparent", "net.http_direct", ""),
                            ("net.http_name", "net.http_direct", "")], "× direct")
    L += ["Rows: *direct* runs the loop with `ip netns exec` in a namespace linked to the host by "
          "a veth pair (as a sandbox's is), to the world's address with `Host: "
          "allowed.test.example`, no proxy and no rules: the floor. The other three run inside "
          "one `container` sandbox whose policy allows `allowed.test.example`: *explicit* sends "
          "an absolute-form GET to the egress proxy named by `HTTP_PROXY` (the proxy checks the "
          "name, resolves it from the pins, connects, relays); *transparent* ignores the proxy "
          "variables and connects to the world's address, where nft redirects port 80 to the "
          "proxy, which checks `Host` against the original destination; *by name* is the same "
          "plus a `getaddrinfo` per request, answered by the daemon's DNS responder.", ""]
    return L


def _gvisor_section(rows, facts, profiles):
    keys = [k for k in rows if k.startswith("gvisor.")]
    if not keys:
        g = profiles.get("gvisor")
        return ["## gVisor (issue 6)", "", "not measured: %s" % g, ""] if isinstance(g, str) else []
    L = ["## gVisor (issue 6)", "",
         "The `gvisor` profile against bare runsc on the same platform. `runsc do true` is a "
         "whole sandbox per command; `runsc exec` enters a running container (what a driver "
         "doing one `runsc exec` per command would pay); our exec is a message to sbx-init "
         "already running inside gVisor.", ""]
    L += _side_table(rows, [("runsc", None, ""),
                            ("gvisor.runsc_exec", "runsc", ""),
                            ("gvisor.exec", "runsc", "— gvisor"),
                            ("gvisor.oneshot", "runsc", "— gvisor"),
                            ("gvisor.oneshot_cold", "runsc", "— gvisor"),
                            ("gvisor.create", "runsc", ""),
                            ("gvisor.create_cold", "runsc", "")], "× `runsc do`")
    gx, rx = p50(rows, "gvisor.exec"), p50(rows, "gvisor.runsc_exec")
    if gx and rx:
        L += ["Exec in a live session against `runsc exec` into a running container: %s vs %s "
              "= %s." % (fmt_us(gx), fmt_us(rx), fmt_ratio(ratio(gx, rx))), ""]
    L += ["Rows: exec `true` in a live session is one API round trip (`apiloop exec`); "
          "one-shot is `POST /v1/sandbox/executions` then `GET ?wait_s=30` until final — with "
          "the warm pool (requests 1.5 s apart so it refills) it takes a started sandbox, with "
          "the pools disabled (a second daemon, `SANDBOXD_GVISOR_POOL_SIZE=0`) every execution "
          "is one `runsc run` plus the exec and the teardown, the like-for-like comparison with "
          "`runsc do`; session create is the `POST` alone (its `DELETE` untimed), from the pool "
          "and without it. All seven are measured in 3 alternating rounds.", ""]
    return L


def _image_section(rows, facts):
    if not any(k.startswith("image.") for k in rows):
        return []
    size = facts.get("image.size_bytes")
    L = ["## Images (issue 7)", "",
         "A registry on loopback (Debian's `docker-registry`, started by "
         "tests/integration/imgworld.py) holding `bench/big:v1`: busybox-static plus a layer of "
         "50 files of random bytes%s, pushed with skopeo." % (
             " (%.1f MB compressed, incompressible)" % (size / 1e6) if size else ""), ""]
    L += _side_table(rows, [("image.pull_first", None, ""),
                            ("image.pull_again", "image.pull_first", "")], "× first pull")
    fp = p50(rows, "image.pull_first")
    if fp and size:
        L += ["First pull: %.0f MB/s end to end (download, digest check, unpack into the layer "
              "store)." % (size / 1e6 / (fp / 1e6)), ""]
    L += _side_table(rows, [("image.create_host", None, ""),
                            ("image.create", "image.create_host", "")], "× `host` pack")
    L += ["Rows: the first pull runs `sandboxd image pull` (a process of its own, so its start "
          "is included) into an empty state dir: manifest, config and two layer blobs over "
          "plain HTTP from 127.0.0.1, each hashed and checked, the layers unpacked into the "
          "content-addressed store; the pull again costs a manifest request. Session create "
          "on the image (store already warm, so no pull) builds a sandbox with an overlay root "
          "over the image's layers — image sandboxes are not taken from the warm pool (the "
          "`container` driver pools only `host`-pack sandboxes) — while the `host` pack create "
          "takes a pooled one. Both on one daemon, alternating batches, 200 ms apart.", ""]
    ic, cn = p50(rows, "image.create"), p50(rows, "container.create_nopool")
    if ic and cn:
        L += ["Against a cold `host`-pack create (pool disabled, measured earlier in the run): "
              "%s vs %s = %s." % (fmt_us(ic), fmt_us(cn), fmt_ratio(ratio(ic, cn))), ""]
    return L


def _startup_section(facts):
    L = ["## Start-up", "", "| What | Value |", "|---|---|"]
    for key, what in (("serve_to_healthz_ms", "exec of `sandboxd serve` → first 200 from `/healthz`"),
                      ("serve_to_probed_ms", "exec → every driver probed (`/readyz` lists none probing)")):
        v = facts.get(key)
        L.append("| %s | %s |" % (what, "%.0f ms" % v if v is not None else "not measured"))
    return L + ["", "Drivers probe in the background (docs/configuration.md); on a host whose "
                "KVM platform hangs, gvisor's probe gives KVM 2 s, then falls back.", ""]


def _memory_section(facts, profiles):
    L = ["## Memory", ""]
    L.append("| What | Value |")
    L.append("|---|---|")
    for key, what in (("rss_idle_kib", "daemon VmRSS, idle (1 s after start, pools filled)"),
                      ("rss_after_kib", "daemon VmRSS after %s" % facts.get("rss_after_what", "1,000 requests")),
                      ("rss_end_kib", "daemon VmRSS at the end of the run (after wrk, 200-session tests)")):
        v = facts.get(key)
        L.append("| %s | %s |" % (what, "%.1f MiB" % (v / MIB) if v else "not measured"))
    L += ["", "Host memory per idle session, 200 sessions held open at once (deltas divided by 200):", "",
          "| Profile | ΣPss of daemon tree | sandbox cgroups: kmem | daemon's cgroup: kmem | **total** | sandbox cgroups: usage (incl. their pages) | host-wide (MemTotal−MemAvailable) | processes, cgroups added |",
          "|---|---|---|---|---|---|---|---|"]
    for prof in ("container", "process"):
        im = facts.get(prof + ".idle_mem")
        if im is None:
            why = profiles.get(prof)
            L.append("| %s | %s | | | | | | |" % (prof, why if isinstance(why, str) else "not measured"))
        elif "failed" in im:
            L.append("| %s | failed: %s | | | | | | |" % (prof, im["failed"]))
        else:
            tot = im["pss_kib"] + im["cg_kmem_kib"] + im["own_kmem_kib"]
            L.append("| %s | %.0f KiB | %.0f KiB | %.0f KiB | **%.0f KiB** | %.0f KiB | %.0f KiB | %d, %d |" % (
                prof, im["pss_kib"], im["cg_kmem_kib"], im["own_kmem_kib"], tot,
                im["cg_usage_kib"], im["host_used_kib"],
                im["after"]["procs"] - im["before"]["procs"],
                im["after"]["cgroups"] - im["before"]["cgroups"]))
    L += ["",
          "Method: before and after creating 200 idle sessions (and after a 1.5 s pause so the warm "
          "pool is refilled both times, which cancels it out), bench.py sums `Pss` from "
          "`/proc/PID/smaps_rollup` over the daemon and every descendant (sbx-init of each sandbox, "
          "pool members), reads the kernel memory (`memory.kmem.usage_in_bytes` on v1, `kernel` of "
          "`memory.stat` on v2) of every distinct memory cgroup those descendants live in, and the "
          "kernel memory of the daemon's own cgroup (where objects built before a sandbox joins its "
          "cgroup — namespaces, mounts — may be charged; that cgroup may hold other processes too). "
          "The **total** adds these three, which do not overlap (Pss is user pages, kmem is kernel "
          "objects). The cgroup `usage` column includes the user pages already counted in Pss, so "
          "it is shown but not added. The host-wide column is a cross-check only: other work on "
          "this shared machine moves it.", ""]
    return L


def _throughput_section(facts):
    L = ["## Throughput", "", "| Request | Tool | Requests/s | Non-2xx |", "|---|---|---|---|"]
    for key in ("rps.healthz", "rps.session_get"):
        r = facts.get(key)
        if not r:
            continue
        val = "%.0f" % r["rps"] if r.get("rps") else "failed: %s" % r.get("failed")
        L.append("| `GET %s` | %s | %s | %d |" % (r["path"], r["tool"], val, r.get("errors", 0)))
    L += ["", "wrk runs on the same 2 cores as the daemon, so the daemon gets at most about half "
          "the machine; this understates what it does with the host to itself.", ""]
    return L


def _time_section(rows, facts):
    prof = facts.get("analysis_profile")
    L = ["## Where the time goes", ""]
    if not prof:
        return L + ["No profile was usable, nothing to analyse.", ""]
    ex = p50(rows, prof + ".exec")
    hz, sg, bare = p50(rows, "floor.healthz"), p50(rows, "floor.session_get"), p50(rows, "bare")
    L.append("Analysed on the `%s` profile (exec of `true` in a ready session)." % prof)
    L.append("")
    if facts.get("analysis_error"):
        L += ["Part of the analysis could not run: %s" % facts["analysis_error"], ""]
    if ex and hz and sg and bare:
        rest = ex - sg - bare
        L += ["Decomposition of the p50 (from separate runs, so approximate):", "",
              "| Part | p50 | share |", "|---|---|---|",
              "| HTTP round trip on a keep-alive connection (`GET /healthz`) | %s | %.0f %% |" % (fmt_us(hz), 100 * hz / ex),
              "| + bearer-key check and a store read (`GET /v1/sandbox/sessions/{id}` − healthz) | %s | %.0f %% |" % (fmt_us(sg - hz), 100 * (sg - hz) / ex),
              "| + a bare fork+execve+waitpid of `/bin/true` on the host | %s | %.0f %% |" % (fmt_us(bare), 100 * bare / ex),
              "| = the rest: JSON of the request and result, sending the request and stdio fds to sbx-init over the socketpair (SCM_RIGHTS), its fork, the workload's setup inside the sandbox, pipes and the exit report, storing the exec | %s | %.0f %% |" % (fmt_us(rest), 100 * rest / ex),
              "| **exec through the API** | **%s** | 100 %% |" % fmt_us(ex), ""]
    cd, cs = facts.get(prof + ".cpu_daemon_us"), facts.get(prof + ".cpu_sandbox_us")
    if cd is not None and ex:
        L += ["CPU time per exec (from `/proc/PID/stat` utime+stime of the daemon, and of every "
              "descendant including reaped children, over all the timed execs; 10 ms tick resolution "
              "summed over the loop): daemon **%s**, sandbox side (sbx-init, its fork, the workload) "
              "**%s**, total **%s** for a wall time of %s — so about %.0f %% of the wall time is "
              "waiting (wake-ups and hand-offs between the HTTP thread, sbx-init and the workload), "
              "not computing." % (fmt_us(cd), fmt_us(cs), fmt_us(cd + cs), fmt_us(ex),
                                  max(0.0, 100 * (1 - (cd + cs) / ex)))]
        if facts.get("bare_cpu_n"):
            bc = facts["bare_cpu_s"] * 1e6 / facts["bare_cpu_n"]
            L[-1] += (" The bare fork+exec, measured the same way (getrusage of the loop and its "
                      "children), costs %s of CPU per run for its %s of wall time." % (fmt_us(bc), fmt_us(bare)))
        L.append("")
    pf = facts.get("perf")
    if pf and pf.get("per_exec"):
        pe = pf["per_exec"]
        L += ["`perf stat -p <daemon and all descendants>` over %d execs, per exec: "
              "task-clock %.2f ms, %.1f context switches, %.2f CPU migrations, %.0f page faults." % (
                  pf["n"], (pe.get("task-clock") or 0), pe.get("context-switches") or 0,
                  pe.get("cpu-migrations") or 0, pe.get("page-faults") or 0), ""]
    elif pf:
        L += ["`perf stat` failed: %s" % pf.get("error"), ""]
    st = facts.get("strace")
    if st and st["rows"]:
        L += ["`strace -c -f` attached to the daemon and every descendant over %d execs "
              "(strace itself slows each exec to about %s p50, so read this for proportions, "
              "not absolute times; `wait4`, `pselect6`, `futex`, `poll` time is time spent blocked, "
              "not CPU). Top syscalls by time:" % (st["n"], fmt_us(facts.get("strace.p50_us"))), "",
              "| syscall | % time | calls per exec | errors |", "|---|---|---|---|"]
        for name, pc, per, errs in st["rows"]:
            L.append("| `%s` | %.1f | %.1f | %d |" % (name, pc, per, errs))
        L.append("")
    tl = facts.get("timeline")
    if tl:
        L += ["One exec, traced (`strace -f -ttt`, process, socket and store syscalls only; "
              "times in ms from the request's arrival, inflated by strace):", "", "```"]
        for t, who, txt in tl:
            L.append("%s  %-22s %s" % (t, who, txt))
        L += ["```", ""]
        forks = sum(1 for _, _, x in tl if re.match(r"(clone3?|vfork|fork)\(", x) and "CLONE_THREAD" not in x)
        execs = [x for _, _, x in tl if x.startswith("execve(")]
        enoent = sum(1 for x in execs if "ENOENT" in x)
        L += ["Read from this trace: %d process creation(s) on the path of one exec (a bare "
              "fork+exec has 1); %d `execve` attempt(s), %d of them failing with ENOENT — the "
              "PATH search for a bare command name (each failed attempt is a full syscall into "
              "the mount namespace); the gap between the workload's `exit_group` and the HTTP "
              "response is the exit report travelling back (wait, kill of the process group, "
              "sendmsg to the daemon, JSON, store write)." % (forks, len(execs), enoent), ""]
    return L


def render(rows, facts, profiles):
    h = facts["host"]
    L = ["# Benchmarks", "",
         "Generated by `make bench` (`bench/bench.py`) — rerun it rather than editing this file. "
         "Every figure below comes from one run on one host, peers and sandboxd side by side.", "",
         "## Host", "",
         "- date: %s; run took %.0f s" % (h["date"], facts.get("runtime_s", 0)),
         "- %s, kernel %s, `nproc` = %d (%s), %.1f GiB RAM" % (h["os"], h["kernel"], h["nproc"], h["cpu"], h["mem_gib"]),
         "- cgroups: %s" % h["cgroup"],
         "- load average at start %s, at end %s (the host is shared with other work; all "
         "figures are medians of many runs to damp that)" % (" ".join(h["loadavg_start"]),
                                                           " ".join(h.get("loadavg_end", []))),
         "- peers: %s; %s; %s; wrk: %s" % (h["bwrap"], h["firejail"], h["runsc"], h["wrk"]),
         "- profiles: " + "; ".join("`%s` %s" % (k, "available" if isinstance(v, dict) else v)
                                    for k, v in profiles.items()),
         ""]
    L += ["## Against the DESIGN §10 targets", "",
          "| Target | Measured (p50) | Verdict |", "|---|---|---|"]
    for t, m, v in _targets(rows, facts, profiles):
        L.append("| %s | %s | %s |" % (t, m.replace("|", "/"), v))
    L += ["", "## Latencies", "",
          "Ratios are p50 over p50. `× bare` is against a bare fork+execve+waitpid of `/bin/true`; "
          "`× bwrap` against `bwrap --unshare-all --ro-bind / / true`.", "",
          "| Measurement | Profile | n | p50 | p90 | p99 | × bare | × bwrap |",
          "|---|---|---|---|---|---|---|---|"]
    for key in ("bare", "bwrap", "firejail", "runsc"):
        line = _row_line(rows, key, "peer")
        if line:
            L.append(line)
    for prof in ("container", "process"):
        keys = [k for k in rows if k.startswith(prof + ".")]
        if not keys and isinstance(profiles.get(prof), str):
            L.append("| all `%s` rows | %s | failed: %s | | | | | |" % (prof, prof, profiles[prof]))
        for key in keys:
            L.append(_row_line(rows, key, prof))
    for key in ("floor.healthz", "floor.session_get"):
        line = _row_line(rows, key, facts.get("analysis_profile") or "—")
        if line:
            L.append(line)
    L.append("")
    import sdkbench
    L += sdkbench.section(rows)
    L += _e2b_section(rows)
    L += _network_section(rows, facts)
    L += _gvisor_section(rows, facts, profiles)
    import mvbench
    L += mvbench.section(rows, facts)
    import wasmbench
    L += wasmbench.section(rows, facts)
    import fleetbench
    L += fleetbench.section(rows, facts)
    L += _image_section(rows, facts)
    L += _startup_section(facts)
    L += _memory_section(facts, profiles)
    L += _throughput_section(facts)
    L += _time_section(rows, facts)
    import limitsbench
    L += limitsbench.section(rows, facts)
    # A hand-written analysis that outlives regeneration (bench/exec_path.md).
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exec_path.md")
    if os.path.exists(notes):
        L += open(notes).read().rstrip("\n").split("\n") + [""]
    L += ["## Commands", "",
          "- `make bench` = `/usr/bin/python3 bench/bench.py --build $(BUILD) --out docs/benchmarks.md` "
          "(`BUILD` defaults to `build`; this run: `%s`) " % facts.get("build", "build") +
          "(add `--keep` to keep the temp dir with the daemon logs and the strace timeline).",
          "- Helpers compiled by bench.py with `cc -O2` into a temp dir: `bench/forkexec.c` "
          "(fork+execve+waitpid loop), `bench/spawnloop.c` (posix_spawnp+waitpid loop, stdio on "
          "/dev/null), `bench/apiloop.c` (libcurl, one keep-alive handle per thread).",
          "- `bench/abloop.py BUILD_A BUILD_B` (not part of `make bench`): the daemons of two "
          "builds side by side, one row (one-shot, create or exec) alternated between them round "
          "by round with a bare fork+exec, for the before and after of one change.",
          "- Daemon: `sandboxd serve --listen 127.0.0.1:<free port> --state-dir <tmp> --log-level warn "
          "--enable-unsafe-process-driver`, key from `sandboxd key create --tenant bench --state-dir <tmp>`; "
          "release build recommended (`meson setup --buildtype=release`); this run's build "
          "dir is `%s`, buildtype `%s`." % (facts.get("build", "build"), facts.get("buildtype", "?")),
          "- Peers, each run once first to catch errors, then timed: " + "; ".join(
              "`%s`" % rows[k]["cmd"] for k in ("bwrap", "firejail", "runsc") if k in rows) + ".",
          "- API: `apiloop exec SESSION` = `POST /v1/sandbox/sessions/{id}/exec {\"command\":[\"true\"]}`; "
          "`apiloop create` = `POST /v1/sandbox/sessions {\"profile\":P}` timed, then an untimed "
          "`DELETE`; `apiloop oneshot` = `POST /v1/sandbox/executions {\"profile\":P,\"command\":[\"true\"]}` "
          "then `GET /v1/sandbox/executions/{id}?wait_s=30` until final, timed together; "
          "`apiloop hold` creates the 200 idle sessions.",
          "- \"pause\" rows sleep %d ms between iterations so the warm pool (size `SANDBOXD_POOL_SIZE`, "
          "default 2) is refilled; \"back-to-back\" rows do not, and show what a burst sees once "
          "the pool is drained." % 200,
          "- Throughput: `wrk -t2 -c32 -d5s http://127.0.0.1:<port>/healthz` (and an authenticated "
          "`GET /v1/sandbox/sessions/{id}`).",
          "- Profiling: `perf stat -x, -e task-clock,context-switches,cpu-migrations,page-faults -p <tree>`, "
          "`strace -c -f -p <tree>`, `strace -f -ttt -e trace=%process,recvfrom,sendmsg,sendto,recvmsg,pwrite64,fdatasync,fsync -p <tree>`.",
          "- Issue 5 (`bench/netbench.py`): networld's namespace and servers, a daemon with "
          "`world.daemon_args()` (`--resolve NAME=ADDR` pins, `--dns-upstream`); creates "
          "alternate `{\"profile\":\"container\"}` with the same plus `\"network\":{\"egress\":"
          "\"allowlist\",\"allow\":[\"allowed.test.example\"]}` (3 rounds of 20); the HTTP loop "
          "(`netbench.LOOP`) runs by exec in one allowlist session (modes proxy, transparent, name) "
          "and by `ip netns exec` in the direct netns (3 rounds of 5 warm-up + 100 each); the "
          "footprint counts `ip -o link` lines and `nft list table inet sandboxd_<tag>` lines "
          "around 5 held sessions of each kind.",
          "- Issue 6 (`bench/gvbench.py` and `Bench.gvisor_rows`): 3 rounds alternating exec in a "
          "live gvisor session, `runsc exec` into a container started by `runsc run -detach` "
          "(bundle from `runsc spec`, root `/` read-only), `runsc do true`, one-shot and create on "
          "the main daemon (1.5 s apart so the pool refills) and on a second daemon with "
          "`SANDBOXD_POOL_SIZE=0 SANDBOXD_GVISOR_POOL_SIZE=0`.",
          "- Issue 7 (`bench/imgbench.py`): the image is built in memory (imgworld.Image), "
          "pushed with `skopeo copy oci:… docker://127.0.0.1:PORT/bench/big:v1`; first pull = "
          "`sandboxd image pull REF --state-dir <empty dir>` (3 times, each a new dir), then the "
          "same command again on the same dir; creates alternate `{\"profile\":\"container\","
          "\"image\":REF}` and `{\"profile\":\"container\"}` (3 rounds of 2 warm-up + 15) on a "
          "daemon whose store already holds the image. If the daemon refuses an image session, "
          "the row says `image create: pending` with its answer.",
          "- microVM (`bench/mvbench.py`): a daemon with `SANDBOXD_MICROVM_ACCEL=tcg` and "
          "`--config` giving `[profile.microvm] driver = microvm, pool_size = 1`; 5 rounds of a "
          "bare QEMU boot (the driver's argv, /init = a static `reboot(RB_POWER_OFF)`, initramfs "
          "from `scripts/microvm-assets.py initrd`), `apiloop create -n 1 {\"profile\":\"kata\"}` "
          "and, once `sandbox_pool_idle{profile=\"microvm\"}` is 1, `apiloop create -n 1 "
          "{\"profile\":\"microvm\"}`; then `apiloop exec -n 30 -w 3` in one session and "
          "`/proc/<qemu>/smaps_rollup` plus the guest's host memory cgroup. "
          "`bench.py --only microvm --splice` (about 2 minutes) replaces just that section of "
          "docs/benchmarks.md.",
          "- WebAssembly (`bench/wasmbench.py`): a daemon with `SANDBOXD_WASM_NODE` (default "
          "/usr/bin/node), and for the new-runner row a second one with `SANDBOXD_POOL_SIZE=0` and "
          "`--config` adding `[profile.wasm-cold] driver = wasm, pool_size = 0`; "
          "`hello.wasm` from `clang --target=wasm32-wasi -O2 -fuse-ld=lld -Wl,--strip-all`; 5 "
          "rounds of `apiloop -b '{\"command\":[\"/work/hello.wasm\"]}' exec` in a ready "
          "`wasm` session, `spawnloop` of `node run.mjs hello.wasm` (node:wasi), `apiloop -b … "
          "-f hello.wasm=/work/hello.wasm create {\"profile\":\"wasm-cold\"}` (create, upload, "
          "first exec timed together), `apiloop -n 1 oneshot` of the module (base64 in `files`) "
          "once `sandbox_pool_idle{profile=\"wasm\"}` is full and the tree still, the same for "
          "`python3 -c 'print(1)'` on `container` plus its exec in a session, and "
          "`{\"language\":\"python\"|\"javascript\"}` execs warm and (python) as a fresh "
          "session's first run. `bench.py --only wasm --splice` replaces just that section.",
          "- The E2B SDK (`bench/e2bbench.py`, part `e2b`): one `container` daemon; "
          "`bench/e2b_loop.mjs` creates a sandbox with the real `e2b` 2.51.0 from tests/compat's "
          "lockfile (`npm ci` there first if needed), `E2B_API_URL`/`E2B_SANDBOX_URL` from "
          "`GET /v1/compat/e2b`; in one node process, alternating batches of 10 warm-up + 100: "
          "`sandbox.commands.run('true')`, then `POST /v1/sandbox/sessions/{id}/exec` by `fetch` "
          "(keep-alive) with `[\"true\"]` and with `[\"/bin/bash\",\"-l\",\"-c\",\"true\"]` "
          "(what `commands.run` executes), both in that sandbox; then `apiloop exec -n 100 -w 10` "
          "in a session created through our API on the same daemon; 3 rounds. "
          "`bench.py --only e2b --out /tmp/x.md` runs just it.",
          "- `bench.py --only gvisor,nopool,net,images,store,trace,limits,microvm,wasm --out /tmp/x.md` "
          "runs just those parts (for working on one; the report then lacks the rest).",
          "- Percentiles are nearest-rank over the timed iterations, after the warm-up ones.", ""]
    return "\n".join(L)
