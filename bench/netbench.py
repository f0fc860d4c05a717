"""netbench.py — issue 5's benchmark rows: session create with an egress
allowlist against `none` (the `none` path must not pay for the feature),
and the latency of one HTTP request through the egress proxy against the
same request sent directly, inside the tests' own "internet".

The internet is tests/integration/networld.py: a network namespace on the
documentation ranges (198.51.100.0/24, 203.0.113.0/24) serving HTTP, with
names pinned in the daemon by `--resolve`.  The daemon here is started with
the world's arguments.  The HTTP loop is one Python script, run

  * inside a `container` sandbox whose policy allows allowed.test.example,
    through `HTTP_PROXY` (the explicit proxy: absolute-form GET);
  * in the same sandbox with the proxy variables ignored, to the world's
    address (nft redirects port 80 to the proxy: the transparent path);
  * the same, by name (adds one DNS query to the daemon's responder);
  * in a plain network namespace linked to the host by a veth pair, like
    a sandbox's, with no proxy and no rules: the direct path;

and session create with `none` is also timed, alternating, on a second
daemon started without the world's pins and upstream.  Each HTTP request
is a fresh TCP connection (the proxy serves one request per
connection, so the direct loop does the same), in alternating batches.
Only the world's addresses and loopback are contacted."""
import json
import os
import subprocess
import sys
import time

from daemon import Daemon, Failed, first_line

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
HOSTNAME = "allowed.test.example"

# argv: MODE TARGET HOST N WARM; prints N samples (µs) on one line.
LOOP = r'''
import sys, time, urllib.request
mode, target, host, n, warm = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if mode == "proxy":
    op, url, hdr = urllib.request.build_opener(), "http://%s/" % host, {}
elif mode == "name":
    op, url, hdr = urllib.request.build_opener(urllib.request.ProxyHandler({})), "http://%s/" % host, {}
else:
    op, url, hdr = urllib.request.build_opener(urllib.request.ProxyHandler({})), "http://%s/" % target, {"Host": host}
out = []
for i in range(warm + n):
    t0 = time.perf_counter()
    with op.open(urllib.request.Request(url, headers=hdr), timeout=10) as r:
        body = r.read()
        if r.status != 200 or b'"networld"' not in body:
            sys.exit("HTTP %d %r" % (r.status, body[:200]))
    if i >= warm:
        out.append((time.perf_counter() - t0) * 1e6)
print(" ".join("%.1f" % x for x in out))
'''

MODES = {
    "net.http_proxy": "HTTP GET through the egress proxy (`HTTP_PROXY`, explicit)",
    "net.http_transparent": "HTTP GET to the world's address, proxy variables ignored "
                            "(nft → proxy, transparent)",
    "net.http_name": "… the same by name (+ one DNS query to the daemon's responder)",
    "net.http_direct": "HTTP GET direct, from a plain netns peer (no proxy, no rules)",
}


def _networld():
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import networld  # noqa: E402
    return networld


def _ip(*args, check=True):
    r = subprocess.run(("ip",) + args, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise Failed("ip %s: %s" % (" ".join(args), first_line(r.stderr)))
    return r.stdout


class DirectNs:
    """A namespace linked to the host by a veth pair, as a sandbox's is,
    holding the world slot's spare client address; the host forwards
    between it and the world.  No proxy, no nft rules: the direct path."""

    def __init__(self, world):
        self.w = world
        self.ns = "sbxbench%d" % os.getpid()
        self.hostif = "sbxb%d" % (os.getpid() % 10000000)

    def start(self):
        w, ns, h = self.w, self.ns, self.hostif
        try:
            _ip("netns", "add", ns)
            _ip("link", "add", h, "type", "veth", "peer", "name", "c0", "netns", ns)
            _ip("link", "set", h, "up")
            _ip("route", "add", "%s/32" % w.CLIENT4, "dev", h)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", "%s/32" % w.CLIENT4, "dev", "c0")
            _ip("-n", ns, "link", "set", "c0", "up")
            # the host answers ARP for its own address on any link
            _ip("-n", ns, "route", "add", "%s/32" % w.HOST4, "dev", "c0")
            _ip("-n", ns, "route", "add", "default", "via", w.HOST4, "dev", "c0")
        except Failed:
            self.stop()
            raise
        return self

    def stop(self):
        _ip("netns", "del", self.ns, check=False)
        _ip("link", "del", self.hostif, check=False)
        _ip("route", "del", "%s/32" % self.w.CLIENT4, check=False)

    def loop(self, n, warm):
        argv = ["ip", "netns", "exec", self.ns, PYTHON, "-c", LOOP, "direct", self.w.A4,
                HOSTNAME, str(n), str(warm)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, NO_PROXY="*", no_proxy="*"))
        if r.returncode != 0:
            raise Failed("direct loop: " + first_line(r.stderr or r.stdout))
        return [float(x) for x in r.stdout.split()]


