// unit.test.mjs — unit tests of the TypeScript SDK's own logic (retries,
// backoff, error mapping, headers, timeouts through AbortSignal, SSE parsing)
// against a scripted HTTP server on 127.0.0.1; the daemon itself is exercised
// by tests/sdk/test_sdk.py.  Run: node --test test/   (after tsc -p .)
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";
import {
  APIError, AbortedError, Client, ERRORS_BY_CODE, InternalError, InvalidRequestError, NotFoundError, QuotaExceededError,
  RateLimitedError, RequestTimeoutError, RuntimeUnavailableError, TransportError, decodeOutput, shouldRetry,
} from "@sandboxd/sdk";

const envelope = (code, status, details = {}, headers = {}) => ({
  status, headers: { "Content-Type": "application/json", "X-Request-Id": "req_x", ...headers },
  body: JSON.stringify({ error: { code, message: `${code} en`, message_i18n: { en: `${code} en`, fr: `${code} fr` },
    request_id: "req_x", details } }),
});
const ok = (obj, status = 200, ctype = "application/json") => ({
  status, headers: { "Content-Type": ctype }, body: typeof obj === "string" ? obj : JSON.stringify(obj),
});

let server, url, answers = [], requests = [];
before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", async () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      let a = answers.shift() ?? ok({});
      if (typeof a === "function") a = await a(req, res);
      if (!a) return;
      res.writeHead(a.status, a.headers);
      res.end(a.body);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => { server.closeAllConnections?.(); server.close(); });
beforeEach(() => { answers = []; requests = []; });

const mk = (o = {}) => { const retries = []; return [new Client({ baseUrl: url, apiKey: "sbx_ktest", backoffMs: 5,
  maxBackoffMs: 20, onRetry: (i) => retries.push(i), ...o }), retries]; };

describe("retries", () => {
  test("rate_limited is retried after Retry-After", async () => {
    const [c, retries] = mk();
    answers = [envelope("rate_limited", 429, {}, { "Retry-After": "0" }), ok({ profiles: [], default: "container" })];
    assert.equal((await c.profiles()).default, "container");
    assert.equal(requests.length, 2);
    assert.equal(retries[0].retryAfter, 0);
    assert.equal(retries[0].operation, "listProfiles");
  });
  test("a create refused by 429 is retried (a refusal stores nothing)", async () => {
    const [c] = mk();
    answers = [envelope("rate_limited", 429), ok({ id: "exe_1", status: "queued", profile: "p" }, 202)];
    assert.equal((await c.sandbox.executions.create({ command: ["true"] })).id, "exe_1");
    assert.deepEqual(requests.map((r) => r.method), ["POST", "POST"]);
  });
  test("a tenant quota is not retried", async () => {
    const [c] = mk();
    answers = [envelope("quota_exceeded", 429, { limit: "sessions", value: 2 })];
    await assert.rejects(c.sandbox.sessions.create({ profile: "container" }),
      (e) => e instanceof QuotaExceededError && e.details.limit === "sessions");
    assert.equal(requests.length, 1);
  });
  test("503 is retried a bounded number of times", async () => {
    const [c] = mk({ maxRetries: 2 });
    answers = Array(10).fill(envelope("runtime_unavailable", 503));
    await assert.rejects(c.sandbox.sessions.create({ profile: "gvisor" }), RuntimeUnavailableError);
    assert.equal(requests.length, 3);
  });
  test("500 is not retried", async () => {
    const [c] = mk();
    answers = [envelope("internal", 500)];
    await assert.rejects(c.sandbox.sessions.list(), InternalError);
    assert.equal(requests.length, 1);
  });
  test("a dropped POST is not sent again, a dropped GET is", async () => {
    const [c] = mk();
    const drop = (req, res) => { res.socket.destroy(); return null; };
    answers = [drop];
    await assert.rejects(c.sandbox.executions.create({ command: ["true"] }), TransportError);
    assert.equal(requests.length, 1);
    answers = [drop, ok({ sessions: [], next_cursor: null })];
    assert.equal((await c.sandbox.sessions.list()).items.length, 0);
    assert.equal(requests.length, 3);
  });
  test("policy table", () => {
    assert.equal(shouldRetry(429, { error: { code: "rate_limited" } }), true);
    assert.equal(shouldRetry(429, { error: { code: "quota_exceeded", details: {} } }), true);
    assert.equal(shouldRetry(429, { error: { code: "quota_exceeded", details: { limit: "executions" } } }), false);
    assert.equal(shouldRetry(503, { error: { code: "not_ready" } }), true);
    assert.equal(shouldRetry(500, { error: { code: "internal" } }), false);
  });
});

