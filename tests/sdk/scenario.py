#!/usr/bin/python3
"""scenario.py — the SDK scenario, Python side (tests/sdk/test_sdk.py runs
it against a real daemon; sdk/typescript/e2e/scenario.mjs is the same
scenario in TypeScript).  Environment: SANDBOXD_URL, SANDBOXD_API_KEY (a
plain tenant), SBX_ADMIN_KEY, SBX_RATE_KEY (a tenant with a tiny rate
limit), SBX_REGISTRY_IMAGE (an image on a loopback registry),
SBX_SEED_PROFILE (the seed example's profile).  Prints one line per step."""
import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python", "src"))

import sandboxd  # noqa: E402
from sandboxd import Client  # noqa: E402


def step(name):
    print(f"[python] {name}", flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


admin = Client(api_key=os.environ["SBX_ADMIN_KEY"])
client = Client()  # SANDBOXD_URL / SANDBOXD_API_KEY
reg_image = os.environ["SBX_REGISTRY_IMAGE"]
seed_profile = os.environ.get("SBX_SEED_PROFILE", "gvisor")

step("images: pull from the loopback registry with progress")
seen = []
pulled = admin.images.pull(reg_image, progress=seen.append)
# blobs the store already has (the import below shares them) send no progress
check(pulled["digest"].startswith("sha256:"), pulled)
refs = [i.ref for i in client.images.list()]
check("docker.io/library/python:3.12-slim" in refs, refs)

step("the seed's execute example, as written")
ex = client.sandbox.execute("python:3.12-slim", ["python", "-c", "print(1)"], profile=seed_profile)
check((ex.status, ex.exit_code, ex.stdout) == ("succeeded", 0, "1\n"), ex)

step("execute on the pulled image with files in and collected files out")
ex = client.sandbox.execute(reg_image, ["python", "-c",
                                        "import os; os.makedirs('/work/out', exist_ok=True); "
                                        "open('/work/out/r.txt','w').write(open('/work/in.txt').read().upper())"],
                            profile="container", files={"/work/in.txt": "hello sdk"},
                            collect=["/work/out/*"], metadata={"project": "sdk"})
check(ex.status == "succeeded" and [f.path for f in ex.files] == ["/work/out/r.txt"], ex)
check(client.sandbox.executions.download(ex.id, "/work/out/r.txt") == b"HELLO SDK", "download")
check(any(e.id == ex.id for e in client.sandbox.executions.list(limit=50)), "listed")

step("a timeout: limits.timeout_s ends the run")
ex = client.sandbox.execute(None, ["sleep", "30"], profile="container", limits={"timeout_s": 1})
check(ex.status == "timeout" and ex.reason == "timeout", ex)

step("cancel a running execution")
created = client.sandbox.executions.create(None, ["sleep", "60"], profile="container")
c = client.sandbox.executions.cancel(created.id)
c = client.sandbox.executions.wait(c.id, timeout=60)
check(c.status == "killed" and c.reason == "cancelled", c)

step("a session: exec, files, archives, patch")
with client.sandbox.sessions.create("container", metadata={"agent": "sdk"}) as s:
    check(s.status == "ready", s.info)
    r = s.exec(["sh", "-c", "echo out; echo err >&2; exit 4"])
    check((r.status, r.exit_code, r.stdout, r.stderr) == ("failed", 4, "out\n", "err\n"), r)
    s.files.put("/work/a/hello.txt", "hi there")
    check(s.files.get("/work/a/hello.txt") == b"hi there", "get")
    check([e.name for e in s.files.list("/work/a")] == ["hello.txt"], "list")
    check(s.files.stat("/work/a/hello.txt").size == 8, "stat")
    tar = tarfile.open(fileobj=io.BytesIO(s.archive("/work/a")))
    check("hello.txt" in tar.getnames(), tar.getnames())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = b"from a tar\n"
        ti = tarfile.TarInfo("x/y.txt")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    ext = s.files.archive_put("/work/b", buf.getvalue())
    check(ext.entries >= 1, ext)
    check(s.files.read_text("/work/b/x/y.txt") == "from a tar\n", "extracted")
    s.files.delete("/work/a/hello.txt")
    try:
        s.files.get("/work/a/hello.txt")
        raise AssertionError("deleted file still readable")
    except sandboxd.NotFoundError:
        pass
    s.update(metadata={"agent": "sdk", "step": "2"})
    check(s.info.metadata == {"agent": "sdk", "step": "2"}, s.info)
    check(any(x.id == s.id for x in client.sandbox.sessions.iter()), "session listed")

    step("streaming exec")
    evs = list(s.stream(["sh", "-c", "echo one; echo two >&2; echo three"]))
    out = "".join(e.text for e in evs if e.event == "stdout")
    check(out == "one\nthree\n" and evs[-1].event == "exit" and evs[-1].result.exit_code == 0,
          [(e.event, e.data) for e in evs])

    step("a background process: stdin, follow, signal")
    p = s.start(["sh", "-c", "read x; echo got:$x; exit 3"])
    p.stdin("hi\n", eof=True)
    res = p.wait(timeout=60)
    check(res.exit_code == 3 and res.status == "failed", res)
    check(p.output().stdout == "got:hi\n", p.output())
    q = s.start(["sleep", "60"])
    check(any(x.pid == q.pid and x.status == "running" for x in s.processes.list()), "running")
    q.signal("TERM")
    check(q.wait(timeout=60).signal == 15, "signalled")

    step("a context keeps its state")
    ctx = s.contexts.create("python")
    ctx.run("x = 41")
    rr = ctx.run("x + 1")
    check(rr.status == "succeeded" and rr.result == "42", rr)
    ctx.delete()

    step("watch a directory")
    s.files.mkdir("/work/w")
    w = s.watch("/work/w")
    first = next(w)
    check(first.event == "ready", first)
    s.files.put("/work/w/new.txt", "x")
    ev = next(w)
    check(ev.type in ("create", "modify") and ev.path.endswith("new.txt"), ev)
    w.close()

    step("traceparent reaches the workload")
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with sandboxd.trace(tp):
        r = s.exec(["sh", "-c", "echo $TRACEPARENT"])
    check(r.stdout.startswith("00-4bf92f3577b34da6a3ce929d0e0e4736-"), r.stdout)

    step("a client-side timeout")
    quick = client.with_options(timeout=1.0, max_retries=0)
    try:
        quick.sandbox.sessions.session(s.id).exec(["sleep", "5"], timeout=1.0)
        raise AssertionError("no timeout")
    except sandboxd.TimeoutError:
        pass
sid = s.id
check(client.sandbox.sessions.get(sid).status == "terminated", "deleted")

step("a 429 retried, honouring Retry-After")
retries = []
ratey = Client(api_key=os.environ["SBX_RATE_KEY"], on_retry=retries.append)
for _ in range(4):
    ratey.profiles()
check(retries and all(r["retry_after"] is not None for r in retries), retries)
try:
    no_retry = ratey.with_options(max_retries=0, on_retry=None)
    for _ in range(4):
        no_retry.profiles()
    raise AssertionError("never rate limited")
except sandboxd.RateLimitedError as e:
    check(e.status == 429 and e.retry_after is not None and e.details["limit"] ==
          "requests_per_second", e)

step("a French error")
fr = client.with_options(language="fr")
try:
    fr.sandbox.sessions.get("ses_000000000000000000000000")
    raise AssertionError("no error")
except sandboxd.NotFoundError as e:
    check(e.code == "not_found" and e.message == e.message_i18n["fr"] != e.message_i18n["en"], e)
    check(e.request_id and e.request_id.startswith("req_"), e.request_id)
try:
    fr.sandbox.sessions.create("container", limits={"memory": "lots"})
    raise AssertionError("no error")
except sandboxd.InvalidRequestError as e:
    check(e.field == "limits.memory" and e.message == e.message_i18n["fr"], e)

step("profiles, usage, audit")
pl = client.profiles()
check(pl.get("container") and pl.get("container").available, pl)
u = client.usage(group_by="project")
check(any(g.key == "sdk" and g.records >= 1 for g in u.groups), u)
page = admin.audit.list(limit=5)
check(page.items and page.items[0].seq >= 1, page)
check(admin.audit.verify().ok, "audit chain")
try:
    client.audit.verify()
    raise AssertionError("a tenant key verified the audit chain")
except sandboxd.ForbiddenError:
    pass

step("contracts: a bad tool manifest's violations")
check("tool-manifest" in client.contracts.list(), "contracts")
check(client.contracts.get("tool-manifest")["properties"]["kind"] == {"const": "Tool"}, "schema")
bad = {"apiVersion": "sandboxd/v1", "kind": "Tool", "metadata": {"name": "Add_Numbers"},
       "spec": {"sandbox_profile": "container", "command": "python3"}}
v = client.contracts.validate("tool-manifest", bad)
paths = {x.path for x in v.violations}
check(not v.valid and {"/metadata/name", "/spec/command"} <= paths and
      all(x.message and x.message_i18n["fr"] for x in v.violations), v)

step("tools: apply, apply again, list")
TOOL = "add-numbers-python"
manifest = sandboxd.ToolManifest.build(
    TOOL, profile="container", image="python:3.12-slim",
    command=["python3", "-c", "import json,sys; d=json.load(sys.stdin); print(d['a']+d['b'])"],
    input_schema={"type": "object", "required": ["a", "b"],
                  "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    description="Adds a and b.", labels={"sdk": "python"})
res = client.tools.apply(manifest, dry_run=True)
check(res.dry_run and res.results[0].action == "created", res)
res = client.tools.apply(manifest)
check(not res.dry_run and [(r.name, r.action, r.tool.generation) for r in res.results] ==
      [(TOOL, "created", 1)], res)
res = client.tools.apply(manifest)
check(res.results[0].action == "unchanged" and res.results[0].tool.generation == 1, res)
try:
    client.tools.apply([manifest, bad])
    raise AssertionError("a bad document applied")
except sandboxd.InvalidRequestError as e:
    check(e.violations and all(x.index == 1 for x in e.violations) and
          "/metadata/name" in {x.path for x in e.violations}, e.details)
tools = {t.name: t for t in client.tools.iter()}
check(TOOL in tools and tools[TOOL].profile == "container" and
      tools[TOOL].manifest.spec["input_schema"]["required"] == ["a", "b"] and
      tools[TOOL].manifest.metadata["description"] == "Adds a and b.", tools)

step("tools: run, a bad input, delete")
ex = client.tools.run(TOOL, {"a": 2, "b": 3}, timeout=300)
check((ex.status, ex.exit_code, ex.stdout) == ("succeeded", 0, "5\n") and
      ex.metadata.get("tool") == TOOL, ex)
try:
    client.tools.invoke(TOOL, {"a": "x"})
    raise AssertionError("a bad input was accepted")
except sandboxd.InvalidRequestError as e:
    check(e.code == "invalid_request" and e.violations and
          all(x.path.startswith("/input") for x in e.violations), e.details)
client.tools.delete(TOOL)
try:
    client.tools.get(TOOL)
    raise AssertionError("a deleted tool is still there")
except sandboxd.NotFoundError:
    pass

print("[python] scenario passed", flush=True)
