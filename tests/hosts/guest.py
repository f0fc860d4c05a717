#!/usr/bin/python3
"""guest.py — the host lab's runner inside a guest (started by init.sh's
stage 2, or by systemd as PID 1 as the Delegate=yes service lab-runner,
with the host's userland as root).  Sets up cgroups the way the host kind
does (under systemd: a leaf of the runner's own delegated cgroup; v2
without systemd: a systemd-like delegated subtree; v1: systemd's legacy
hierarchies), runs each item of /lab/out/spec.json with a timeout, and
writes per-test results to /lab/out/results.json for lab.py.  Stdlib only.
"""
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

CG = "/sys/fs/cgroup"
# what systemd enables below the root on a v2 host
V2_CONTROLLERS = ["cpuset", "cpu", "io", "memory", "pids"]
# systemd's legacy layout: cpu and cpuacct (and net_cls, net_prio) share a hierarchy
V1_HIERARCHIES = ["cpu,cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids",
                  "net_cls,net_prio", "perf_event", "hugetlb"]
SERVICE = "system.slice/sandboxd.service"
# v2: where the runner itself lives (a service of its own: the cgroups it
# hands to what it runs are siblings, never below a cgroup with processes)
RUNNER = "system.slice/lab-runner.service"
SLICE = "system.slice"
_unit_seq = [0]


def delegated_cgroup():
    """v2: a fresh cgroup for one command in the delegated parent
    (SANDBOXD_TEST_CGROUP), like the one systemd gives a Delegate=yes
    service; None on v1 (the legacy layout keeps everything in SERVICE, as
    it does for the daemon)."""
    parent = os.environ.get("SANDBOXD_TEST_CGROUP")
    if not parent:
        return None
    _unit_seq[0] += 1
    d = f"{parent}/lab-test-{_unit_seq[0]}.service"
    os.makedirs(d, exist_ok=True)
    return d


def say(msg):
    print("lab: " + msg, flush=True)


def sh(*cmd):
    subprocess.run(cmd, check=True)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def setup_v2():
    sh("mount", "-t", "cgroup2", "-o", "nsdelegate,memory_recursiveprot", "cgroup2", CG)
    os.makedirs(f"{CG}/init.scope", exist_ok=True)
    write(f"{CG}/init.scope/cgroup.procs", "1")  # PID 1 leaves the root, as under systemd
    avail = open(f"{CG}/cgroup.controllers").read().split()
    enable = " ".join("+" + c for c in V2_CONTROLLERS if c in avail)
    write(f"{CG}/cgroup.subtree_control", enable)
    os.makedirs(f"{CG}/system.slice", exist_ok=True)
    write(f"{CG}/system.slice/cgroup.subtree_control", enable)
    # The runner sits in a service of its own; every test command (and, from
    # sbxtest.Daemon, every daemon a test starts) gets a fresh Delegate=yes
    # cgroup of its own under system.slice, holding only it, as systemd
    # gives sandboxd.service (SANDBOXD_TEST_CGROUP names the slice).
    os.makedirs(f"{CG}/{RUNNER}", exist_ok=True)
    write(f"{CG}/{RUNNER}/cgroup.procs", str(os.getpid()))
    os.environ["SANDBOXD_TEST_CGROUP"] = f"{CG}/{SLICE}"
    return f"cgroup2 (each test and daemon in a delegated {SLICE}/*.service: " \
           f"{open(f'{CG}/{SLICE}/cgroup.controllers').read().strip()})"


def under_systemd():
    try:
        return open("/proc/1/comm").read().strip() == "systemd"
    except OSError:
        return False


def setup_systemd():
    """systemd is PID 1 and runs this as lab-runner.service with
    Delegate=yes: the runner moves into a leaf of its own cgroup, enables
    the delegated controllers for the rest of it, and every test command
    and every daemon a test starts gets a sibling cgroup there, as a
    delegated service's own children would (SANDBOXD_TEST_CGROUP)."""
    rel = [l.split(":", 2)[2] for l in open("/proc/self/cgroup").read().splitlines()
           if l.startswith("0::")][0]
    own = CG + rel.rstrip("/")
    os.makedirs(f"{own}/runner", exist_ok=True)
    for pid in open(f"{own}/cgroup.procs").read().split():  # this and the shell that started it
        write(f"{own}/runner/cgroup.procs", pid)
    ctrls = open(f"{own}/cgroup.controllers").read().split()
    write(f"{own}/cgroup.subtree_control", " ".join("+" + c for c in ctrls))
    os.environ["SANDBOXD_TEST_CGROUP"] = own
    ver = subprocess.run(["systemctl", "--version"], stdout=subprocess.PIPE,
                         text=True).stdout.split("\n")[0].split()[:2]
    return f"cgroup2 under {' '.join(ver)} as PID 1 (each test and daemon in a cgroup of " \
           f"the Delegate=yes {rel.lstrip('/')}: {' '.join(ctrls)})"