describe("errors and headers", () => {
  test("every code has its class", async () => {
    const [c] = mk();
    for (const [code, Cls] of Object.entries(ERRORS_BY_CODE)) {
      answers = [envelope(code, 418)];
      await assert.rejects(c.sandbox.sessions.get("ses_1"), (e) => e instanceof Cls && e instanceof APIError &&
        e.code === code && e.message === `${code} en` && e.messageI18n.fr === `${code} fr` && e.requestId === "req_x");
    }
  });
  test("a non-envelope error", async () => {
    const [c] = mk();
    answers = [ok("<html>bad</html>", 502, "text/html")];
    await assert.rejects(c.healthz(), (e) => e instanceof APIError && e.status === 502 && e.code === "http_502");
  });
  test("headers: key, language, traceparent sources, request id", async () => {
    const tp = (ch) => `00-${ch.repeat(32)}-${"b".repeat(16)}-01`;
    const [c] = mk({ language: "fr", traceparent: tp("a") });
    await c.healthz();
    let h = requests.at(-1).headers;
    assert.equal(h.authorization, "Bearer sbx_ktest");
    assert.equal(h["accept-language"], "fr");
    assert.equal(h.traceparent, tp("a"));
    await c.healthz({ traceparent: tp("c"), requestId: "mine-1" });
    h = requests.at(-1).headers;
    assert.equal(h.traceparent, tp("c"));
    assert.equal(h["x-request-id"], "mine-1");
    const [c2] = mk({ traceparent: () => tp("e") });
    await c2.healthz();
    assert.equal(requests.at(-1).headers.traceparent, tp("e"));
    const [c3] = mk();
    await c3.healthz();
    assert.equal(requests.at(-1).headers.traceparent, undefined);
  });
  test("environment defaults", async () => {
    process.env.SANDBOXD_URL = url + "/";
    process.env.SANDBOXD_API_KEY = "sbx_kenv";
    try {
      const c = new Client();
      await c.healthz();
      assert.equal(c.baseUrl, url);
      assert.equal(requests.at(-1).headers.authorization, "Bearer sbx_kenv");
    } finally {
      delete process.env.SANDBOXD_URL;
      delete process.env.SANDBOXD_API_KEY;
    }
  });
  test("paths and queries", async () => {
    const [c] = mk();
    answers = [{ status: 204, headers: {}, body: "" }, ok("data", 200, "application/octet-stream")];
    await c.images.delete("127.0.0.1:5000/t/busybox:1");
    assert.equal(requests.at(-1).url, "/v1/sandbox/images/127.0.0.1:5000/t/busybox:1");
    const got = await c.sandbox.sessions.session("ses_1").files.get("/work/a b&c");
    assert.equal(new TextDecoder().decode(got), "data");
    assert.equal(requests.at(-1).url, "/v1/sandbox/sessions/ses_1/files?path=%2Fwork%2Fa+b%26c");
  });
  test("timeouts and the caller's AbortSignal", async () => {
    const [c] = mk();
    const slow = () => new Promise((r) => setTimeout(() => r(ok({})), 1500));
    answers = [slow];
    const t0 = Date.now();
    await assert.rejects(c.sandbox.executions.create({ command: ["true"], timeoutMs: 200 }), RequestTimeoutError);
    assert.ok(Date.now() - t0 < 1400);
    assert.equal(requests.length, 1, "a POST that may have run was sent again");
    answers = [slow];
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 100);
    await assert.rejects(c.sandbox.sessions.list({ signal: ctl.signal }), AbortedError);
  });
});

