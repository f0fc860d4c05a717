"""sdkbench.py — issue 18's benchmark rows: what the Python and TypeScript
SDKs add to a call, against the same HTTP requests written by hand in the
same language (http.client on one keep-alive connection; bare fetch),
on the `process` profile (the cheapest sandbox, so the client's share
shows), in alternating batches so host load weighs on both alike.  The
loops are bench/sdkloop.py and bench/sdkloop.mjs (the TypeScript package
is built first with Debian's tsc)."""
import os
import subprocess
import sys

from daemon import Daemon, Failed, first_line

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILE = "process"
OPS = {"exec": ("exec `true` in a ready session", 100, 10),
       "execute": ("one-shot `true` (`sandbox.execute`: POST + GET ?wait_s=30)", 40, 5)}
LANGS = {"py": ("Python", [sys.executable, os.path.join(HERE, "sdkloop.py")]),
         "ts": ("TypeScript", ["node", os.path.join(HERE, "sdkloop.mjs")])}


def build_ts():
    ts = os.path.join(HERE, "..", "sdk", "typescript")
    try:
        r = subprocess.run(["tsc", "-p", "tsconfig.json"], cwd=ts, capture_output=True,
                           text=True, timeout=300)
    except OSError as e:
        raise Failed("tsc: %s" % e)
    if r.returncode != 0:
        raise Failed("tsc: " + first_line(r.stdout + r.stderr))


def sdk_part(b, rounds=3):
    names = {}
    for op, (what, n, w) in OPS.items():
        for lang, (lname, _) in LANGS.items():
            for how in ("raw", "sdk"):
                key = "%s.sdk_%s_%s_%s" % (PROFILE, lang, op, how)
                label = "%s SDK" % lname if how == "sdk" else "hand-written HTTP in %s" % lname
                names[key] = ("%s, %s" % (what, label),
                              "bench/sdkloop.%s %s %s (%d rounds of %d warm-up + %d)" % (
                                  "py" if lang == "py" else "mjs", op, how, rounds, w, n),
                              lang, op, how, n, w)
    if not isinstance(b.profiles.get(PROFILE), dict):
        for key, (name, cmd, *_rest) in names.items():
            b.fail(key, name, cmd, str(b.profiles.get(PROFILE)))
        return
    d = Daemon(b.build, b.tmp, "sdk")
    try:
        try:
            build_ts()
            d.start()
        except Failed as e:
            for key, (name, cmd, *_rest) in names.items():
                b.fail(key, name, cmd, str(e))
            return
        for _ in range(rounds):
            for key, (name, cmd, lang, op, how, n, w) in names.items():
                argv = LANGS[lang][1] + [d.url, d.key, PROFILE, op, how, str(n), str(w)]
                b.add_samples(key, name, cmd, lambda argv=argv: b.samples(argv))
        b.finish_rows()
    finally:
        d.stop()
