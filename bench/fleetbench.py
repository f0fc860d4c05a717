"""fleetbench.py — the fleet part of `make bench` (docs/fleet.md): three
daemons, each in its own network namespace on 198.51.100.0/24, sharing one
PostgreSQL (the harness of tests/fleet/test_fleet.py).  Measures placement
latency (the daemon's own timing of best-of-K + the reservation, and the
create round trip when it lands here or elsewhere), the forward overhead of
an exec (node A → owner B against B directly, interleaved), and execution
throughput with 1, 2 and 3 nodes — on one 2-core machine, so the three
nodes share the same two cores and the throughput rows say how much the
fleet's coordination costs, not how it scales on real hosts."""
import os
import statistics
import sys
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fleet"))

HEADING = "## Fleet"
PLACEMENTS = 60
EXECS = 200
THROUGHPUT_RUNS = 150


def log(msg):
    print("fleetbench: " + msg, file=sys.stderr, flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def stats(xs):
    return {"n": len(xs), "p50": pct(xs, 50), "p95": pct(xs, 95), "p99": pct(xs, 99),
            "mean": statistics.mean(xs)}


def _placements(tf, fleet):
    a = fleet.nodes["node-a"]
    here, there = [], []
    for _ in range(PLACEMENTS):
        t0 = time.perf_counter()
        r = tf.api(a, fleet.alice, "POST", "/v1/sandbox/sessions", json={})
        dt = time.perf_counter() - t0
        assert r.status_code == 201, r.text
        (here if r.json()["node_id"] == "node-a" else there).append(dt)
        tf.api(a, fleet.alice, "DELETE", f"/v1/sandbox/sessions/{r.json()['id']}")
    r = tf.api(a, fleet.admin, "GET", "/v1/audit",
               params={"action": "sandbox.session.place", "limit": 1000})
    # the audit chain keeps numbers as text (docs/audit.md)
    micros = [float(e["details"]["micros"]) / 1e6 for e in r.json()["events"]][-PLACEMENTS:]
    return micros, here, there


def _forward(tf, fleet):
    sid = tf.session_on(fleet, "node-b")
    a, b = fleet.nodes["node-a"], fleet.nodes["node-b"]
    path = f"/v1/sandbox/sessions/{sid}/exec"
    direct, via = [], []
    sa = requests.Session()
    sb = requests.Session()
    hdr = {"Authorization": f"Bearer {fleet.alice}"}
    for i in range(EXECS + 10):
        for sess, node, out in ((sb, b, direct), (sa, a, via)):
            t0 = time.perf_counter()
            r = sess.post(node.url + path, json={"command": ["true"]}, headers=hdr, timeout=30)
            dt = time.perf_counter() - t0
            assert r.status_code == 200, r.text
            if i >= 10:  # warm-up
                out.append(dt)
    tf.api(a, fleet.alice, "DELETE", f"/v1/sandbox/sessions/{sid}")
    return direct, via


def _throughput(tf, fleet, nodes):
    key = fleet.key(f"tp{len(nodes)}")
    live = [fleet.nodes[n] for n in nodes]
    t0 = time.perf_counter()
    ids = []
    for i in range(THROUGHPUT_RUNS):
        r = tf.api(live[i % len(live)], key, "POST", "/v1/sandbox/executions",
                   json={"command": ["true"]})
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    done = tf.wait_until(lambda: tf.finished(fleet, key, ids), 600, interval=0.2,
                         what="throughput runs")
    dt = time.perf_counter() - t0
    ran = {}
    for e in done.values():
        ran[e["node_id"]] = ran.get(e["node_id"], 0) + 1
    return THROUGHPUT_RUNS / dt, dt, ran


def fleet_part(b):
    """Fills b.facts['fleet'] (b.fail-free: a part that cannot run says why)."""
    facts = b.facts.setdefault("fleet", {})
    facts["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    facts["loadavg_start"] = open("/proc/loadavg").read().split()[:3]
    os.environ.setdefault("SANDBOXD_BUILD", b.build)
    try:
        import test_fleet as tf
    except Exception as e:  # noqa: BLE001  (the report says why)
        facts["error"] = "cannot load the fleet harness: %s" % e
        return
    tf.net_up()
    os.makedirs(os.path.join(b.tmp, "fleet"), exist_ok=True)
    fleet = tf.Fleet(os.path.join(b.tmp, "fleet"))
    try:
        fleet.nodes["node-a"].start()
        fleet.admin = fleet.key("ops", admin=True)
        fleet.alice = fleet.key("alice")
        log("throughput with 1 node")
        facts["tp1"] = _throughput(tf, fleet, ["node-a"])
        fleet.nodes["node-b"].start()
        tf.next_beat(fleet, "node-a")
        log("throughput with 2 nodes")
        facts["tp2"] = _throughput(tf, fleet, ["node-a", "node-b"])
        fleet.nodes["node-c"].start()
        tf.wait_until(lambda: all(
            n["profiles"]["container"]["state"] == "available"
            for n in tf.nodes_of(fleet).values() if n["state"] == "alive"), 15)
        tf.next_beat(fleet, "node-a")
        log("throughput with 3 nodes")
        facts["tp3"] = _throughput(tf, fleet, ["node-a", "node-b", "node-c"])
        log("placements")
        micros, here, there = _placements(tf, fleet)
        facts["place"] = stats(micros)
        facts["create_here"] = stats(here) if here else None
        facts["create_there"] = stats(there) if there else None
        log("forward overhead")
        direct, via = _forward(tf, fleet)
        facts["direct"] = stats(direct)
        facts["via"] = stats(via)
    except Exception as e:  # noqa: BLE001
        facts["error"] = "%s: %s" % (type(e).__name__, e)
        log("failed: %s\n%s" % (e, fleet.logs()))
    finally:
        for n in fleet.nodes.values():
            if n.proc:
                n.stop()
        fleet.pg.stop()
        tf.net_down()
        facts["loadavg_end"] = open("/proc/loadavg").read().split()[:3]


def _ms(s):
    return "%.2f ms" % (s * 1e3) if s >= 1e-3 else "%.0f µs" % (s * 1e6)


def section(rows, facts):
    f = facts.get("fleet")
    if not f:
        return []
    L = [HEADING, "",
         "Measured %s, load average %s at the start of this part and %s at its end (`nproc` = "
         "%d). Three daemons (`--workers 3`, `--node-slots 6`), each in its own network "
         "namespace on 198.51.100.0/24 behind one bridge, sharing one PostgreSQL on the same "
         "host (tests/fleet's harness). All three share this machine's cores: the throughput "
         "rows show the fleet's coordination cost, not how it scales on separate hosts." % (
             f.get("date", "?"), " ".join(f.get("loadavg_start", [])),
             " ".join(f.get("loadavg_end", [])), os.cpu_count()), ""]
    if f.get("error"):
        L += ["Not measured: %s" % f["error"], ""]
    L += ["| Measurement | n | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    for key, name in (("place", "placement (best-of-3 + the reservation), the daemon's own timing"),
                      ("create_here", "session create through node-a, placed on node-a"),
                      ("create_there", "session create through node-a, placed on another node "
                                       "(forwarded)"),
                      ("direct", "exec `true` on a node-b session, through node-b"),
                      ("via", "exec `true` on the same session, through node-a (forwarded)")):
        s = f.get(key)
        if s:
            L.append("| %s | %d | %s | %s | %s |" % (name, s["n"], _ms(s["p50"]), _ms(s["p95"]),
                                                     _ms(s["p99"])))
    if f.get("direct") and f.get("via"):
        L += ["", "Forward overhead on an exec (p50, via node-a − direct): %s." % _ms(
            f["via"]["p50"] - f["direct"]["p50"])]
    L += ["", "| Nodes | executions of `true` | wall time | executions/s | ran on |",
          "|---|---|---|---|---|"]
    for n in (1, 2, 3):
        tp = f.get("tp%d" % n)
        if tp:
            rate, dt, ran = tp
            L.append("| %d | %d | %.1f s | %.1f | %s |" % (
                n, THROUGHPUT_RUNS, dt, rate,
                ", ".join("%s %d" % (k, v) for k, v in sorted(ran.items()))))
    L.append("")
    return L
