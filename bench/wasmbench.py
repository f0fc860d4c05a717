"""wasmbench.py — the WebAssembly rows of `make bench` (the `wasm` profile,
src/runtime/drivers/wasm.c): a WASI module run by the engine inside a
sandbox against the same module run by a bare `node`, and Python and
JavaScript on the engine against a `container` sandbox's python3, in one
run on one daemon.

  warm      exec of `hello.wasm` (clang --target=wasm32-wasi -O2) in a ready
            `wasm` session: one API round trip (apiloop exec -b), the
            runner already started and the module already in /work.
  peer      `node run.mjs hello.wasm`: the same node binary the driver
            uses, node:wasi, no sandbox, spawned and waited for (spawnloop).
  cold      a new runner each time: session create on a `wasm-cold`
            profile (a config file: the wasm driver, pool_size 0; on a
            second daemon with SANDBOXD_POOL_SIZE=0, so that nothing there
            is pooled), the module's upload and the first exec, timed
            together (apiloop create -b -f); and a one-shot (POST /v1/sandbox/executions with
            the module as a file, then GET ?wait_s=30) on the pooled `wasm`
            profile, the pool full and idle before each.
  container `python3 -c 'print(1)'` as a one-shot and as an exec in a ready
            `container` session: what the same short run costs without the
            engine.
  engine    Pyodide `print(1)` warm (second and later runs in one session)
            and cold (the first python run in a fresh session from the
            pool), QuickJS `console.log(1)` warm.  Rows say "unavailable:
            …" when the profile's note says the engine's packages are
            missing or the runner refuses the language.

All of them run in alternating rounds so host load weighs on all alike.
`bench.py --only wasm` runs just this part; with `--splice` it replaces
this section of the existing --out report."""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

from daemon import Daemon, Failed, first_line, settle
from mvbench import _fmt, wait_idle

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
HEADING = "## WebAssembly"
ROUNDS = 5
POOL = 2  # SANDBOXD_POOL_SIZE for this part's daemon: every pooled profile's target
COLD_CONF = "[profile.wasm-cold]\ndriver = wasm\npool_size = 0\n"
DEFAULT_NODE = "/usr/bin/node"
NO_PACKAGES = "python and javascript unavailable"  # wasm.c's note without the packages

HELLO_C = '#include <stdio.h>\nint main(void) { printf("hello\\n"); return 0; }\n'
# The peer: the module under node:wasi as the runner instantiates it.
PEER_JS = """import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
const wasi = new WASI({ version: 'preview1', args: process.argv.slice(2), env: {},
                        returnOnExit: true });
const mod = new WebAssembly.Module(readFileSync(process.argv[2]));
process.exitCode = wasi.start(new WebAssembly.Instance(mod, wasi.getImportObject()));
"""
MODULE = "/work/hello.wasm"
HELLO = {"command": [MODULE]}
PY = {"language": "python", "code": "print(1)", "timeout_s": 120}
JS = {"language": "javascript", "code": "console.log(1)", "timeout_s": 120}
CPY = ["python3", "-c", "print(1)"]

KEYS = {
    "wasm.node_peer": "peer: `node run.mjs hello.wasm` (node:wasi, no sandbox; spawn → exit)",
    "wasm.module_warm": "WASI `hello.wasm`: exec in a ready `wasm` session (API round trip)",
    "wasm.module_oneshot": "WASI `hello.wasm`: one-shot on `wasm` from the warm pool "
                           "(module sent as a file)",
    "wasm.module_cold": "WASI `hello.wasm`, new runner: session create on `wasm-cold` "
                        "(pool_size 0) + upload + first exec",
    "wasm.container_exec": "`python3 -c 'print(1)'`: exec in a ready `container` session",
    "wasm.container_oneshot": "`python3 -c 'print(1)'`: one-shot on `container` from the warm pool",
    "wasm.py_warm": "Pyodide `print(1)`, warm (second and later runs in one `wasm` session)",
    "wasm.py_cold": "Pyodide `print(1)`, cold (first python run in a fresh pooled `wasm` session)",
    "wasm.js_warm": "QuickJS `console.log(1)`, warm (one `wasm` session)",
}
TARGETS = (("wasm.module_warm", 5e3, "warm module run ≤ 5 ms (API round trip)"),
           ("wasm.py_warm", 20e3, "warm Pyodide `print(1)` ≤ 20 ms"))


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def node_path():
    """The engine the bench's daemon gets: SANDBOXD_WASM_NODE when it names
    a program (the integration tests point it at a path that does not
    exist, to keep wasm off), else Debian's node."""
    p = os.environ.get("SANDBOXD_WASM_NODE")
    return p if p and os.access(p, os.X_OK) else DEFAULT_NODE


