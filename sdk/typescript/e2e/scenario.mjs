// scenario.mjs — the SDK scenario, TypeScript side (tests/sdk/test_sdk.py runs
// it against a real daemon; tests/sdk/scenario.py is the same scenario in
// Python).  Environment: SANDBOXD_URL, SANDBOXD_API_KEY, SBX_ADMIN_KEY,
// SBX_RATE_KEY, SBX_REGISTRY_IMAGE, SBX_SEED_PROFILE.  Imports the built
// package (dist/) by its own name, as a user would.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Client, ForbiddenError, InvalidRequestError, NotFoundError, RateLimitedError, RequestTimeoutError,
} from "@sandboxd/sdk";

const env = process.env;
const step = (s) => console.log(`[typescript] ${s}`);
const admin = new Client({ apiKey: env.SBX_ADMIN_KEY });
const client = new Client(); // SANDBOXD_URL / SANDBOXD_API_KEY
const regImage = env.SBX_REGISTRY_IMAGE;
const seedProfile = env.SBX_SEED_PROFILE ?? "gvisor";

step("images: pull from the loopback registry with progress");
const pulled = await admin.images.pull(regImage, { onProgress: () => {} });
assert.match(pulled.digest, /^sha256:/);
const refs = (await client.images.list()).map((i) => i.ref);
assert.ok(refs.includes("docker.io/library/python:3.12-slim"), refs.join());

step("the seed's execute example, as written");
const image = "python:3.12-slim", profile = seedProfile, command = ["python", "-c", "print(1)"];
const baseUrl = env.SANDBOXD_URL, apiKey = env.SANDBOXD_API_KEY;
const ex = await new Client({ baseUrl, apiKey }).sandbox.execute({ image, profile, command });
assert.deepEqual([ex.status, ex.exit_code, ex.stdout], ["succeeded", 0, "1\n"]);

step("execute on the pulled image with files in and collected files out");
let e2 = await client.sandbox.execute({
  image: regImage, profile: "container", files: { "/work/in.txt": new TextEncoder().encode("hello sdk") },
  command: ["python", "-c", "import os; os.makedirs('/work/out', exist_ok=True); " +
    "open('/work/out/r.txt','w').write(open('/work/in.txt').read().upper())"],
  collect: ["/work/out/*"], metadata: { project: "sdk" },
});
assert.equal(e2.status, "succeeded", JSON.stringify(e2));
assert.deepEqual(e2.files.map((f) => f.path), ["/work/out/r.txt"]);
assert.equal(new TextDecoder().decode(await client.sandbox.executions.download(e2.id, "/work/out/r.txt")), "HELLO SDK");
assert.ok((await client.sandbox.executions.list({ limit: 50 })).items.some((x) => x.id === e2.id));

step("a timeout: limits.timeout_s ends the run");
e2 = await client.sandbox.execute({ profile: "container", command: ["sleep", "30"], limits: { timeout_s: 1 } });
assert.deepEqual([e2.status, e2.reason], ["timeout", "timeout"]);

step("cancel a running execution");
const created = await client.sandbox.executions.create({ profile: "container", command: ["sleep", "60"] });
await client.sandbox.executions.cancel(created.id);
const cancelled = await client.sandbox.executions.wait(created.id, { timeoutMs: 60000 });
assert.deepEqual([cancelled.status, cancelled.reason], ["killed", "cancelled"]);