def setup_v1():
    sh("mount", "-t", "tmpfs", "-o", "mode=0755", "cgroup", CG)
    avail = {l.split()[0] for l in open("/proc/cgroups") if not l.startswith("#") and l.split()[3] == "1"}
    mounted = []
    for h in V1_HIERARCHIES:
        ctrls = [c for c in h.split(",") if c in avail]
        if not ctrls:
            continue
        d = f"{CG}/{','.join(ctrls)}"
        os.makedirs(d, exist_ok=True)
        sh("mount", "-t", "cgroup", "-o", ",".join(ctrls), "cgroup", d)
        mounted.append(d)
        for c in ctrls:
            if len(ctrls) > 1:
                os.symlink(",".join(ctrls), f"{CG}/{c}")
    os.makedirs(f"{CG}/systemd", exist_ok=True)
    sh("mount", "-t", "cgroup", "-o", "none,name=systemd", "cgroup", f"{CG}/systemd")
    mounted.append(f"{CG}/systemd")
    os.makedirs(f"{CG}/unified", exist_ok=True)
    sh("mount", "-t", "cgroup2", "-o", "nsdelegate", "cgroup2", f"{CG}/unified")
    mounted.append(f"{CG}/unified")
    for d in mounted:
        os.makedirs(f"{d}/{SERVICE}", exist_ok=True)
        if d.endswith("/cpuset") or ",cpuset" in d:
            for k in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset children start empty
                for sub in ("system.slice", SERVICE):
                    write(f"{d}/{sub}/{k}", open(f"{d}/{k}").read())
        write(f"{d}/{SERVICE}/cgroup.procs", str(os.getpid()))
    return "cgroup v1 (" + " ".join(os.path.basename(d) for d in mounted) + ")"


def heartbeat(path, every=60):
    """Every `every` s, the guest's process list to path: what a hung or
    slow subset was doing is in the results even after it is killed."""
    def loop():
        while True:
            time.sleep(every)
            ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:24,etime,time,args",
                                 "--sort=start_time"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
            load = open("/proc/loadavg").read().split()[0]
            newest = [l.split(None, 5)[-1][:70] for l in ps.splitlines()[-3:]]
            say(f"heartbeat: load {load}; newest: " + " | ".join(newest))
            with open(path, "a") as f:
                f.write(f"--- {time.strftime('%H:%M:%S')} load {load}\n{ps}")
    threading.Thread(target=loop, daemon=True).start()


def dump_stacks(path):
    """Kernel and wait state of every user process: why a subset hung."""
    with open(path, "w") as f:
        for pid in sorted((int(p) for p in os.listdir("/proc") if p.isdigit())):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
                if not cmd:
                    continue  # a kernel thread
                st = open(f"/proc/{pid}/status").read()
                state = re.search(r"State:\s+(.*)", st).group(1)
                f.write(f"=== {pid} [{state}] {cmd[:200]}\n")
                for tid in os.listdir(f"/proc/{pid}/task"):
                    f.write(f"--- task {tid} wchan={open(f'/proc/{pid}/task/{tid}/wchan').read()}\n")
                    f.write(open(f"/proc/{pid}/task/{tid}/stack").read())
            except OSError:
                continue
    say(f"stacks of every process written to {os.path.basename(path)}")


def run_proc(cmd, cwd, env, logf, timeout, stacks):
    """Run cmd in its own session, output to logf; killed with its whole
    group past timeout.  Returns (exit status, seconds, problem or None)."""
    t0 = time.time()
    cg = delegated_cgroup()

    def enter():
        if cg:
            with open(f"{cg}/cgroup.procs", "w") as f:
                f.write("0")  # this process, before it execs the command
    with open(logf, "w") as lf:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True,
                             preexec_fn=enter)
        try:
            return p.wait(timeout=timeout), time.time() - t0, None
        except subprocess.TimeoutExpired:
            dump_stacks(stacks)
            os.killpg(p.pid, signal.SIGKILL)
            return p.wait(), time.time() - t0, f"timed out after {timeout} s (killed)"


def run_meson(item, spec, env):
    """Each meson test of the subset on its own (command and environment
    from `meson introspect --tests`, done by lab.py): a hung test costs its
    own timeout, never the rest of the suite."""
    tests = []
    for t in item["meson_tests"]:
        name = t["name"]
        timeout = item.get("timeouts", {}).get(name, item.get("test_timeout", t["timeout"]))
        logf = f"{spec['out']}/{item['name']}.{name}.log"
        tenv = dict(env, **t["env"])
        say(f"  {name} (timeout {timeout} s)")
        rc, secs, problem = run_proc(t["cmd"], t.get("workdir") or spec["build"], tenv, logf,
                                     timeout, f"{spec['out']}/{name}.stacks")
        outcome = "pass" if rc == 0 else "skip" if rc == 77 else "fail"
        text = open(logf, errors="replace").read()
        errs = [l.strip()[:300] for l in text.splitlines() if ERR.search(l)] if outcome == "fail" else []
        if problem:
            errs.insert(0, problem)
        elif outcome == "fail":
            errs.insert(0, f"exit status {rc}")
        say(f"  {name}: {outcome} in {secs:.1f} s")
        tests.append({"id": f"meson:{name}", "outcome": outcome, "seconds": round(secs, 1),
                      "error": errs[:8]})
    return tests