describe("streams and helpers", () => {
  test("an exec stream: keep-alives, CRLF, base64 chunks, multi-line data", async () => {
    const [c] = mk();
    answers = [ok(": keep-alive\n\nevent: stdout\ndata: {\"data\": \"a\\n\", \"offset\": 0}\n\n" +
      "event: stderr\r\ndata: {\"data_base64\": \"/w==\", \"offset\": 0}\r\n\r\n" +
      "event: exit\ndata: {\"status\": \"succeeded\", \"exit_code\": 0,\ndata:  \"stdout\": \"a\\n\"}\n\n",
    200, "text/event-stream")];
    const evs = [];
    for await (const ev of c.sandbox.sessions.session("ses_1").stream({ command: ["echo", "a"] })) evs.push(ev);
    assert.deepEqual(evs.map((e) => e.event), ["stdout", "stderr", "exit"]);
    assert.equal(evs[0].text, "a\n");
    assert.deepEqual([...evs[1].bytes], [255]);
    assert.equal(evs[2].result.exit_code, 0);
    assert.equal(requests.at(-1).headers.accept, "text/event-stream");
    assert.deepEqual(JSON.parse(requests.at(-1).body), { command: ["echo", "a"] });
  });
  test("a stream past its timeout or aborted says so", async () => {
    const [c] = mk();
    const hang = (req, res) => { res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write("event: stdout\ndata: {\"data\": \"x\", \"offset\": 0}\n\n"); return null; };
    answers = [hang];
    const s = c.sandbox.sessions.session("ses_1");
    const got = [];
    await assert.rejects((async () => { for await (const ev of s.stream({ command: ["sleep", "9"], timeoutMs: 300 })) got.push(ev.event); })(),
      RequestTimeoutError);
    assert.deepEqual(got, ["stdout"]);
    answers = [hang];
    const ctl = new AbortController();
    await assert.rejects((async () => {
      for await (const ev of s.stream({ command: ["sleep", "9"], signal: ctl.signal })) if (ev.event === "stdout") ctl.abort();
    })(), AbortedError);
  });
  test("execute long-polls until final", async () => {
    const [c] = mk();
    answers = [ok({ id: "exe_1", status: "queued", profile: "p" }, 202), ok({ id: "exe_1", status: "running" }),
      ok({ id: "exe_1", status: "succeeded", exit_code: 0, stdout: "1\n" })];
    const ex = await c.sandbox.execute({ image: "python:3.12-slim", profile: "gvisor", command: ["python", "-c", "print(1)"] });
    assert.deepEqual([ex.status, ex.exit_code, ex.stdout], ["succeeded", 0, "1\n"]);
    assert.deepEqual(JSON.parse(requests[0].body), { profile: "gvisor", image: "python:3.12-slim", command: ["python", "-c", "print(1)"] });
    assert.match(requests[1].url, /wait_s=30/);
  });
  test("bytes travel as base64; decodeOutput", async () => {
    const [c] = mk();
    answers = [ok({ id: "exe_1", status: "queued", profile: "p" }, 202)];
    await c.sandbox.executions.create({ command: ["true"], files: { a: new Uint8Array([0]), b: "t" } });
    assert.deepEqual(JSON.parse(requests[0].body).files,
      [{ path: "a", content: "AA==", encoding: "base64" }, { path: "b", content: "t" }]);
    assert.deepEqual([...decodeOutput("/w==", "base64")], [255]);
    assert.deepEqual([...decodeOutput("é", "utf-8")], [0xc3, 0xa9]);
  });
  test("rate-limit errors carry Retry-After", async () => {
    const [c] = mk({ maxRetries: 0 });
    answers = [envelope("rate_limited", 429, { limit: "requests_per_second", value: 1 }, { "Retry-After": "3" })];
    await assert.rejects(c.profiles(), (e) => e instanceof RateLimitedError && e.retryAfter === 3);
  });
});

const TOOL = { name: "add", profile: "container", image: "python:3.12-slim", generation: 1, digest: "sha256:" + "0".repeat(64),
  created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z",
  manifest: { apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: "add" },
    spec: { sandbox_profile: "container", image: "python:3.12-slim", command: ["python3", "add.py"] } } };
const violation = (path, index) => ({ path, message: `bad ${path}`, message_i18n: { en: `bad ${path}`, fr: `mauvais ${path}` },
  ...(index === undefined ? {} : { index }) });