step("a session: exec, files, archives, patch");
const s = await client.sandbox.sessions.create({ profile: "container", metadata: { agent: "sdk" } });
try {
  assert.equal(s.status, "ready");
  const r = await s.exec({ command: ["sh", "-c", "echo out; echo err >&2; exit 4"] });
  assert.deepEqual([r.status, r.exit_code, r.stdout, r.stderr], ["failed", 4, "out\n", "err\n"]);
  await s.files.put("/work/a/hello.txt", "hi there");
  assert.equal(await s.files.readText("/work/a/hello.txt"), "hi there");
  assert.deepEqual((await s.files.list("/work/a")).map((x) => x.name), ["hello.txt"]);
  assert.equal((await s.files.stat("/work/a/hello.txt")).size, 8);
  // archives: read one with the system tar, write one made by it
  const dir = mkdtempSync(join(tmpdir(), "sdk-ts-"));
  writeFileSync(join(dir, "a.tar"), await s.files.archive("/work/a"));
  assert.match(execFileSync("tar", ["-tf", join(dir, "a.tar")], { encoding: "utf8" }), /hello\.txt/);
  execFileSync("mkdir", ["-p", join(dir, "src/x")]);
  writeFileSync(join(dir, "src/x/y.txt"), "from a tar\n");
  execFileSync("tar", ["-cf", join(dir, "b.tar"), "-C", join(dir, "src"), "x"]);
  const ext = await s.files.extract("/work/b", new Uint8Array(readFileSync(join(dir, "b.tar"))));
  assert.ok(ext.entries >= 1);
  assert.equal(await s.files.readText("/work/b/x/y.txt"), "from a tar\n");
  await s.files.delete("/work/a/hello.txt");
  await assert.rejects(s.files.get("/work/a/hello.txt"), NotFoundError);
  await s.update({ metadata: { agent: "sdk", step: "2" } });
  assert.deepEqual(s.info.metadata, { agent: "sdk", step: "2" });
  let listed = false;
  for await (const x of client.sandbox.sessions.iter()) if (x.id === s.id) listed = true;
  assert.ok(listed);

  step("streaming exec");
  const evs = [];
  for await (const ev of s.stream({ command: ["sh", "-c", "echo one; echo two >&2; echo three"] })) evs.push(ev);
  assert.equal(evs.filter((e) => e.event === "stdout").map((e) => e.text).join(""), "one\nthree\n");
  assert.equal(evs.at(-1).event, "exit");
  assert.equal(evs.at(-1).result.exit_code, 0);

  step("a background process: stdin, follow, signal");
  const p = await s.start({ command: ["sh", "-c", "read x; echo got:$x; exit 3"] });
  await p.stdin("hi\n", { eof: true });
  const res = await p.wait({ timeoutMs: 60000 });
  assert.deepEqual([res.exit_code, res.status], [3, "failed"]);
  assert.equal((await p.output()).stdout, "got:hi\n");
  const q = await s.start({ command: ["sleep", "60"] });
  assert.ok((await s.processes.list()).some((x) => x.pid === q.pid && x.status === "running"));
  await q.signal("TERM");
  assert.equal((await q.wait()).signal, 15);

  step("a context keeps its state");
  const ctx = await s.contexts.create("python");
  await ctx.run("x = 41");
  const rr = await ctx.run("x + 1");
  assert.deepEqual([rr.status, rr.result], ["succeeded", "42"]);
  await ctx.delete();

  step("watch a directory");
  await s.files.mkdir("/work/w");
  const w = s.watch("/work/w");
  assert.equal((await w.next()).value.event, "ready");
  await s.files.put("/work/w/new.txt", "x");
  const ev = (await w.next()).value;
  assert.ok(["create", "modify"].includes(ev.data.type) && ev.data.path.endsWith("new.txt"), JSON.stringify(ev));
  await w.return(undefined);

  step("traceparent reaches the workload");
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const traced = await s.exec({ command: ["sh", "-c", "echo $TRACEPARENT"], traceparent: tp });
  assert.ok(traced.stdout.startsWith("00-4bf92f3577b34da6a3ce929d0e0e4736-"), traced.stdout);

  step("a client-side timeout (AbortSignal)");
  const quick = client.withOptions({ maxRetries: 0 });
  await assert.rejects(quick.sandbox.sessions.session(s.id).exec({ command: ["sleep", "5"], timeoutMs: 1000 }),
    RequestTimeoutError);
} finally {
  await s.delete();
}
assert.equal((await client.sandbox.sessions.get(s.id)).status, "terminated");

step("a 429 retried, honouring Retry-After");
const retries = [];
const ratey = new Client({ apiKey: env.SBX_RATE_KEY, onRetry: (i) => retries.push(i) });
for (let i = 0; i < 4; i++) await ratey.profiles();
assert.ok(retries.length > 0 && retries.every((r) => r.retryAfter !== undefined), JSON.stringify(retries));
const noRetry = ratey.withOptions({ maxRetries: 0, onRetry: undefined });
await assert.rejects(async () => { for (let i = 0; i < 4; i++) await noRetry.profiles(); },
  (e) => e instanceof RateLimitedError && e.status === 429 && e.retryAfter !== undefined &&
    e.details.limit === "requests_per_second");

