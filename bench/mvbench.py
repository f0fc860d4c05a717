"""mvbench.py — the microVM rows of `make bench` (docs/microvm.md): the
`microvm` driver against a bare QEMU microVM boot of the same kernel and
initramfs, in one run, with the accelerator on every row.

  peer      `qemu-system-x86_64 -M microvm …` with the argv the driver builds
            (src/runtime/drivers/microvm_qemu.c), the same kernel, the same
            initramfs except that /init is a tiny static program that powers
            the guest off at once: QEMU spawn → QEMU exit.  The floor of any
            cold create on this kernel.
  cold      session create on the `kata` profile (same driver, pool_size 0):
            one guest boot up to sbx-init's READY, timed by apiloop (POST
            only, DELETE untimed).
  pooled    session create on a `microvm` profile with pool_size 1 (a config
            file): the create takes a booted guest; between creates the
            bench waits for /metrics' sandbox_pool_idle{profile="microvm"}
            to come back to 1, so every create finds a guest and no boot
            runs behind a timed request.
  exec      exec `true` in a warm session (apiloop exec), and the same
            fork+exec timed by Python inside the guest (the floor: what the
            guest itself pays under this accelerator).
  restore   a second daemon with golden states on (the default): one cold
            create of `kata` makes the key's golden state in the background;
            once its file is there, creates restore a copy of it (no pool).
  memory    Rss/Pss of the QEMU process of an idle guest (smaps_rollup) and
            the memory usage of the guest's host cgroup (QEMU + the relay).

Peer, cold and pooled run in alternating rounds so host load weighs on all
three alike.  `bench.py --only microvm` runs just this part; with
`--splice FILE` it replaces this section in an existing report."""

import glob
import os
import re
import socket
import subprocess
import sys
import time

from daemon import Daemon, Failed, first_line, memory_cgroup, cgroup_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
ROUNDS = 5
EXEC_N = 30
PROFILE_CONF = "[profile.microvm]\ndriver = microvm\npool_size = 1\n"
TINY_INIT = r"""
#include <sys/reboot.h>
#include <unistd.h>
int main(void) { reboot(RB_POWER_OFF); for (;;) pause(); }
"""
# Timed inside the guest: fork+exec+wait of /bin/true, as the host's `bare`
# row does (bench/forkexec.c), in microseconds, one per line.
GUEST_LOOP = ("import os,time\n"
              "for i in range(%d):\n"
              " t=time.perf_counter(); p=os.posix_spawn('/bin/true',['true'],{})\n"
              " os.waitpid(p,0)\n"
              " i>=3 and print(int((time.perf_counter()-t)*1e6))\n")

