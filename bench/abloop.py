#!/usr/bin/python3
"""abloop.py — two (or more) builds of sandboxd side by side on one row:
their daemons run at once and each round times a bare fork+exec, then the
row on every daemon in turn, so that a host whose speed drifts (a shared
VM) moves all of them alike.  For a before/after of one change; `make
bench` is the full picture.

usage: abloop.py [--rounds N] [--n N] [--row oneshot|create|exec]
                 BUILD_DIR[@ENV=VALUE] BUILD_DIR[@ENV=VALUE] ...

  oneshot  one-shot `true` (POST + GET ?wait_s=30), 300 ms apart
  create   session create from the warm pool (deleted after, untimed), 300 ms apart
  exec     exec `true` in one ready session, back-to-back

Prints each round, then per build the median of the rounds' medians, its
distance from the bare run and the ratio to it."""

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import compile_helpers, samples_of  # noqa: E402
from daemon import Daemon  # noqa: E402

BODY = '{"profile":"container","command":["true"]}'


def row_args(row, n, session):
    if row == "oneshot":
        return ["-n", n, "-w", "3", "-p", "300", "oneshot", BODY]
    if row == "create":
        return ["-n", n, "-w", "3", "-p", "300", "create", '{"profile":"container"}']
    return ["-n", n, "-w", "20", "exec", session]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", default="40")
    ap.add_argument("--row", choices=("oneshot", "create", "exec"), default="oneshot")
    ap.add_argument("builds", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbx-abloop-")
    h = compile_helpers(tmp)
    daemons = []
    try:
        for i, spec in enumerate(a.builds):
            path, _, env = spec.partition("@")
            d = Daemon(path, tmp, "ab%d" % i, extra_env=dict([env.split("=", 1)]) if env else None)
            d.start()
            daemons.append(d)
        sessions = [d.call("POST", "/v1/sandbox/sessions", {"profile": "container"})[1]["id"]
                    if a.row == "exec" else None for d in daemons]
        bare, got = [], [[] for _ in daemons]
        for r in range(a.rounds):
            bare.append(statistics.median(samples_of([h["forkexec"], "200", "10"])) / 1000)
            for i, d in enumerate(daemons):
                s = samples_of([h["apiloop"], "-u", d.url, "-k", d.key] +
                               row_args(a.row, a.n, sessions[i]))
                got[i].append(statistics.median(s) / 1000)
                print("round %d  %-30s %.2f ms  (bare %.2f ms)" % (r, a.builds[i], got[i][-1],
                                                                   bare[-1]), flush=True)
    finally:
        for d in daemons:
            d.stop()
    b = statistics.median(bare)
    print("bare %.2f ms" % b)
    for spec, g in zip(a.builds, got):
        m = statistics.median(g)
        print("%-30s %.2f ms (rounds %s)  bare %+.2f ms  %.2f×" %
              (spec, m, " ".join("%.2f" % x for x in g), m - b, m / b))


if __name__ == "__main__":
    main()
