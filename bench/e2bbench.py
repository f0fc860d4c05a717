"""e2bbench.py — the E2B-compatible surface's row: `sandbox.commands.run('true')`
round trip through the real e2b SDK (2.51.0, tests/compat's lockfile, npm ci
if needed) against our own exec API in the same run: by fetch from the same
node process (`["true"]`, and `["/bin/bash","-l","-c","true"]`, which is
what commands.run really executes), and by apiloop (C, libcurl), in
alternating batches on one `container` daemon."""
import json
import os
import subprocess

from daemon import Daemon, Failed, first_line

HERE = os.path.dirname(os.path.abspath(__file__))
COMPAT = os.path.join(HERE, "..", "tests", "compat")
N, WARM, ROUNDS = 100, 10, 3
ROWS = {
    "e2b.sdk": "`sandbox.commands.run('true')`, e2b SDK 2.51.0 (node fetch, Connect stream)",
    "e2b.api_true": "our exec `[\"true\"]` by fetch from the same node process",
    "e2b.api_bash": "our exec `[\"/bin/bash\",\"-l\",\"-c\",\"true\"]` (what commands.run runs) by fetch",
    "e2b.apiloop": "our exec `[\"true\"]` by apiloop (C, libcurl keep-alive)",
}


def npm_ci():
    mark = os.path.join(COMPAT, "node_modules", ".package-lock.json")
    if os.path.exists(mark):
        return
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=COMPAT,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise Failed("npm ci: " + first_line(r.stderr or r.stdout))


def node_batch(d):
    urls = d.must("GET", "/v1/compat/e2b")
    env = dict(os.environ, E2B_API_URL=urls["api_url"], E2B_SANDBOX_URL=urls["sandbox_url"],
               E2B_API_KEY=d.key, SBX_URL=d.url)
    r = subprocess.run(["node", os.path.join(HERE, "e2b_loop.mjs"), os.path.abspath(COMPAT),
                        str(N), str(WARM), "1"], env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise Failed("e2b_loop: " + first_line(r.stderr or r.stdout))
    return json.loads(r.stdout.strip().splitlines()[-1])


def e2b_part(b, rounds=ROUNDS):
    cmd = {k: "bench/e2b_loop.mjs, %d rounds of %d warm-up + %d" % (rounds, WARM, N)
           for k in ROWS}
    cmd["e2b.apiloop"] = "apiloop exec, %d rounds of %d warm-up + %d" % (rounds, WARM, N)
    d = Daemon(b.build, b.tmp, "e2b")
    try:
        npm_ci()
        d.start()
        sid = d.must("POST", "/v1/sandbox/sessions", {"profile": "container"})["id"]
        for _ in range(rounds):
            got = {}

            def from_node(k):
                if not got:
                    got.update(node_batch(d))
                return got[k.split(".", 1)[1]]
            for k in ("e2b.sdk", "e2b.api_true", "e2b.api_bash"):
                b.add_samples(k, ROWS[k], cmd[k], lambda k=k: from_node(k))
            b.add_samples("e2b.apiloop", ROWS["e2b.apiloop"], cmd["e2b.apiloop"],
                          lambda: b.samples(b.api(d, "-n", N, "-w", WARM, "exec", sid)))
        b.finish_rows()
    except (Failed, OSError, ValueError, subprocess.TimeoutExpired) as e:
        for k, name in ROWS.items():
            if "stats" not in b.rows.get(k, {}):
                b.fail(k, name, cmd[k], str(e))
    finally:
        d.stop()