step("a French error");
const fr = client.withOptions({ language: "fr" });
await assert.rejects(fr.sandbox.sessions.get("ses_000000000000000000000000"), (e) =>
  e instanceof NotFoundError && e.code === "not_found" && e.message === e.messageI18n.fr &&
  e.messageI18n.fr !== e.messageI18n.en && /^req_/.test(e.requestId));
await assert.rejects(fr.sandbox.sessions.create({ profile: "container", limits: { memory: "lots" } }), (e) =>
  e instanceof InvalidRequestError && e.field === "limits.memory" && e.message === e.messageI18n.fr);

step("profiles, usage, audit");
const pl = await client.profiles();
assert.ok(pl.profiles.find((x) => x.name === "container")?.available);
const u = await client.usage({ groupBy: "project" });
assert.ok(u.groups.some((g) => g.key === "sdk" && g.records >= 1), JSON.stringify(u));
const page = await admin.audit.list({ limit: 5 });
assert.ok(page.items.length && page.items[0].seq >= 1);
assert.ok((await admin.audit.verify()).ok);
await assert.rejects(client.audit.verify(), ForbiddenError);

step("contracts: a bad tool manifest's violations");
assert.ok((await client.contracts.list()).includes("tool-manifest"));
assert.deepEqual((await client.contracts.get("tool-manifest")).properties.kind, { const: "Tool" });
const bad = { apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: "Add_Numbers" },
  spec: { sandbox_profile: "container", command: "python3" } };
const verdict = await client.contracts.validate("tool-manifest", bad);
const badPaths = verdict.violations.map((x) => x.path);
assert.ok(!verdict.valid && badPaths.includes("/metadata/name") && badPaths.includes("/spec/command"), JSON.stringify(verdict));
assert.ok(verdict.violations.every((x) => x.message && x.message_i18n.fr));

step("tools: apply, apply again, list");
const TOOL = "add-numbers-typescript";
const manifest = {
  apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: TOOL, description: "Adds a and b.", labels: { sdk: "typescript" } },
  spec: {
    sandbox_profile: "container", image: "python:3.12-slim",
    command: ["python3", "-c", "import json,sys; d=json.load(sys.stdin); print(d['a']+d['b'])"],
    input_schema: { type: "object", required: ["a", "b"], properties: { a: { type: "number" }, b: { type: "number" } } },
  },
};
let applied = await client.tools.apply(manifest, { dryRun: true });
assert.ok(applied.dry_run && applied.results[0].action === "created", JSON.stringify(applied));
applied = await client.tools.apply(manifest);
assert.deepEqual(applied.results.map((x) => [x.name, x.action, x.tool.generation]), [[TOOL, "created", 1]]);
applied = await client.tools.apply(manifest);
assert.deepEqual([applied.results[0].action, applied.results[0].tool.generation], ["unchanged", 1]);
await assert.rejects(client.tools.apply([manifest, bad]), (e) => e instanceof InvalidRequestError &&
  e.violations.length > 0 && e.violations.every((x) => x.index === 1) &&
  e.violations.some((x) => x.path === "/metadata/name"));
let tool;
for await (const t of client.tools.iter()) if (t.name === TOOL) tool = t;
assert.ok(tool && tool.profile === "container", JSON.stringify(tool));
assert.deepEqual(tool.manifest.spec.input_schema.required, ["a", "b"]);
assert.equal(tool.manifest.metadata.description, "Adds a and b.");

step("tools: run, a bad input, delete");
const ran = await client.tools.run(TOOL, { a: 2, b: 3 }, { waitTimeoutMs: 300000 });
assert.deepEqual([ran.status, ran.exit_code, ran.stdout, ran.metadata.tool], ["succeeded", 0, "5\n", TOOL]);
await assert.rejects(client.tools.invoke(TOOL, { a: "x" }), (e) => e instanceof InvalidRequestError &&
  e.code === "invalid_request" && e.violations.length > 0 && e.violations.every((x) => x.path.startsWith("/input")));
await client.tools.delete(TOOL);
await assert.rejects(client.tools.get(TOOL), NotFoundError);

console.log("[typescript] scenario passed");
