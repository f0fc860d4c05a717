// sdkloop.mjs — the TypeScript SDK's overhead (sdkbench.py): like sdkloop.py,
// through @sandboxd/sdk (its built dist/) or the same requests with bare
// fetch (Node's undici, keep-alive); one duration per line in µs.
// Usage: node sdkloop.mjs URL KEY PROFILE {exec|execute} {sdk|raw} N W
import { Client } from "../sdk/typescript/dist/index.js";

const [url, key, profile, what, how, n, w] = process.argv.slice(2);
const h = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
async function call(method, path, body) {
  const r = await fetch(url + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : undefined;
}

let exec, execute, done;
if (how === "sdk") {
  const c = new Client({ baseUrl: url, apiKey: key });
  const s = await c.sandbox.sessions.create({ profile });
  exec = () => s.exec({ command: ["true"] });
  execute = () => c.sandbox.execute({ profile, command: ["true"] });
  done = () => s.delete();
} else {
  const sid = (await call("POST", "/v1/sandbox/sessions", { profile })).id;
  exec = () => call("POST", `/v1/sandbox/sessions/${sid}/exec`, { command: ["true"] });
  execute = async () => {
    const { id } = await call("POST", "/v1/sandbox/executions", { profile, command: ["true"] });
    while (["queued", "running"].includes((await call("GET", `/v1/sandbox/executions/${id}?wait_s=30`)).status));
  };
  done = () => call("DELETE", `/v1/sandbox/sessions/${sid}`);
}
const fn = what === "exec" ? exec : execute;
const out = [];
for (let i = 0; i < Number(w) + Number(n); i++) {
  const t0 = process.hrtime.bigint();
  await fn();
  if (i >= Number(w)) out.push(Number(process.hrtime.bigint() - t0) / 1000);
}
await done();
console.log(out.map((x) => x.toFixed(1)).join("\n"));