describe("contracts and tools", () => {
  test("contracts: list, get, validate", async () => {
    const [c] = mk();
    answers = [ok({ contracts: ["tool-manifest"] }), ok({ type: "object" }, 200, "application/schema+json"),
      ok({ valid: false, violations: [violation("/spec/command"), violation("")] })];
    assert.deepEqual(await c.contracts.list(), ["tool-manifest"]);
    assert.deepEqual(await c.contracts.get("tool-manifest"), { type: "object" });
    const v = await c.contracts.validate("tool-manifest", { kind: "Tool" });
    assert.equal(v.valid, false);
    assert.deepEqual(v.violations.map((x) => x.path), ["/spec/command", ""]);
    assert.deepEqual(requests.map((r) => `${r.method} ${r.url}`),
      ["GET /v1/contracts", "GET /v1/contracts/tool-manifest", "POST /v1/contracts/tool-manifest/validate"]);
    assert.deepEqual(JSON.parse(requests[2].body), { kind: "Tool" });
  });
  test("apply one document or a list, dry run", async () => {
    const [c] = mk();
    const m = TOOL.manifest;
    answers = [ok({ dry_run: true, results: [{ name: "add", action: "created", tool: TOOL }] }),
      ok({ dry_run: false, results: [{ name: "add", action: "unchanged", tool: TOOL },
        { name: "b", action: "updated", tool: { ...TOOL, name: "b", generation: 2 } }] })];
    const r1 = await c.tools.apply(m, { dryRun: true });
    assert.deepEqual([r1.dry_run, r1.results[0].action, r1.results[0].tool.manifest.spec.image], [true, "created", "python:3.12-slim"]);
    const r2 = await c.tools.apply([m, { ...m, metadata: { name: "b" } }]);
    assert.deepEqual(r2.results.map((x) => [x.name, x.action, x.tool.generation]), [["add", "unchanged", 1], ["b", "updated", 2]]);
    assert.equal(requests[0].url, "/v1/manifests/apply?dry_run=true");
    assert.deepEqual(JSON.parse(requests[0].body), m);
    assert.equal(requests[1].url, "/v1/manifests/apply");
    assert.deepEqual(JSON.parse(requests[1].body), { items: [m, { ...m, metadata: { name: "b" } }] });
  });
  test("violations of an apply and of an input", async () => {
    const [c] = mk();
    answers = [envelope("invalid_request", 400, { field: "body", violations: [violation("/spec/image", 0), violation("/metadata/name", 1)] }),
      envelope("invalid_request", 400, { field: "input", violations: [violation("/input/a")] })];
    await assert.rejects(c.tools.apply([{}, {}]), (e) => e instanceof InvalidRequestError &&
      JSON.stringify(e.violations.map((v) => [v.index, v.path])) === JSON.stringify([[0, "/spec/image"], [1, "/metadata/name"]]));
    await assert.rejects(c.tools.invoke("add", { a: "x" }), (e) => e instanceof InvalidRequestError &&
      e.violations.length === 1 && e.violations[0].path === "/input/a" && e.violations[0].index === undefined &&
      e.violations[0].message_i18n.fr === "mauvais /input/a");
    assert.equal(requests.length, 2);
    assert.deepEqual(new APIError(400, {}).violations, []);
  });
  test("list, iter, get, delete", async () => {
    const [c] = mk();
    answers = [ok({ tools: [TOOL], next_cursor: "add" }), ok({ tools: [{ ...TOOL, name: "b" }], next_cursor: null }),
      ok(TOOL), { status: 204, headers: {}, body: "" }, envelope("not_found", 404)];
    const names = [];
    for await (const t of c.tools.iter({ pageSize: 1 })) names.push(t.name);
    assert.deepEqual(names, ["add", "b"]);
    assert.equal((await c.tools.get("add")).profile, "container");
    await c.tools.delete("add");
    await assert.rejects(c.tools.get("add"), NotFoundError);
    assert.deepEqual(requests.map((r) => `${r.method} ${r.url}`), ["GET /v1/tools?limit=1", "GET /v1/tools?limit=1&cursor=add",
      "GET /v1/tools/add", "DELETE /v1/tools/add", "GET /v1/tools/add"]);
  });
  test("invoke and run", async () => {
    const [c] = mk();
    const inv = { id: "exe_1", status: "queued", profile: "container", tool: "add", generation: 3 };
    answers = [ok(inv, 202), ok(inv, 202), ok({ id: "exe_1", status: "running" }),
      ok({ id: "exe_1", status: "succeeded", exit_code: 0, stdout: "5\n", metadata: { tool: "add" } })];
    const got = await c.tools.invoke("add", { a: 2, b: 3 }, { metadata: { run: "r1" } });
    assert.deepEqual([got.id, got.tool, got.generation], ["exe_1", "add", 3]);
    const ex = await c.tools.run("add", { a: 2, b: 3 });
    assert.deepEqual([ex.status, ex.stdout, ex.metadata.tool], ["succeeded", "5\n", "add"]);
    assert.deepEqual(requests.map((r) => `${r.method} ${r.url}`), ["POST /v1/tools/add/invoke", "POST /v1/tools/add/invoke",
      "GET /v1/sandbox/executions/exe_1?wait_s=30", "GET /v1/sandbox/executions/exe_1?wait_s=30"]);
    assert.deepEqual(JSON.parse(requests[0].body), { input: { a: 2, b: 3 }, metadata: { run: "r1" } });
    assert.deepEqual(JSON.parse(requests[1].body), { input: { a: 2, b: 3 } });
  });
  test("run is bounded by its wait timeout; no input sends none", async () => {
    const [c] = mk();
    const running = () => new Promise((r) => setTimeout(() => r(ok({ id: "exe_1", status: "running" })), 50));
    answers = [ok({ id: "exe_1", status: "queued", profile: "p", tool: "t", generation: 1 }, 202), ...Array(50).fill(running)];
    await assert.rejects(c.tools.run("t", undefined, { waitTimeoutMs: 200 }), RequestTimeoutError);
    assert.deepEqual(JSON.parse(requests[0].body), {});
  });
});