def run_item(item, spec, env):
    """Run one subset; returns (subset record, per-test results)."""
    name, out = item["name"], spec["out"]
    t0 = time.time()
    problem, rc = None, None
    if item["kind"] == "meson":
        tests = run_meson(item, spec, env)
        rc = sum(1 for t in tests if t["outcome"] == "fail")
    elif item["kind"] == "pytest":
        junit = f"{out}/{name}.junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
               f"--junitxml={junit}", *item.get("args", []), *item["paths"]]
        say(f"{name}: {' '.join(cmd)}")
        rc, _s, problem = run_proc(cmd, spec["repo"], dict(env, **item.get("env", {})),
                                   f"{out}/{name}.log",
                                   item.get("timeout", 300), f"{out}/{name}.stacks")
        tests = junit_results(junit, spec["repo"])
    else:
        raise ValueError(f"unknown subset kind {item['kind']}")
    secs = time.time() - t0
    if not tests and not problem:
        problem = f"no test results (rc {rc}; see {name}.log)"
    say(f"{name}: rc={rc} in {secs:.1f} s, "
        + ", ".join(f"{k}={v}" for k, v in sorted(count(tests).items())))
    return {"name": name, "rc": rc, "seconds": round(secs, 1), "problem": problem}, tests


def count(tests):
    c = {}
    for t in tests:
        c[t["outcome"]] = c.get(t["outcome"], 0) + 1
    return c


ERR = re.compile(r"CHECK(_STR)? failed|failed|error|Error|refused|denied|EINVAL|EBUSY")


def nodeid(classname, name, repo):
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i]) + ".py"
        if os.path.exists(os.path.join(repo, path)):
            return "::".join([path, *parts[i:], name])
    return f"{classname}::{name}"


def junit_results(path, repo):
    tests = []
    if not os.path.exists(path):
        return tests
    for tc in ET.parse(path).getroot().iter("testcase"):
        outcome, errs = "pass", []
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "fail"
                lines = (child.text or "").splitlines()
                errs = [child.get("message", "").splitlines()[0][:300]] if child.get("message") else []
                errs += [l.strip()[:300] for l in lines if l.startswith("E ")][:6]
            elif child.tag == "skipped":
                outcome = "skip"
                errs = [child.get("message", "")[:300]]
        tests.append({"id": "pytest:" + nodeid(tc.get("classname", ""), tc.get("name"), repo),
                      "outcome": outcome, "seconds": round(float(tc.get("time", 0)), 1),
                      "error": errs})
    return tests


def main():
    spec = json.load(open(sys.argv[1]))
    t0 = time.time()
    res = {"host": spec["host"], "uname": os.uname().release, "subsets": [], "tests": []}
    try:
        if under_systemd():
            res["cgroup_fs"] = setup_systemd()
        else:
            res["cgroup_fs"] = setup_v2() if spec["cgroup"] == "v2" else setup_v1()
        say(f"{res['uname']}, {res['cgroup_fs']}")
    except Exception as e:
        res["subsets"].append({"name": "setup", "rc": None, "seconds": 0,
                               "problem": f"cgroup setup: {e}"})
        json.dump(res, open(f"{spec['out']}/results.json", "w"), indent=1)
        return 1
    # systemd's default for a service (LimitNOFILE=1024:524288), not the
    # kernel's 1024:4096 that PID 1 hands down without systemd
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 524288))
    # hard limits of a bigger host (the kernel derives NPROC/SIGPENDING from
    # RAM: 6144 in a 1.5 GiB guest), as hosts.json's "rlimits" says
    for k, v in spec.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, "RLIMIT_" + k.upper()), (v, v))
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "TERM": "dumb",
           "SANDBOXD_BUILD": spec["build"], "SANDBOXD_GVISOR_PLATFORM": "ptrace",
           "SANDBOXD_TEST_PROFILES": "container", "SANDBOXD_LAB_HOST": spec["host"]}
    if os.environ.get("SANDBOXD_TEST_CGROUP"):
        env["SANDBOXD_TEST_CGROUP"] = os.environ["SANDBOXD_TEST_CGROUP"]
    env.update(spec.get("env", {}))
    heartbeat(f"{spec['out']}/ps.log")
    for item in spec["items"]:
        sub, tests = run_item(item, spec, env)
        res["subsets"].append(sub)
        res["tests"] += tests
        json.dump(res, open(f"{spec['out']}/results.json", "w"), indent=1)
    res["seconds"] = round(time.time() - t0, 1)
    json.dump(res, open(f"{spec['out']}/results.json", "w"), indent=1)
    os.sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
