"""sdkbench.py — issue 18's benchmark rows: what each SDK (Python,
TypeScript, Go, Java) adds to a call, against the same HTTP requests written
by hand in the same language (http.client on one keep-alive connection;
bare fetch; net/http with one http.Client; java.net.http with one
HttpClient), on the `process` profile (the cheapest sandbox, so the
client's share shows), in alternating batches so host load weighs on all
alike.  The loops are bench/sdkloop.py, bench/sdkloop.mjs (the TypeScript
package built first with Debian's tsc), bench/sdkloop-go (built with
Debian's go through tests/sdk/go.sh, caches under the build dir) and
bench/SdkLoop.java (compiled against the jar sdk/java/build.sh makes).  A
language whose toolchain is missing or fails to build gets its rows marked
failed with the reason; the others still run."""
import os
import shutil
import subprocess
import sys

from daemon import Daemon, Failed, first_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
PROFILE = "process"
OPS = {"exec": ("exec `true` in a ready session", 100, 10),
       "execute": ("one-shot `true` (`sandbox.execute`: POST + GET ?wait_s=30)", 40, 5)}


def run_tool(what, argv, cwd=None, env=None):
    """Runs one build step; its stdout, or Failed with its first line of output."""
    if not shutil.which(argv[0]):
        raise Failed("%s missing (scripts/install-deps.sh)" % argv[0])
    try:
        r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Failed("%s: %s" % (what, e))
    if r.returncode != 0:
        raise Failed("%s: %s" % (what, first_line(r.stderr + r.stdout, "exit %d" % r.returncode)))
    return r.stdout


def build_py(b):
    return [sys.executable, os.path.join(HERE, "sdkloop.py")]


def build_ts(b):
    run_tool("tsc", ["tsc", "-p", "tsconfig.json"], cwd=os.path.join(ROOT, "sdk", "typescript"))
    return ["node", os.path.join(HERE, "sdkloop.mjs")]


def build_go(b):
    if not shutil.which("go"):
        raise Failed("go missing (Debian's golang-go: scripts/install-deps.sh)")
    exe = os.path.join(b.tmp, "sdkloop-go")
    run_tool("go build", [os.path.join(ROOT, "tests", "sdk", "go.sh"), b.build, "build", "-o", exe, "."],
             env=dict(os.environ, GO_WORKDIR=os.path.join(HERE, "sdkloop-go")))
    return [exe]


def build_java(b):
    for tool in ("javac", "java", "jar"):
        if not shutil.which(tool):
            raise Failed("%s missing (Debian's openjdk-17-jdk-headless: scripts/install-deps.sh)" % tool)
    out = os.path.join(b.tmp, "sdk-java")
    cp = run_tool("sdk/java/build.sh", [os.path.join(ROOT, "sdk", "java", "build.sh"), out]).split()[-1]
    run_tool("javac", ["javac", "--release", "17", "-Xlint:all", "-Werror", "-encoding", "UTF-8",
                       "-cp", cp, "-d", out, os.path.join(HERE, "SdkLoop.java")])
    return ["java", "-cp", out + ":" + cp, "SdkLoop"]


# lang -> (name, the loop as named in the report, how to build it: b -> argv prefix)
LANGS = {"py": ("Python", "bench/sdkloop.py", build_py),
         "ts": ("TypeScript", "bench/sdkloop.mjs", build_ts),
         "go": ("Go", "bench/sdkloop-go", build_go),
         "java": ("Java", "bench/SdkLoop.java", build_java)}