def sandbox_loop(d, sid, mode, target, n, warm):
    r = d.must("POST", "/v1/sandbox/sessions/%s/exec" % sid,
               {"command": ["python3", "-c", LOOP, mode, target, HOSTNAME, str(n), str(warm)],
                "timeout_s": 120})
    if r.get("exit_code") != 0:
        raise Failed("%s loop in the sandbox: exit %s: %s" % (
            mode, r.get("exit_code"), first_line(r.get("stderr") or r.get("stdout"))))
    return [float(x) for x in r["stdout"].split()]


def _nft_tables():
    r = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, timeout=30)
    return {l.split()[-1] for l in r.stdout.splitlines() if "sandboxd_" in l}


def _footprint(table):
    """(links on the host, lines in the daemon's nft table)."""
    links = len(_ip("-o", "link", check=False).splitlines())
    r = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True,
                       timeout=30) if table else None
    return links, len(r.stdout.splitlines()) if r and r.returncode == 0 else 0


def footprint(b, d, table, count=5):
    """What `count` held sessions of each kind add on the host: host links
    (veth ends) and lines of nft rules.  `none` must add nothing."""
    out = {}
    for kind, body in (("none", {"profile": "container"}),
                       ("allowlist", {"profile": "container",
                                      "network": {"egress": "allowlist", "allow": [HOSTNAME]}})):
        time.sleep(1.0)  # the warm pool has refilled
        before = _footprint(table)
        ids = []
        try:
            for _ in range(count):
                ids.append(d.must("POST", "/v1/sandbox/sessions", body)["id"])
            after = _footprint(table)
        finally:
            for sid in ids:
                d.call("DELETE", "/v1/sandbox/sessions/" + sid)
        out[kind] = {"links": (after[0] - before[0]) / count,
                     "nft_lines": (after[1] - before[1]) / count}
    out["count"] = count
    b.facts["net.footprint"] = out


def net_part(b, rounds=3, n=100):
    """Adds rows net.create_none, net.create_allow and MODES to Bench b."""
    creates = {
        "net.create_plain": ("session create, `network` none, on a daemon without pins or upstream "
                             "(200 ms pause)",
                             "apiloop create {\"profile\":\"container\"}", '{"profile":"container"}'),
        "net.create_none": ("session create, `network` none (the default) (200 ms pause)",
                            "apiloop create {\"profile\":\"container\"}", '{"profile":"container"}'),
        "net.create_allow": ("session create with an egress allowlist (one domain) (200 ms pause)",
                             "apiloop create {…,\"network\":{\"egress\":\"allowlist\",\"allow\":"
                             "[\"allowed.test.example\"]}}",
                             '{"profile":"container","network":{"egress":"allowlist",'
                             '"allow":["allowed.test.example"]}}'),
    }
    keys = list(creates) + list(MODES)
    if not isinstance(b.profiles.get("container"), dict):
        for k in keys:
            b.fail(k, creates.get(k, (MODES.get(k),))[0], "", str(b.profiles.get("container")))
        return
    try:
        os.makedirs(os.path.join(b.tmp, "networld"), exist_ok=True)
        w = _networld().NetWorld(os.path.join(b.tmp, "networld")).start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        for k in keys:
            b.fail(k, creates.get(k, (MODES.get(k),))[0], "", "networld: " + first_line(str(e)))
        return
    d = Daemon(b.build, b.tmp, "net", extra_args=w.daemon_args())
    plain = Daemon(b.build, b.tmp, "net-plain")
    direct = DirectNs(w)
    try:
        plain.start()
        tables = _nft_tables()
        d.start()
        mine = sorted(_nft_tables() - tables)
        try:
            footprint(b, d, mine[0] if len(mine) == 1 else None)
        except Failed as e:
            b.facts["net.footprint"] = {"failed": str(e)}
        for _ in range(rounds):
            for k, (name, cmd, body) in creates.items():
                on = plain if k == "net.create_plain" else d
                b.add_samples(k, name, cmd, lambda: b.samples(
                    b.api(on, "-n", 20, "-w", 2, "-p", 200, "create", body)))
        sid = d.must("POST", "/v1/sandbox/sessions",
                     {"profile": "container",
                      "network": {"egress": "allowlist", "allow": [HOSTNAME]}})["id"]
        b.facts["net.world"] = {"A4": w.A4, "client": w.CLIENT4}
        direct.start()
        cmd = "python3 urllib loop, a new connection per GET (%d rounds of 5 warm-up + %d)" % (
            rounds, n)
        for _ in range(rounds):
            for k, name in MODES.items():
                if k == "net.http_direct":
                    fn = lambda: direct.loop(n, 5)  # noqa: E731
                else:
                    mode = {"net.http_proxy": "proxy", "net.http_transparent": "transparent",
                            "net.http_name": "name"}[k]
                    fn = lambda: sandbox_loop(d, sid, mode, w.A4, n, 5)  # noqa: E731
                b.add_samples(k, name, cmd, fn)
        d.call("DELETE", "/v1/sandbox/sessions/" + sid)
        b.finish_rows()
    except Failed as e:
        for k in keys:
            if k not in b.rows or "stats" not in b.rows[k]:
                b.fail(k, creates.get(k, (MODES.get(k),))[0], "", str(e))
    finally:
        direct.stop()
        d.stop()
        plain.stop()
        w.stop()