KEYS = {
    "mv.peer_boot": "bare `qemu-system-x86_64 -M microvm` boot, /init powers off at once "
                    "(QEMU spawn → exit)",
    "mv.create_cold": "session create, no pool (`kata` profile: one guest boot to sbx-init's READY)",
    "mv.create_pooled": "session create from the warm pool (`microvm` profile, pool_size 1)",
    "mv.restore": "session create restored from the saved golden state (`kata`, no pool)",
    "mv.exec": "exec `true` in a warm session (API round trip)",
    "mv.guest_forkexec": "fork+exec+wait of `/bin/true` timed inside the guest (Python, "
                         "`os.posix_spawn`)",
}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def host_tsc_khz():
    """As the driver reads it (microvm.c host_tsc_khz)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/tsc_freq_khz") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            m = re.match(r"cpu MHz\s*:\s*([\d.]+)", line)
            if m:
                return int(float(m.group(1)) * 1000)
    return 0


def assets(build):
    """The files the driver would find in the build tree (microvm.c find_asset)."""
    out = {"qemu": os.environ.get("SANDBOXD_MICROVM_QEMU", "/usr/bin/qemu-system-x86_64")}
    for key, name in (("kernel", "vmlinuz"), ("initrd", "initrd.img"), ("rootfs", "rootfs.sqfs")):
        out[key] = os.environ.get("SANDBOXD_MICROVM_" + key.upper(),
                                  os.path.join(build, "microvm", name))
    for key, path in out.items():
        if not os.access(path, os.R_OK):
            raise Failed("no %s at %s (`make microvm-assets`)" % (key, path))
    return out


def peer_initrd(b):
    """The driver's initramfs with /init swapped for TINY_INIT, built by
    scripts/microvm-assets.py initrd (same modules, same layout)."""
    src = os.path.join(b.tmp, "tiny_init.c")
    exe = os.path.join(b.tmp, "tiny_init")
    out = os.path.join(b.tmp, "peer-initrd.img")
    with open(src, "w") as f:
        f.write(TINY_INIT)
    r = subprocess.run(["cc", "-static", "-O2", "-o", exe, src], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed("cc -static tiny_init: " + first_line(r.stderr))
    cache = os.environ.get("MICROVM_CACHE", "/var/cache/sandboxd/microvm")
    r = subprocess.run([sys.executable, os.path.join(TOP, "scripts", "microvm-assets.py"),
                        "initrd", "--cache", cache, "--sbx-vm", exe, "--sbx-init",
                        os.path.join(b.build, "src", "init", "sbx-init"), "--out", out],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise Failed("microvm-assets.py initrd: " + first_line(r.stderr))
    return out


def peer_argv(a, initrd, console, link_fd=3, accel="tcg", mem_mib=512 + 64):
    """microvm_qemu.c qemu_argv() for accel (kvm or tcg), the profiles'
    default request (512 MiB, 1 vCPU, 256 MiB disk): guest RAM is the
    request plus the driver's 64 MiB headroom; link_fd: the link socket
    (the driver puts it on fd 3, the bench passes it where it is)."""
    kvm = accel == "kvm"
    tsc = 0 if kvm else host_tsc_khz()
    tscopt = " tsc_early_khz=%d tsc=reliable no_timer_check" % tsc if tsc else ""
    append = ("console=ttyS0 quiet reboot=k panic=-1 pci=off i8042.noaux i8042.nokbd i8042.nopnp "
              "8250.nr_uarts=1 random.trust_cpu=on%s sbx.disk=%d sbx.hostname=peer "
              "sbx.seed=%s sbx.time=%d sbx.pids=256 sbx.memory=%d sbx.uid=1000 sbx.gid=1000"
              % (tscopt, 256 << 20, os.urandom(32).hex(), int(time.time()), 512 << 20))
    argv = [a["qemu"], "-M", "microvm,x-option-roms=off,isa-serial=on,pcie=off" +
            (",rtc=off" if kvm else ""),
            "-accel", "kvm" if kvm else "tcg,tb-size=32", "-cpu", "host" if kvm else "max",
            "-m", str(mem_mib), "-smp", "1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-serial", "file:" + console, "-kernel", a["kernel"], "-initrd", initrd,
            "-append", append, "-device", "virtio-serial-device",
            "-chardev", "socket,id=link,fd=%d" % link_fd,
            "-device", "virtserialport,chardev=link,name=sbx.link",
            "-drive", "file=%s,if=none,id=root,format=raw,readonly=on" % a["rootfs"],
            "-device", "virtio-blk-device,drive=root",
            "-sandbox", "on,obsolete=deny,spawn=deny,resourcecontrol=deny"]
    if os.geteuid() == 0:
        argv += ["-runas", "nobody"]
    return argv


def peer_boot_us(argv_of):
    """One boot: spawn → exit, µs.  The link is one end of a socketpair, as
    the driver's (nothing reads it; this /init never opens the port)."""
    a, b = socket.socketpair()
    try:
        argv = argv_of(b.fileno())
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, pass_fds=(b.fileno(),))
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise Failed("QEMU did not exit within 120 s")
        us = (time.monotonic() - t0) * 1e6
        if p.returncode != 0:
            raise Failed("QEMU exit %d: %s" % (p.returncode, first_line(err.decode(errors="replace"))))
        return us
    finally:
        a.close()
        b.close()


