// record_requests.mjs — drives the built package's public methods that send
// a JSON body, with a recording fetch instead of the network, and prints
// [{op, method, url, json}] for tests/sdk/check_sdk_contract.py to validate
// against docs/api/openapi.yaml.
import { Client, ROUTES, SandboxSession } from "@sandboxd/sdk";

const seen = [];
const routeOf = (method, url) => {
  const path = new URL(url).pathname;
  for (const [op, [m, tmpl]] of Object.entries(ROUTES)) {
    const re = new RegExp("^" + tmpl.replace(/\{[^}]+\*\}/g, ".+").replace(/\{[^}]+\}/g, "[^/]+") + "$");
    if (m === method && re.test(path)) return op;
  }
  return `unknown ${method} ${path}`;
};
const fakeFetch = async (url, init) => {
  const json = init.body === undefined || typeof init.body !== "string" ? undefined : JSON.parse(init.body);
  seen.push({ op: routeOf(init.method, url), method: init.method, url, json: json ?? null });
  const body = { id: "exe_" + "0".repeat(24), status: "succeeded", pid: 7, ref: "r",
    digest: "sha256:" + "0".repeat(64), executions: [], sessions: [], next_cursor: null };
  const status = { createExecution: 202, createSession: 201, createContext: 201, invokeTool: 202 }[seen.at(-1).op] ??
    (json && json.background ? 202 : 200);
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
};

const c = new Client({ baseUrl: "http://127.0.0.1:1", apiKey: "k", fetch: fakeFetch });
await c.sandbox.executions.create({ image: "python:3.12-slim", profile: "gvisor", command: ["python", "-c", "1"],
  files: { "/work/a": "x", "/work/b": new Uint8Array([0, 1]) }, collect: ["/work/out/*"], stdin: "in",
  env: { A: "1" }, limits: { cpu: "500m", memory: "256Mi", timeout_s: 30 }, network: { egress: "none" },
  metadata: { k: "v" } });
await c.sandbox.executions.create({ language: "python", code: "print(1)" });
await c.sandbox.sessions.create({ profile: "container", image: "host", limits: { memory: "128Mi" },
  network: { egress: "allowlist", allow: ["pypi.org"] }, env: { A: "b" }, metadata: { a: "b" }, ttl_s: 60 });
const sid = "ses_" + "0".repeat(24);
await c.sandbox.sessions.update(sid, { ttl_s: 10, metadata: null, network: null });
const s = c.sandbox.sessions.session(sid);
if (!(s instanceof SandboxSession)) throw new Error("session handle");
await s.exec({ command: ["ls"], stdin: "x", env: { A: "1" }, cwd: "/tmp", timeout_s: 5 });
await s.exec({ language: "bash", code: "echo" });
await s.start({ command: ["sleep", "1"], pty: { cols: 80, rows: 24 } });
await s.processes.signal(7, "TERM");
await s.processes.resize(7, 100, 30);
await s.files.move("/work/a", "/work/b", { overwrite: true });
await s.contexts.create("python");
await s.contexts.run("ctx_" + "0".repeat(24), "1+1", { timeout_s: 3 });
await c.images.pull("python:3.12-slim");
await c.contracts.validate("tool-manifest", { apiVersion: "sandboxd/v1", kind: "Tool" });
const manifest = { apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: "add-numbers", description: "Adds a and b.", labels: { team: "tools" } },
  spec: { sandbox_profile: "container", image: "python:3.12-slim", command: ["python3", "-c", "print(1)"],
    input_schema: { type: "object", required: ["a"] }, limits: { timeout_s: 30 }, network: { egress: "none" },
    collect: ["/work/out/*"], timeout_s: 30 } };
await c.tools.apply(manifest, { dryRun: true });
await c.tools.apply([manifest, { apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: "other" },
  spec: { sandbox_profile: "container", image: "host", language: "python", entrypoint: "main.py" } }]);
await c.tools.invoke("add-numbers", { a: 2, b: 3 }, { metadata: { run: "r1" } });
await c.tools.run("add-numbers", [1, "x"]);
process.stdout.write(JSON.stringify(seen));