def build_module(tmp):
    clang = shutil.which("clang") or shutil.which("clang-14")
    if not clang:
        raise Failed("clang missing (scripts/install-deps.sh: wasi-libc, lld)")
    src, out = os.path.join(tmp, "hello.c"), os.path.join(tmp, "hello.wasm")
    with open(src, "w") as f:
        f.write(HELLO_C)
    r = subprocess.run([clang, "--target=wasm32-wasi", "-O2", "-fuse-ld=lld", "-Wl,--strip-all",
                        "-o", out, src], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise Failed("clang --target=wasm32-wasi: " + first_line(r.stderr))
    return out


def peer_argv(tmp, node, module):
    js = os.path.join(tmp, "run.mjs")
    with open(js, "w") as f:
        f.write(PEER_JS)
    argv = [node, "--no-warnings", js, module]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failed(str(e))
    if r.returncode != 0 or r.stdout != "hello\n":
        raise Failed("node on the module: exit %d %s" % (r.returncode, first_line(r.stderr)))
    return argv


def put_file(d, sid, path, data):
    req = urllib.request.Request("%s/v1/sandbox/sessions/%s/files?path=%s" % (d.url, sid, path),
                                 data=data, method="PUT")
    req.add_header("Authorization", "Bearer " + d.key)
    req.add_header("Content-Type", "application/octet-stream")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=60) as r:
            r.read()
    except OSError as e:
        raise Failed("upload %s: %s" % (path, e))


def run_once(d, sid, body, want):
    """One untimed exec; Failed with what came back unless stdout is want."""
    js = d.must("POST", "/v1/sandbox/sessions/%s/exec" % sid, body)
    if js.get("status") != "succeeded" or js.get("stdout") != want:
        msg = first_line(js.get("stderr") or js.get("error"), "stdout %r" % js.get("stdout"))
        if msg.startswith("sandboxd: "):
            msg = msg[len("sandboxd: "):]
        st = "" if js.get("status") == "failed" else "%s, " % js.get("status")
        raise Failed("%sexit %s, `%s`" % (st, js.get("exit_code"), msg))


def engine_ready(d, note, sid, body, want):
    """None when the language runs in session sid (its first run is then
    done), else why not: the profile's note or the runner's answer."""
    if note.startswith(NO_PACKAGES):
        return "unavailable: " + note
    try:
        run_once(d, sid, body, want)
        return None
    except Failed as e:
        return "unavailable: the runner answers %s" % e


def profiles(d, want):
    """The daemon's profiles by name; Failed unless want is available."""
    profs = {p["name"]: p for p in d.must("GET", "/v1/sandbox/profiles")["profiles"]}
    p = profs.get(want)
    if not p or not p.get("available"):
        raise Failed("profile %s: %s" % (want, (p or {}).get("reason", "not offered")))
    return profs


