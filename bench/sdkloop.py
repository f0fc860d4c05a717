#!/usr/bin/python3
"""sdkloop.py — the Python SDK's overhead (sdkbench.py): times N runs of
one operation, after W warm-up runs, either through the `sandboxd` package
or as the same HTTP requests written by hand with http.client on one
keep-alive connection; prints one duration per line in µs.

Usage: sdkloop.py URL KEY PROFILE {exec|execute} {sdk|raw} N W
  exec     `true` in one ready session (POST …/exec)
  execute  a one-shot `true` (POST /v1/sandbox/executions + GET ?wait_s=30)"""
import http.client
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk",
                                "python", "src"))
import sandboxd  # noqa: E402


def raw_ops(url, key, profile):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(method, path, body=None):
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        r = conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise SystemExit("%s %s: %d %s" % (method, path, r.status, data[:200]))
        return json.loads(data) if data else None

    sid = call("POST", "/v1/sandbox/sessions", {"profile": profile})["id"]

    def exec_():
        call("POST", "/v1/sandbox/sessions/%s/exec" % sid, {"command": ["true"]})

    def execute():
        eid = call("POST", "/v1/sandbox/executions", {"profile": profile, "command": ["true"]})["id"]
        while call("GET", "/v1/sandbox/executions/%s?wait_s=30" % eid)["status"] in ("queued",
                                                                                     "running"):
            pass
    return exec_, execute, lambda: call("DELETE", "/v1/sandbox/sessions/" + sid)


def sdk_ops(url, key, profile):
    c = sandboxd.Client(base_url=url, api_key=key)
    s = c.sandbox.sessions.create(profile)
    return (lambda: s.exec(["true"]),
            lambda: c.sandbox.execute(None, ["true"], profile=profile),
            s.delete)


def main():
    url, key, profile, what, how, n, w = sys.argv[1:8]
    exec_, execute, done = (sdk_ops if how == "sdk" else raw_ops)(url, key, profile)
    fn = exec_ if what == "exec" else execute
    out = []
    for i in range(int(w) + int(n)):
        t0 = time.perf_counter_ns()
        fn()
        if i >= int(w):
            out.append((time.perf_counter_ns() - t0) / 1000)
    done()
    print("\n".join("%.1f" % x for x in out))


if __name__ == "__main__":
    main()