def sdk_part(b, rounds=3):
    names = {}   # key -> (name, cmd, lang, op, how, n, w), in report order
    for op, (what, n, w) in OPS.items():
        for lang, (lname, loop, _) in LANGS.items():
            for how in ("raw", "sdk"):
                key = "%s.sdk_%s_%s_%s" % (PROFILE, lang, op, how)
                label = "%s SDK" % lname if how == "sdk" else "hand-written HTTP in %s" % lname
                names[key] = ("%s, %s" % (what, label),
                              "%s %s %s (%d rounds of %d warm-up + %d)" % (loop, op, how, rounds, w, n),
                              lang, op, how, n, w)

    def fail(langs, reason):
        for key, (name, cmd, lang, *_rest) in names.items():
            if lang in langs:
                b.fail(key, name, cmd, reason)
    if not isinstance(b.profiles.get(PROFILE), dict):
        return fail(LANGS, str(b.profiles.get(PROFILE)))
    argvs = {}
    for lang, (_, _, build) in LANGS.items():
        try:
            argvs[lang] = build(b)
        except Failed as e:
            fail((lang,), str(e))
    d = Daemon(b.build, b.tmp, "sdk")
    try:
        try:
            d.start()
        except Failed as e:
            return fail(argvs, str(e))
        for _ in range(rounds):
            for key, (name, cmd, lang, op, how, n, w) in names.items():
                if lang in argvs:
                    argv = argvs[lang] + [d.url, d.key, PROFILE, op, how, str(n), str(w)]
                    b.add_samples(key, name, cmd, lambda argv=argv: b.samples(argv))
        b.finish_rows()
    finally:
        d.stop()


def section(rows):
    """docs/benchmarks.md's summary of the rows above: per language and
    operation, the SDK's p50 against the hand-written loop's, and whether
    the difference stands out of the run's noise."""
    from report import fmt_us, fmt_ratio
    L, pairs = [], []
    for op, (what, _, _) in OPS.items():
        for lang, (lname, _, _) in LANGS.items():
            raw, sdk = (rows.get("%s.sdk_%s_%s_%s" % (PROFILE, lang, op, how)) for how in ("raw", "sdk"))
            if not raw or not sdk:
                continue
            bad = raw.get("failed") or sdk.get("failed")
            if bad:
                L.append("| %s | `%s` | failed: %s | | | | |" % (lname, op, bad.replace("|", "/")))
                continue
            r, s = raw["stats"], sdk["stats"]
            pairs.append((lname, op, s["p50"] - r["p50"], s["p50"] / r["p50"], r["p90"] - r["p50"]))
            L.append("| %s | `%s` | %s | %s | %+.2f ms | %s | %s |" % (
                lname, op, fmt_us(r["p50"]), fmt_us(s["p50"]), pairs[-1][2] / 1000,
                fmt_ratio(pairs[-1][3]), fmt_us(pairs[-1][4])))
    if not L:
        return []
    head = ["## What the SDKs add", "",
            "The `…, <language> SDK` rows above against their `hand-written HTTP in <language>` "
            "rows (same process, same operation, alternating batches on one `process`-profile "
            "daemon): `exec` is one `POST …/exec` of `true` in a ready session, `execute` a "
            "one-shot `true` (`POST /v1/sandbox/executions` + `GET ?wait_s=30`).", "",
            "| SDK | op | hand-written p50 | SDK p50 | SDK − hand-written | SDK ÷ hand-written "
            "| hand-written p50→p90 |", "|---|---|---|---|---|---|---|"]
    tail = [""]
    if pairs:
        lo, hi = min(pairs, key=lambda p: p[2]), max(pairs, key=lambda p: p[2])
        loud = ["%s `%s`" % (p[0], p[1]) for p in pairs if abs(p[2]) > p[4]]
        tail = ["The SDK's added p50 per call runs from %+.2f ms (%s `%s`, %s) to %+.2f ms "
                "(%s `%s`, %s); %s" % (
                    lo[2] / 1000, lo[0], lo[1], fmt_ratio(lo[3]), hi[2] / 1000, hi[0], hi[1],
                    fmt_ratio(hi[3]),
                    "every difference is smaller than the hand-written loop's own p50→p90 "
                    "spread: on this run no SDK's cost stands out of the noise of a loopback call."
                    if not loud else "larger than the hand-written loop's p50→p90 spread for "
                    + ", ".join(loud) + "."), ""]
    return head + L + [""] + tail