def pool_idle(d, profile="microvm"):
    code, body = d.call("GET", "/metrics")
    if code != 200 or not isinstance(body, str):
        raise Failed("GET /metrics: HTTP %d" % code)
    m = re.search(r'^sandbox_pool_idle\{profile="%s"\} (\d+)' % re.escape(profile), body, re.M)
    return int(m.group(1)) if m else 0


def wait_idle(d, want=1, timeout=180, profile="microvm"):
    t0 = time.monotonic()
    while pool_idle(d, profile) < want:
        if time.monotonic() - t0 > timeout:
            raise Failed("sandbox_pool_idle{profile=\"%s\"} not %d after %d s"
                         % (profile, want, timeout))
        time.sleep(0.1)
    return time.monotonic() - t0


def qemu_pids(state_dir):
    """{pid: sbx.hostname} of the QEMU guests of the daemon whose state dir
    is state_dir (their console file is under it; the host may run others)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if not argv or not os.path.basename(argv[0]).startswith(b"qemu-system"):
            continue
        if not any(a.startswith(b"file:" + state_dir.encode() + b"/") for a in argv):
            continue
        m = re.search(rb"sbx\.hostname=(\S+)", b" ".join(argv))
        out[int(d)] = m.group(1).decode() if m else ""
    return out


def rollup_kib(pid):
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Rss", "Pss", "Pss_Anon", "Pss_File", "Anonymous"):
                    out[k] = int(rest.split()[0])
    except OSError:
        pass
    return out


def guest_memory(pid):
    """QEMU's Rss/Pss and its host cgroup's usage (QEMU + relay), KiB."""
    m = {"rollup": rollup_kib(pid)}
    cg = memory_cgroup(pid)
    if cg:
        usage, kernel = cgroup_bytes(cg)
        m.update(cg_kib=usage // 1024, cg_kernel_kib=kernel // 1024, cg_version=cg[0],
                 cg_path=cg[1])
    return m


def golden_states(state_dir):
    """The driver's saved golden states (microvm.c golden_make renames each
    into place whole)."""
    return glob.glob(os.path.join(state_dir, "microvm", "golden-*.state"))


def restore_part(b, facts, accel, rounds=ROUNDS):
    """Restore rows on a daemon of their own, with golden states on."""
    name = KEYS["mv.restore"]
    cmd = ('apiloop create -n 1 {"profile":"kata"} (%d times), after a first cold create made '
           "the key's golden state" % rounds)
    d = Daemon(b.build, b.tmp, "microvm-snap",
               {"SANDBOXD_MICROVM_ACCEL": facts["setting"], "SANDBOXD_MICROVM_SNAPSHOT": "on",
                "SANDBOXD_POOL_SIZE": "0", "SANDBOXD_GVISOR_POOL_SIZE": "0"})
    try:
        try:
            d.start()
            t0 = time.monotonic()
            sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "kata"})["id"]
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)
            while not golden_states(d.state):
                if time.monotonic() - t0 > 180:
                    raise Failed("no golden state saved within 180 s (microvm_snapshot)")
                time.sleep(0.1)
            facts["golden_after_s"] = time.monotonic() - t0
            facts["golden_bytes"] = os.path.getsize(golden_states(d.state)[0])
        except Failed as e:
            return b.fail("mv.restore", name, cmd, str(e))
        for _ in range(rounds):
            b.add_samples("mv.restore", name, cmd, lambda: b.samples(
                b.api(d, "-n", 1, "create", '{"profile":"kata"}'), timeout=300))
        b.finish_rows()
        # One restored guest's memory, idle.
        try:
            sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "kata"})["id"]
            time.sleep(2.0)
            pids = list(qemu_pids(d.state))
            if len(pids) == 1:
                facts.setdefault("memory", {})["restored"] = guest_memory(pids[0])
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)
        except Failed as e:
            log("microvm restored guest memory: %s" % e)
    finally:
        d.stop()


def microvm_part(b):
    """Fills b.rows['mv.*'] and b.facts['mv']."""
    t_part = time.time()
    facts = b.facts.setdefault("mv", {})
    # The daemon's setting: tcg unless the environment asks for another
    # (SANDBOXD_MICROVM_ACCEL=auto on a KVM host); the rows print what the
    # daemon then reports as the profile's platform.
    want = os.environ.get("SANDBOXD_MICROVM_ACCEL") or "tcg"
    accel = facts["accel"] = facts["setting"] = want
    facts["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    facts["loadavg_start"] = open("/proc/loadavg").read().split()[:3]

    def fail_all(reason):
        for k, name in KEYS.items():
            if k not in b.rows:
                b.fail(k, name, "", reason)

    try:
        a = assets(b.build)
        initrd = peer_initrd(b)
    except Failed as e:
        return fail_all(str(e))
    console = os.path.join(b.tmp, "peer-console.log")
    try:
        r = subprocess.run([a["qemu"], "--version"], capture_output=True, text=True, timeout=20)
        facts["qemu"] = first_line(r.stdout)
    except (OSError, subprocess.TimeoutExpired):
        pass
    facts["kernel"] = os.path.basename(os.path.realpath(a["kernel"]))
    facts["rootfs_bytes"] = os.path.getsize(a["rootfs"])

    def argv_of(fd):
        return peer_argv(a, initrd, console, fd, facts["accel"])
    facts["initrd_bytes"] = os.path.getsize(a["initrd"])
    conf = os.path.join(b.tmp, "microvm.conf")
    with open(conf, "w") as f:
        f.write(PROFILE_CONF)
    # Only the microVM guests boot: the other drivers' pools off.
    d = Daemon(b.build, b.tmp, "microvm",
               {"SANDBOXD_MICROVM_ACCEL": want, "SANDBOXD_MICROVM_SNAPSHOT": "off",
                "SANDBOXD_POOL_SIZE": "0",
                "SANDBOXD_GVISOR_POOL_SIZE": "0", "SANDBOXD_MICROVM_POOL_SIZE": "1"},
               ["--config", conf])
    sid = None
    try:
        try:
            d.start()
            facts["serve_to_probed_ms"] = (d.probed_s or 0) * 1000
            profs = {p["name"]: p for p in d.must("GET", "/v1/sandbox/profiles")["profiles"]}
            for name in ("microvm", "kata"):
                p = profs.get(name)
                if not p or not p.get("available"):
                    raise Failed("profile %s: %s" % (name, (p or {}).get("reason", "not offered")))
            facts["platform"] = profs["microvm"].get("platform")
            facts["platform_note"] = profs["microvm"].get("platform_note")
            accel = facts["accel"] = profs["microvm"].get("platform") or accel
            facts["first_fill_s"] = wait_idle(d)
        except Failed as e:
            return fail_all("microvm daemon: " + str(e))
        facts["peer_argv"] = argv_of(3)
        create_cmd = "apiloop create -n 1 (POST timed, DELETE untimed)"
        names = {
            "mv.peer_boot": (KEYS["mv.peer_boot"], "argv of microvm_qemu.c (%s, 512 MiB request = 576 MiB guest, 1 vCPU), "
                             % accel +
                             "initramfs with a 0.8 MB static /init that calls reboot(POWER_OFF)"),
            "mv.create_cold": (KEYS["mv.create_cold"], create_cmd + ', {"profile":"kata"}'),
            "mv.create_pooled": (KEYS["mv.create_pooled"], create_cmd + ', {"profile":"microvm"}, '
                                 "after sandbox_pool_idle{profile=\"microvm\"} is 1 again"),
        }
        refill = []
        for rnd in range(ROUNDS):
            b.add_samples("mv.peer_boot", *names["mv.peer_boot"], lambda: [peer_boot_us(argv_of)])
            b.add_samples("mv.create_cold", *names["mv.create_cold"], lambda: b.samples(
                b.api(d, "-n", 1, "create", '{"profile":"kata"}'), timeout=300))
            try:
                wait_idle(d)
            except Failed as e:  # a create now would boot: not a pooled one
                b.rows.setdefault("mv.create_pooled", {"name": names["mv.create_pooled"][0],
                                                       "cmd": names["mv.create_pooled"][1],
                                                       "samples": []})["failed"] = str(e)
            b.add_samples("mv.create_pooled", *names["mv.create_pooled"], lambda: b.samples(
                b.api(d, "-n", 1, "create", '{"profile":"microvm"}'), timeout=300))
            try:
                refill.append(wait_idle(d))  # the next round starts with nothing booting
            except Failed as e:
                log("microvm refill: %s" % e)
            log("microvm round %d/%d done" % (rnd + 1, ROUNDS))
        b.finish_rows()
        if refill:
            facts["refill_s"] = sorted(refill)[len(refill) // 2]
        # A warm session: takes the pooled guest; wait for the refill, then
        # the idle guests' memory, then the execs.
        before = qemu_pids(d.state)
        try:
            sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "microvm"})["id"]
            wait_idle(d)
            time.sleep(2.0)
            after = qemu_pids(d.state)
            mine = [p for p in before if p in after]
            pooled = [p for p in after if p not in before]
            mem = {"qemu_before": len(before), "qemu_after": len(after)}
            if len(mine) == 1:
                mem["session"] = guest_memory(mine[0])
            if len(pooled) == 1:
                mem["pooled"] = guest_memory(pooled[0])
            facts.setdefault("memory", {}).update(mem)
        except Failed as e:
            facts.setdefault("memory", {})["failed"] = str(e)
        if sid:
            b.row("mv.exec", KEYS["mv.exec"], "apiloop exec (%d, after 3 warm-up)" % EXEC_N,
                  lambda: b.samples(b.api(d, "-n", EXEC_N, "-w", 3, "exec", sid)))

            def guest_loop():
                js = d.must("POST", "/v1/sandbox/sessions/%s/exec" % sid,
                            {"command": ["python3", "-c", GUEST_LOOP % (EXEC_N + 3)],
                             "timeout_s": 120})
                xs = [float(x) for x in (js.get("stdout") or "").split()]
                if js.get("status") != "succeeded" or len(xs) != EXEC_N:
                    raise Failed("in-guest loop: %s %s" % (js.get("status"),
                                                           first_line(js.get("stderr"))))
                return xs
            b.row("mv.guest_forkexec", KEYS["mv.guest_forkexec"],
                  "python3 -c (posix_spawn + waitpid, %d after 3 warm-up) by one exec" % EXEC_N,
                  guest_loop)
            if "mv.exec" in b.rows and "stats" in b.rows["mv.exec"]:
                s = b.rows["mv.exec"]["stats"]
                facts["exec_p95_us"] = s["p95"]
        else:
            b.fail("mv.exec", KEYS["mv.exec"], "", "no session")
            b.fail("mv.guest_forkexec", KEYS["mv.guest_forkexec"], "", "no session")
    finally:
        if sid:
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)
        d.stop()
    restore_part(b, facts, accel)
    facts["part_s"] = time.time() - t_part
    facts["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    log("microvm part took %.0f s" % facts["part_s"])


# ---- the report --------------------------------------------------------------

def _fmt(x):
    if x is None:
        return "—"
    if x >= 1e6:
        return "%.2f s" % (x / 1e6)
    return "%.2f ms" % (x / 1000) if x >= 1000 else "%.0f µs" % x


def _kib(x):
    return "%.1f MiB" % (x / 1024.0) if x is not None else "—"


TARGETS = (("mv.create_pooled", 50e3, "pooled create ≤ 50 ms"),
           ("mv.restore", 0.5e6, "restore ≤ 0.5 s"),
           ("mv.exec", 6e3, "exec `true` ≤ 6 ms p50"))


def section(rows, facts):
    mv = facts.get("mv")
    if not mv and not any(k.startswith("mv.") for k in rows):
        return []
    accel = (mv or {}).get("accel", "tcg")
    L = ["## microVM (`microvm` driver)", ""]
    if mv and mv.get("date"):
        L += ["Measured %s, load average %s at the start of this part and %s at its end "
              "(`nproc` = %d). %s; guest kernel `%s`, initramfs %.2f MB, root image %.1f MiB."
              % (mv["date"], " ".join(mv.get("loadavg_start", [])),
                 " ".join(mv.get("loadavg_end", [])), os.cpu_count(), mv.get("qemu", "QEMU ?"),
                 mv.get("kernel", "?"), mv.get("initrd_bytes", 0) / 1e6,
                 mv.get("rootfs_bytes", 0) / 1048576.0), ""]
    L += ["One daemon with `SANDBOXD_MICROVM_ACCEL=%s` and a config file giving the `microvm` "
         "profile `pool_size = 1` (`kata`, the same driver, keeps the built-in 0); the other "
         "drivers' pools off. The peer is QEMU alone with the driver's own argv, the same kernel "
         "and the same initramfs except that /init powers off at once. Peer, cold and pooled "
         "create run in %d alternating rounds; before every pooled create and after it the bench "
         "waits until `sandbox_pool_idle{profile=\"microvm\"}` is 1, so no boot runs behind a "
         "timed request. Accelerator on every row; see docs/microvm.md for what changes on a "
         "KVM host." % ((mv or {}).get("setting", accel), ROUNDS), "",
         "| Measurement | accel | n | p50 | p95 | min | max | × bare boot |",
         "|---|---|---|---|---|---|---|---|"]
    base = rows.get("mv.peer_boot", {}).get("stats", {}).get("p50")
    for key in ("mv.peer_boot", "mv.create_cold", "mv.create_pooled", "mv.restore", "mv.exec",
                "mv.guest_forkexec"):
        r = rows.get(key)
        if not r:
            continue
        if "failed" in r:
            L.append("| %s | %s | %s | | | | | |" % (r["name"], accel, r["failed"].replace("|", "/")))
            continue
        s = r["stats"]
        rt = "(base)" if key == "mv.peer_boot" else (
            "%.3f×" % (s["p50"] / base) if base and key.startswith("mv.create") else "—")
        L.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            r["name"], accel, s["n"], _fmt(s["p50"]), _fmt(s["p95"]), _fmt(s["min"]),
            _fmt(s.get("max")), rt))
    L.append("")
    mem = (mv or {}).get("memory") or {}
    if mem.get("failed"):
        L += ["Host memory per idle guest: failed: %s" % mem["failed"], ""]
    elif mem:
        L += ["| Host memory of one idle guest (request 512 MiB, 1 vCPU) | accel | QEMU Rss | QEMU Pss "
              "| of which anon | host cgroup usage (QEMU + relay) |", "|---|---|---|---|---|---|"]
        for k, what in (("pooled", "pooled guest, booted, nothing run yet"),
                        ("session", "the warm session's guest, 2 s after create, before its execs"),
                        ("restored", "a guest restored from the golden state, 2 s after create")):
            m = mem.get(k)
            if not m:
                continue
            ru = m.get("rollup", {})
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                what, accel, _kib(ru.get("Rss")), _kib(ru.get("Pss")), _kib(ru.get("Anonymous")),
                ("%s (cgroup v%d `memory.%s`)" % (_kib(m["cg_kib"]), m["cg_version"],
                                                    "current" if m["cg_version"] == 2 else
                                                    "usage_in_bytes")) if "cg_kib" in m else
                "not readable"))
        L.append("")
    L += ["| Target | Measured (p50) | Verdict |", "|---|---|---|"]
    for key, bound, what in TARGETS:
        r = rows.get(key)
        if not r or "failed" in r:
            L.append("| %s | %s | **not measured** |" % (
                what, (r or {}).get("failed", "not run").replace("|", "/")))
            continue
        p = r["stats"]["p50"]
        L.append("| %s | %s (%s) | %s |" % (what, _fmt(p), accel,
                                             "**met**" if p <= bound else "**not met**"))
    L.append("")
    extra = []
    if mv and mv.get("refill_s") is not None:
        extra.append("the pool refills one guest in %.1f s (median, after a pooled create)"
                     % mv["refill_s"])
    if mv and mv.get("golden_after_s") is not None:
        extra.append("the golden state (%.0f MB) was on disk %.1f s after the first cold create "
                     "began" % (mv.get("golden_bytes", 0) / 1e6, mv["golden_after_s"]))
    if mv and mv.get("first_fill_s") is not None:
        extra.append("the first pool guest was ready %.1f s after every driver had probed"
                     % mv["first_fill_s"])
    if mv and mv.get("serve_to_probed_ms"):
        extra.append("`sandboxd serve` → every driver probed (the microvm probe boots one "
                     "throw-away guest): %.1f s" % (mv["serve_to_probed_ms"] / 1000))
    if mv and mv.get("part_s"):
        extra.append("this part took %.0f s" % mv["part_s"])
    if extra:
        L += ["Also: " + "; ".join(extra) + ".", ""]
    L += ["Rows: *bare boot* is `qemu-system-x86_64` spawned by Python (`subprocess.Popen`, fd 3 "
          "one end of a socketpair as the driver's) until it exits after the guest's power-off; "
          "*cold create* adds everything a session needs after the kernel: the 10 modules, the "
          "squashfs root and its overlay, sbx-init and the READY handshake over the link, and the "
          "daemon's side (cgroup, relay, store); *pooled create* takes a guest booted before; "
          "*restore* (a second daemon, golden states on, no pool; the first daemon has "
          "`SANDBOXD_MICROVM_SNAPSHOT=off` so its cold creates boot) starts QEMU with `-incoming` "
          "from the saved state, resumes it and gives it a fresh identity over the link; "
          "*exec* is one `POST …/exec {\"command\":[\"true\"]}` on a keep-alive connection "
          "(apiloop); the in-guest loop is the guest's own fork+exec floor under this "
          "accelerator.", ""]
    return L


def splice(path, text, heading="## microVM", after=None):
    """Replaces the section whose heading starts with `heading` (this one by
    default; wasmbench's too) of an existing report with the one in text;
    a report without it gets it after the section `after`, else before
    `## Commands`."""
    new = text.split("\n")
    start = next((i for i, l in enumerate(new) if l.startswith(heading)), None)
    if start is None:
        raise SystemExit("bench: no %s section to splice" % heading.lstrip("# "))
    end = next((i for i in range(start + 1, len(new)) if new[i].startswith("## ")), len(new))
    part = new[start:end]
    with open(path) as f:
        old = f.read().split("\n")
    s = next((i for i, l in enumerate(old) if l.startswith(heading)), None)
    if s is not None:
        e = next((i for i in range(s + 1, len(old)) if old[i].startswith("## ")), len(old))
        old[s:e] = part
    else:
        a = next((i for i, l in enumerate(old) if after and l.startswith(after)), None)
        if a is not None:
            c = next((i for i in range(a + 1, len(old)) if old[i].startswith("## ")), len(old))
        else:
            c = next((i for i, l in enumerate(old) if l.startswith("## Commands")), len(old))
        old[c:c] = part
    with open(path, "w") as f:
        f.write("\n".join(old))