def wasm_part(b):
    """Fills b.rows['wasm.*'] and b.facts['wasm']."""
    t_part = time.time()
    facts = b.facts.setdefault("wasm", {})
    facts["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    facts["loadavg_start"] = open("/proc/loadavg").read().split()[:3]
    try:
        with open(os.path.join(TOP, "src", "runtime", "drivers", "wasm_runner.mjs")) as f:
            facts["runner"] = "`%s` (%s)" % (os.path.relpath(f.name, TOP),
                                             f.readline().lstrip("/ ").strip().rstrip("."))
    except OSError:
        pass
    try:
        facts["commit"] = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    names = {
        "wasm.node_peer": "spawnloop 10 1 node --no-warnings run.mjs hello.wasm (%d rounds)" % ROUNDS,
        "wasm.module_warm": "apiloop -b '%s' exec (%d rounds of 3 warm-up + 40)"
                            % (json.dumps(HELLO), ROUNDS),
        "wasm.module_oneshot": 'apiloop -n 1 oneshot {"profile":"wasm","command":["%s"],'
                               '"files":[the module, base64]} (%d rounds of 2, pool full and '
                               "settled before each)" % (MODULE, ROUNDS),
        "wasm.module_cold": "apiloop -n 2 -p 300 -b '%s' -f hello.wasm=%s create "
                            '{"profile":"wasm-cold"} (%d rounds; DELETE untimed), daemon with '
                            "SANDBOXD_POOL_SIZE=0" % (json.dumps(HELLO), MODULE, ROUNDS),
        "wasm.container_exec": "apiloop -b '%s' exec (%d rounds of 2 warm-up + 20)"
                               % (json.dumps({"command": CPY}), ROUNDS),
        "wasm.container_oneshot": "apiloop -n 1 oneshot '%s' (%d rounds of 2, pool full before "
                                  "each)" % (json.dumps({"profile": "container", "command": CPY}),
                                             ROUNDS),
        "wasm.py_warm": "apiloop -b '%s' exec (%d rounds of 1 warm-up + 20)" % (json.dumps(PY), ROUNDS),
        "wasm.py_cold": "session from the pool (untimed), then apiloop -n 1 -b '%s' exec "
                        "(%d rounds of 1)" % (json.dumps(PY), ROUNDS),
        "wasm.js_warm": "apiloop -b '%s' exec (%d rounds of 2 warm-up + 20)" % (json.dumps(JS), ROUNDS),
    }

    def fail(keys, reason):
        for k in keys:
            if k not in b.rows:
                b.fail(k, KEYS[k], names[k], reason)

    node = facts["node_path"] = node_path()
    try:
        facts["node"] = first_line(subprocess.run([node, "--version"], capture_output=True,
                                                  text=True, timeout=20).stdout)
    except (OSError, subprocess.TimeoutExpired) as e:
        facts["node"] = "not runnable: %s" % e
    module_keys = ("wasm.module_warm", "wasm.module_oneshot", "wasm.module_cold")
    module = peer = oneshot = None
    try:
        module = build_module(b.tmp)
        facts["module_bytes"] = os.path.getsize(module)
    except Failed as e:
        fail(("wasm.node_peer",) + module_keys, str(e))
    if module:
        try:
            peer = peer_argv(b.tmp, node, module)
        except Failed as e:
            fail(("wasm.node_peer",), str(e))
    conf = os.path.join(b.tmp, "wasm.conf")
    with open(conf, "w") as f:
        f.write(COLD_CONF)
    env = {"SANDBOXD_WASM_NODE": node, "SANDBOXD_GVISOR_POOL_SIZE": "0",
           "SANDBOXD_MICROVM_ACCEL": "off"}
    d = Daemon(b.build, b.tmp, "wasm", dict(env, SANDBOXD_POOL_SIZE=str(POOL)))
    # The new-runner row's daemon: the wasm-cold profile, and no pool at all,
    # so that no create there can take a sandbox built before it.
    dc = Daemon(b.build, b.tmp, "wasm-cold", dict(env, SANDBOXD_POOL_SIZE="0"), ["--config", conf])
    sids = {}
    try:
        try:
            d.start()
            profs = profiles(d, "wasm")
            p = profs["wasm"]
            facts["note"] = note = p.get("platform_note") or p.get("note") or ""
            t0 = time.monotonic()
            try:
                wait_idle(d, POOL, 5, "wasm")
            except Failed:
                # An empty pool after the probes: the first create of the
                # profile starts its refill; one untimed create does it.
                facts["pool_primed"] = True
                t0 = time.monotonic()
                sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "wasm"})["id"]
                d.call("DELETE", "/v1/sandbox/sessions/" + sid)
                wait_idle(d, POOL, 120, "wasm")
            facts["first_fill_s"] = time.monotonic() - t0
        except Failed as e:
            return fail(KEYS, "wasm daemon: " + str(e))
        try:
            dc.start()
            profiles(dc, "wasm-cold")
        except Failed as e:
            fail(("wasm.module_cold",), "daemon without pools: " + str(e))
        cp = profs.get("container")
        if not cp or not cp.get("available"):
            fail(("wasm.container_exec", "wasm.container_oneshot"),
                 "profile container: %s" % (cp or {}).get("reason", "not offered"))
        # The sessions the warm rows use, each checked by one untimed run.
        try:
            for what in ("module", "engine"):
                sids[what] = d.must("POST", "/v1/sandbox/sessions", {"profile": "wasm"})["id"]
            if "wasm.container_exec" not in b.rows:
                sids["container"] = d.must("POST", "/v1/sandbox/sessions",
                                           {"profile": "container"})["id"]
        except Failed as e:
            return fail(KEYS, "session create: " + str(e))
        if module:
            try:
                with open(module, "rb") as f:
                    data = f.read()
                put_file(d, sids["module"], MODULE, data)
                run_once(d, sids["module"], HELLO, "hello\n")
            except Failed as e:
                fail(module_keys, str(e))
            oneshot = json.dumps({"profile": "wasm", "command": [MODULE], "files": [
                {"path": MODULE, "encoding": "base64", "content": base64.b64encode(data).decode()}]})
        if "container" in sids:
            try:
                run_once(d, sids["container"], {"command": CPY}, "1\n")
            except Failed as e:
                fail(("wasm.container_exec", "wasm.container_oneshot"), str(e))
        why = engine_ready(d, note, sids["engine"], PY, "1\n")
        if why:
            fail(("wasm.py_warm", "wasm.py_cold"), why)
        why = engine_ready(d, note, sids["engine"], JS, "1\n")
        if why:
            fail(("wasm.js_warm",), why)

        # A row already failed (above) is skipped by add_samples.
        def sample(key, fn):
            b.add_samples(key, KEYS[key], names[key], fn)

        def api(*args):
            return lambda: b.samples(b.api(d, *args), timeout=600)

        def pooled(profile):
            """Until the profile's pool is full and, for wasm, the runners in
            it have started (the daemon's process tree is still)."""
            wait_idle(d, POOL, 120, profile)
            if profile == "wasm":
                settle(d)

        def py_cold():
            pooled("wasm")
            sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "wasm"})["id"]
            try:
                return b.samples(b.api(d, "-n", 1, "-b", json.dumps(PY), "exec", sid), timeout=600)
            finally:
                d.call("DELETE", "/v1/sandbox/sessions/" + sid)

        def each(n, profile, body, refill=None):
            """n one-shots of body, each on a full pool; refill: how long the
            pool then takes to be full again."""
            def run():
                xs = []
                for _ in range(n):
                    pooled(profile)
                    xs += b.samples(b.api(d, "-n", 1, "oneshot", body), timeout=600)
                    if refill is not None:
                        refill.append(wait_idle(d, POOL, 120, profile))
                return xs
            return run

        refill = []
        cold = ("-n", 2, "-p", 300, "-b", json.dumps(HELLO), "-f", "%s=%s" % (module, MODULE),
                "create", '{"profile":"wasm-cold"}')
        for rnd in range(ROUNDS):
            sample("wasm.module_warm", api("-n", 40, "-w", 3, "-b", json.dumps(HELLO), "exec",
                                           sids["module"]))
            sample("wasm.node_peer", lambda: b.samples([b.h["spawnloop"], "10", "1"] + peer))
            sample("wasm.module_cold", lambda: b.samples(b.api(dc, *cold), timeout=600))
            sample("wasm.module_oneshot", each(2, "wasm", oneshot, refill))
            sample("wasm.container_exec", api("-n", 20, "-w", 2, "-b", json.dumps({"command": CPY}),
                                              "exec", sids.get("container")))
            sample("wasm.container_oneshot", each(2, "container", json.dumps(
                {"profile": "container", "command": CPY})))
            sample("wasm.py_warm", api("-n", 20, "-w", 1, "-b", json.dumps(PY), "exec",
                                       sids["engine"]))
            sample("wasm.py_cold", py_cold)
            sample("wasm.js_warm", api("-n", 20, "-w", 2, "-b", json.dumps(JS), "exec",
                                       sids["engine"]))
            log("wasm round %d/%d done" % (rnd + 1, ROUNDS))
        b.finish_rows()
        if refill:
            facts["refill_s"] = sorted(refill)[len(refill) // 2]
    finally:
        for sid in sids.values():
            try:
                d.call("DELETE", "/v1/sandbox/sessions/" + sid)
            except OSError:
                pass
        d.stop()
        dc.stop()
        facts["part_s"] = time.time() - t_part
        facts["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        log("wasm part took %.0f s" % facts["part_s"])


# ---- the report --------------------------------------------------------------

def _p50(rows, key):
    r = rows.get(key) or {}
    return r["stats"]["p50"] if "stats" in r else None


def _why(rows, key):
    r = rows.get(key) or {}
    f = r.get("failed", "not run").replace("|", "/")
    return f if f.startswith("unavailable") else "failed: " + f


def _sentences(rows):
    """What the rows show, from the numbers of this run."""
    peer, warm, cold, one = (_p50(rows, k) for k in ("wasm.node_peer", "wasm.module_warm",
                                                     "wasm.module_cold", "wasm.module_oneshot"))
    cexec, pyw, pyc, jsw = (_p50(rows, k) for k in ("wasm.container_exec", "wasm.py_warm",
                                                    "wasm.py_cold", "wasm.js_warm"))
    out = []
    if peer and warm:
        s = ("A module run in a ready session costs %s through the API, %.2f× a bare `node` "
             "spawned on the same module (%s): the runner is already up, so what is left is "
             "handing it the job and instantiating the module" % (
                 _fmt(warm), warm / peer, _fmt(peer)))
        if cold:
            s += ("; a new runner (session create, upload and first exec: a sandbox and a "
                  "Node start) costs %s, %.2f× the peer" % (_fmt(cold), cold / peer))
        if one:
            s += ", and a one-shot that takes a pooled sandbox %s" % _fmt(one)
        out.append(s + ".")
    if pyw or jsw or pyc:
        parts = []
        if pyw:
            parts.append("warm Pyodide `print(1)` takes %s%s" % (
                _fmt(pyw), " against %s for a fresh `python3` exec in a `container` session"
                % _fmt(cexec) if cexec else ""))
        if pyc:
            parts.append("the first python run of a session %s (Pyodide's load)" % _fmt(pyc))
        if jsw:
            parts.append("warm QuickJS `console.log(1)` %s" % _fmt(jsw))
        out.append("On the engine, " + "; ".join(parts) + ".")
    else:
        out.append("Python and JavaScript on the engine were not measured (%s), so only the "
                   "WASI rows speak for the engine; a fresh `python3` in a `container` session "
                   "costs %s for comparison." % (_why(rows, "wasm.py_warm"), _fmt(cexec)))
    return out


def section(rows, facts):
    w = facts.get("wasm")
    if not w and not any(k.startswith("wasm.") for k in rows):
        return []
    w = w or {}
    L = [HEADING + " (`wasm` profile)", ""]
    if w.get("date"):
        L += ["Measured %s, load average %s at the start of this part and %s at its end "
              "(`nproc` = %d), build of commit %s; engine `%s` %s; runner: %s; hello module %s "
              "bytes%s." % (
                  w["date"], " ".join(w.get("loadavg_start", [])),
                  " ".join(w.get("loadavg_end", [])), os.cpu_count(), w.get("commit") or "?",
                  w.get("node_path", "node"), w.get("node", "?"), w.get("runner", "?"),
                  w.get("module_bytes", "?"),
                  "; the profile's note: %s" % w["note"] if w.get("note") else ""), ""]
    L += ["One daemon with the `wasm` profile (pool of %d, each sandbox with its Node runner "
          "started), the container pool at %d and gVisor's off; a second one for the new-runner "
          "row, with a config file adding `[profile.wasm-cold] driver = wasm, pool_size = 0` and "
          "`SANDBOXD_POOL_SIZE=0`, so that no create there takes a sandbox built before it. "
          "All rows run in %d alternating rounds; "
          "the pooled one-shots wait until `sandbox_pool_idle` of their profile is back at %d "
          "(and, for `wasm`, until the daemon's process tree is still, so the pooled runners "
          "have started) before each. Ratios are p50 over the peer's p50." % (
              POOL, POOL, ROUNDS, POOL), "",
          "| Measurement | n | p50 | p95 | p99 | × node peer |", "|---|---|---|---|---|---|"]
    peer = _p50(rows, "wasm.node_peer")
    for key in KEYS:
        r = rows.get(key)
        if not r:
            continue
        if "stats" not in r:
            L.append("| %s | %s | | | | |" % (r["name"], _why(rows, key)))
            continue
        s = r["stats"]
        rt = "(base)" if key == "wasm.node_peer" else ("%.3f×" % (s["p50"] / peer) if peer else "—")
        L.append("| %s | %d | %s | %s | %s | %s |" % (r["name"], s["n"], _fmt(s["p50"]),
                                                      _fmt(s["p95"]), _fmt(s["p99"]), rt))
    L += ["", "| Target | Measured (p50) | Verdict |", "|---|---|---|"]
    for key, bound, what in TARGETS:
        p = _p50(rows, key)
        if p is None:
            L.append("| %s | %s | **not measured** |" % (what, _why(rows, key)))
        else:
            L.append("| %s | %s (%s the node peer) | %s |" % (
                what, _fmt(p), "%.2f×" % (p / peer) if peer else "— ×",
                "**met**" if p <= bound else "**not met**"))
    L.append("")
    L += [" ".join(_sentences(rows)), ""]
    extra = []
    if w.get("first_fill_s") is not None:
        extra.append("the `wasm` pool was full %.1f s after %s" % (
            w["first_fill_s"], "a first `wasm` create (it stayed empty after the probes until "
            "then; the bench made one, untimed)" if w.get("pool_primed") else
            "every driver had probed"))
    if w.get("refill_s") is not None:
        extra.append("it refills after a one-shot in %.2f s (median)" % w["refill_s"])
    if w.get("part_s"):
        extra.append("this part took %.0f s" % w["part_s"])
    if extra:
        L += ["Also: " + "; ".join(extra) + ".", ""]
    L += ["Rows: the *peer* is the node binary the driver runs (`wasm_node`), started by "
          "`bench/spawnloop.c` on a script that reads the module, instantiates it under "
          "node:wasi and runs it, to its exit: Node's start plus the module's compile, no "
          "sandbox. *exec* rows are one `POST …/exec` on a keep-alive connection (apiloop "
          "`-b BODY`); the module's exec hands argv to the sandbox's runner, which compiles "
          "the module (or takes it from its cache), instantiates it and writes into the "
          "exec's pipes. The *new runner* row is "
          "`POST /v1/sandbox/sessions {\"profile\":\"wasm-cold\"}`, `PUT …/files` of the "
          "module and the first exec back to back (apiloop `create -b -f`; the runner starts "
          "while the upload goes on). *One-shots* are `POST /v1/sandbox/executions` then "
          "`GET ?wait_s=30` until final (the module travels base64 in `files`). The engine "
          "rows are `{\"language\":\"python\"|\"javascript\",\"code\":…}` execs; *cold* "
          "Pyodide takes a fresh session from the pool (untimed) and times its first python "
          "run.", ""]
    return L
