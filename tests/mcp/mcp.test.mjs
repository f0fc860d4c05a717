// mcp.test.mjs — sandboxd's MCP server driven by the official MCP SDK
// client (@modelcontextprotocol/sdk, pinned in package-lock.json), over
// Streamable HTTP at /mcp and over stdio through `sbx mcp`, against a real
// daemon running code on the container driver.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startDaemon, sbxBin } from './daemon.mjs';

const LONG = { timeout: 300_000 }; // a tool call's own bound on a loaded machine
let d, alice, bob, admin, carol;
// carol: one session and one execution at a time, the container profile only
const CONFIG = '[tenant.carol]\nsessions = 1\nexecutions = 1\nprofiles = container\n';
const clients = [];

async function connect(key) {
  const c = new Client({ name: 'sandboxd-mcp-test', version: '1.0.0' });
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const t = new StreamableHTTPClientTransport(new URL(d.url + '/mcp'), { requestInit: { headers } });
  await c.connect(t);
  clients.push(c);
  return { c, t };
}

const call = (c, name, args) => c.callTool({ name, arguments: args }, undefined, LONG);

function ok(res) {
  assert.notEqual(res.isError, true, `tool failed: ${JSON.stringify(res.structuredContent)}`);
  assert.equal(res.content[0].type, 'text');
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent);
  return res.structuredContent;
}

function failed(res, code) {
  assert.equal(res.isError, true, `expected a tool error, got ${JSON.stringify(res)}`);
  assert.equal(res.structuredContent.error.code, code, JSON.stringify(res.structuredContent));
  assert.match(res.content[0].text, new RegExp(code));
  return res.structuredContent.error;
}

before(async () => {
  d = await startDaemon({ config: CONFIG });
  alice = d.key('alice');
  carol = d.key('carol');
  bob = d.key('bob');
  admin = d.key('ops', true);
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  if (d) await d.stop();
});

test('initialize negotiates the SDK\'s protocol version and lists the tools with schemas', async () => {
  const { c, t } = await connect(alice);
  assert.equal(c.getServerVersion().name, 'sandboxd');
  assert.ok(t.sessionId?.startsWith('mcp_'), `session id ${t.sessionId}`);
  assert.equal(t.protocolVersion, LATEST_PROTOCOL_VERSION);
  assert.deepEqual(c.getServerCapabilities().tools, { listChanged: false });
  const { tools } = await c.listTools();
  const names = tools.map((x) => x.name).sort();
  assert.deepEqual(names, ['run_code', 'session_create', 'session_delete', 'session_exec',
    'session_list', 'session_read_file', 'session_write_file']);
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    assert.equal(tool.inputSchema.additionalProperties, false, tool.name);
    assert.ok(tool.description.length > 20, tool.name);
  }
  const exec = tools.find((x) => x.name === 'session_exec');
  assert.deepEqual(exec.inputSchema.required, ['session_id']);
  assert.deepEqual(exec.inputSchema.properties.language.enum, ['python', 'node', 'bash']);
  await c.ping();
});

test('run_code runs python once: files in, collected files out, on an execution', async () => {
  const { c } = await connect(alice);
  const r = ok(await call(c, 'run_code', {
    language: 'python',
    code: 'import os\nos.makedirs("/work/out", exist_ok=True)\n'
      + 'data = open("/work/in.txt").read()\n'
      + 'open("/work/out/up.txt", "w").write(data.upper())\n'
      + 'open("/work/out/bin.dat", "wb").write(bytes(range(256)))\nprint(6 * 7)',
    files: [{ path: '/work/in.txt', content: 'hello mcp' }],
    collect: ['/work/out/*'],
    timeout_s: 60,
  }));
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  assert.equal(r.exit_code, 0);
  assert.equal(r.stdout, '42\n');
  assert.match(r.id, /^exe_/);
  const files = Object.fromEntries(r.files.map((f) => [f.path, f]));
  assert.equal(files['/work/out/up.txt'].content, 'HELLO MCP');
  assert.deepEqual(Buffer.from(files['/work/out/bin.dat'].content_base64, 'base64'),
    Buffer.from([...Array(256).keys()]));
  // The same execution through our own API: it is one of ours, not a copy.
  const own = await (await fetch(`${d.url}/v1/sandbox/executions/${r.id}`,
    { headers: { Authorization: `Bearer ${alice}` } })).json();
  assert.equal(own.status, 'succeeded');
  // A failing program is a result to read, not a tool failure.
  const f = ok(await call(c, 'run_code', { language: 'bash', code: 'echo oops >&2; exit 3' }));
  assert.equal(f.status, 'failed');
  assert.equal(f.exit_code, 3);
  assert.equal(f.stderr, 'oops\n');
});

test('session lifecycle: create, exec keeps state, list, delete, then refused', async () => {
  const { c } = await connect(alice);
  const s = ok(await call(c, 'session_create', { ttl_s: 600, metadata: { via: 'mcp' } }));
  assert.match(s.id, /^ses_/);
  assert.equal(s.status, 'ready');
  let r = ok(await call(c, 'session_exec', { session_id: s.id, command: ['sh', '-c', 'echo 7 > /work/n'] }));
  assert.equal(r.status, 'succeeded');
  r = ok(await call(c, 'session_exec', { session_id: s.id, language: 'python',
    code: 'print(int(open("/work/n").read()) * 6)' }));
  assert.equal(r.stdout, '42\n');
  const list = ok(await call(c, 'session_list', {}));
  assert.ok(list.sessions.some((x) => x.id === s.id), JSON.stringify(list));
  const del = ok(await call(c, 'session_delete', { session_id: s.id }));
  assert.deepEqual(del, { id: s.id, deleted: true });
  const gone = failed(await call(c, 'session_exec', { session_id: s.id, command: ['true'] }), 'conflict');
  assert.match(gone.message, /terminated/);
  // Each mutation wrote the audit event its REST route writes.
  const audit = await (await fetch(`${d.url}/v1/audit?limit=1000`,
    { headers: { Authorization: `Bearer ${admin}` } })).json();
  const mine = audit.events.filter((e) => e.target === s.id || e.target?.startsWith(s.id));
  const actions = mine.map((e) => e.action);
  for (const a of ['sandbox.session.create', 'sandbox.execute', 'sandbox.session.delete'])
    assert.ok(actions.includes(a), `audit lacks ${a}: ${JSON.stringify(actions)}`);
});

test('file round trip in a session: text and binary', async () => {
  const { c } = await connect(alice);
  const s = ok(await call(c, 'session_create', {}));
  try {
    ok(await call(c, 'session_write_file', { session_id: s.id, path: 'notes/a.txt', content: 'héllo\n' }));
    let f = ok(await call(c, 'session_read_file', { session_id: s.id, path: '/work/notes/a.txt' }));
    assert.equal(f.content, 'héllo\n');
    assert.equal(f.size, Buffer.byteLength('héllo\n'));
    const bin = Buffer.from([0, 255, 1, 254, 0, 10, 13]);
    const w = ok(await call(c, 'session_write_file', { session_id: s.id, path: '/work/b.bin',
      content: bin.toString('base64'), encoding: 'base64' }));
    assert.equal(w.size, bin.length);
    f = ok(await call(c, 'session_read_file', { session_id: s.id, path: '/work/b.bin' }));
    assert.deepEqual(Buffer.from(f.content_base64, 'base64'), bin);
    // The program in the session sees what the tool wrote.
    const r = ok(await call(c, 'session_exec', { session_id: s.id, command: ['cat', 'notes/a.txt'] }));
    assert.equal(r.stdout, 'héllo\n');
    failed(await call(c, 'session_read_file', { session_id: s.id, path: '/work/missing' }), 'not_found');
  } finally {
    await call(c, 'session_delete', { session_id: s.id });
  }
});

test('bad input: clear tool errors, and JSON-RPC errors for protocol mistakes', async () => {
  const { c } = await connect(alice);
  let e = failed(await call(c, 'run_code', { language: 'cobol', code: 'x' }), 'invalid_request');
  assert.match(e.message, /language/);
  e = failed(await call(c, 'session_exec', { command: ['true'] }), 'invalid_request');
  assert.equal(e.field, 'session_id');
  e = failed(await call(c, 'run_code', { code: 'print(1)', timeout_s: 'soon' }), 'invalid_request');
  assert.equal(e.field, 'timeout_s');
  e = failed(await call(c, 'session_write_file', { session_id: 'ses_x', path: '/work/a',
    content: '***', encoding: 'base64' }), 'invalid_request');
  assert.equal(e.field, 'content');
  failed(await call(c, 'run_code', { language: 'python', code: 'print(1)', limits: { memory: 'lots' } }),
    'invalid_request');
  // Above the profile's ceiling: refused by the same policy check as the API, and audited as such.
  e = failed(await call(c, 'run_code', { language: 'python', code: 'print(1)', limits: { memory: '1000Gi' } }),
    'invalid_request');
  assert.match(e.field, /^limits/);
  const audit = await (await fetch(`${d.url}/v1/audit?limit=1000`,
    { headers: { Authorization: `Bearer ${admin}` } })).json();
  assert.ok(audit.events.some((ev) => ev.action === 'policy.denied' && ev.details?.route === 'execution_create'
    && /limits/.test(ev.details?.field ?? '')), JSON.stringify(audit.events.slice(-3)));
  await assert.rejects(c.callTool({ name: 'no_such_tool', arguments: {} }),
    (err) => err instanceof McpError && err.code === -32602 && /unknown tool/.test(err.message));
  // Raw JSON-RPC on the same MCP session: wrong shapes and methods.
  const post = (body, sid) => fetch(d.url + '/mcp', { method: 'POST', body,
    headers: { Authorization: `Bearer ${alice}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', ...(sid ? { 'Mcp-Session-Id': sid } : {}) } });
  let res = await post('{"jsonrpc":"2.0","id":1,');
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.code, -32700);
  const init = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }));
  const sid = init.headers.get('mcp-session-id');
  assert.equal((await init.json()).result.protocolVersion, LATEST_PROTOCOL_VERSION); // ours, not theirs
  res = await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'resources/list' }), sid);
  assert.equal((await res.json()).error.code, -32601);
  res = await post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_code', arguments: [] } }), sid);
  assert.equal((await res.json()).error.code, -32602);
  res = await post(JSON.stringify([{ jsonrpc: '2.0', id: 4, method: 'ping' }]), sid);
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.code, -32600);
  res = await post(JSON.stringify({ jsonrpc: '2.0', id: 6 }), sid);
  assert.equal(res.status, 400, 'neither a method nor a result');
  assert.equal((await res.json()).error.code, -32600);
  res = await post(JSON.stringify({ jsonrpc: '1.0', id: 7, method: 'ping' }), sid);
  assert.equal((await res.json()).error.code, -32600);
  res = await post(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping' }));
  assert.equal(res.status, 400, 'a request without Mcp-Session-Id');
  res = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), sid);
  assert.equal(res.status, 202);
});

test('no key, or a wrong one: 401 with WWW-Authenticate: Bearer, nothing runs', async () => {
  const is401 = (err) => err.code === 401 && /unauthenticated/.test(err.message);
  await assert.rejects(connect(null), is401);
  await assert.rejects(connect('sbx_nope_nope'), is401);
  const res = await fetch(d.url + '/mcp', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }) });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate'), /^Bearer realm="sandboxd"/);
});

test('cross-tenant: another tenant\'s session and MCP session are not found', async () => {
  const { c: a, t: at } = await connect(alice);
  const { c: b } = await connect(bob);
  const s = ok(await call(a, 'session_create', {}));
  try {
    failed(await call(b, 'session_exec', { session_id: s.id, command: ['true'] }), 'not_found');
    failed(await call(b, 'session_read_file', { session_id: s.id, path: '/work/x' }), 'not_found');
    failed(await call(b, 'session_write_file', { session_id: s.id, path: '/work/x', content: 'pwn' }), 'not_found');
    failed(await call(b, 'session_delete', { session_id: s.id }), 'not_found');
    const listed = ok(await call(b, 'session_list', {}));
    assert.ok(!listed.sessions.some((x) => x.id === s.id));
    // Bob's key on Alice's MCP session id: as unknown as a made-up one.
    const res = await fetch(d.url + '/mcp', { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
      headers: { Authorization: `Bearer ${bob}`, 'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': at.sessionId } });
    assert.equal(res.status, 404);
    // Alice's session survived all of it.
    const r = ok(await call(a, 'session_exec', { session_id: s.id, command: ['true'] }));
    assert.equal(r.status, 'succeeded');
  } finally {
    await call(a, 'session_delete', { session_id: s.id });
  }
});

test('transport: GET is 405, DELETE ends the MCP session', async () => {
  const { c, t } = await connect(alice);
  const auth = { Authorization: `Bearer ${alice}` };
  const get = await fetch(d.url + '/mcp', { headers: { ...auth, Accept: 'text/event-stream', 'Mcp-Session-Id': t.sessionId } });
  assert.equal(get.status, 405);
  const sid = t.sessionId;
  await t.terminateSession();
  const res = await fetch(d.url + '/mcp', { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    headers: { ...auth, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sid } });
  assert.equal(res.status, 404);
  const again = await fetch(d.url + '/mcp', { method: 'DELETE', headers: { ...auth, 'Mcp-Session-Id': sid } });
  assert.equal(again.status, 404);
  await c.close();
});

test('stdio: `sbx mcp` relays the SDK\'s StdioClientTransport to the daemon', async () => {
  const t = new StdioClientTransport({ command: sbxBin, args: ['mcp'], stderr: 'pipe',
    env: { PATH: process.env.PATH, SANDBOXD_URL: d.url, SANDBOXD_API_KEY: alice } });
  const c = new Client({ name: 'sandboxd-mcp-stdio-test', version: '1.0.0' });
  await c.connect(t);
  clients.push(c);
  assert.equal(c.getServerVersion().name, 'sandboxd');
  const { tools } = await c.listTools();
  assert.equal(tools.length, 7);
  const r = ok(await call(c, 'run_code', { language: 'node', code: 'console.log([1,2,3].map(x => x * 2).join(","))' }));
  assert.equal(r.stdout, '2,4,6\n');
  failed(await call(c, 'session_exec', { session_id: 'ses_doesnotexist', command: ['true'] }), 'not_found');
  // Progress comes through the relay too (the daemon streams it as SSE).
  const s = ok(await call(c, 'session_create', {}));
  const seen = [];
  // The SDK runs a progress handler a microtask late and drops it once the
  // response is in: a program that ends right after it writes can have its
  // last progress dropped by the client.  The pause keeps them apart.
  const x = ok(await c.callTool({ name: 'session_exec', arguments: { session_id: s.id,
    command: ['sh', '-c', 'echo via-stdio; sleep 2'] } },
    undefined, { ...LONG, onprogress: (p) => seen.push(p) }));
  assert.equal(x.stdout, 'via-stdio\n');
  assert.ok(seen.map((p) => p.message).join('').includes('via-stdio'), JSON.stringify({ seen, x }));
  ok(await call(c, 'session_delete', { session_id: s.id }));
  await c.close();
  // A bad key through stdio: the agent gets a JSON-RPC error, not silence.
  const bad = new Client({ name: 'bad', version: '1' });
  const bt = new StdioClientTransport({ command: sbxBin, args: ['mcp'], stderr: 'pipe',
    env: { PATH: process.env.PATH, SANDBOXD_URL: d.url, SANDBOXD_API_KEY: 'sbx_bad_key' } });
  await assert.rejects(bad.connect(bt), /401|unauthenticated/i);
  await bad.close().catch(() => {});
});

test('DNS rebinding: a foreign Host or Origin on the loopback listener is 403, even with a key', async () => {
  const raw = (headers) => new Promise((res, rej) => {
    const u = new URL(d.url);
    const q = http.request({ host: u.hostname, port: u.port, path: '/mcp', method: 'POST',
      headers: { Authorization: `Bearer ${alice}`, 'Content-Type': 'application/json', ...headers } }, (r) => {
      let b = ''; r.on('data', (c) => { b += c; }); r.on('end', () => res({ status: r.statusCode, body: b }));
    });
    q.on('error', rej);
    q.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'x', version: '1' } } }));
  });
  let r = await raw({ Host: 'evil.example' });
  assert.equal(r.status, 403);
  assert.match(JSON.parse(r.body).error.message, /DNS rebinding/);
  r = await raw({ Origin: 'http://evil.example' });
  assert.equal(r.status, 403);
  r = await raw({ Host: 'localhost:1', Origin: 'http://localhost:3000' });
  assert.equal(r.status, 200);
});

test('session_exec with a progress token streams its output as progress notifications (SSE)', async () => {
  const { c } = await connect(alice);
  const s = ok(await call(c, 'session_create', {}));
  try {
    const seen = [];
    const res = await c.callTool({ name: 'session_exec', arguments: { session_id: s.id,
      command: ['sh', '-c', 'for i in 1 2 3; do echo tick$i; sleep 0.2; done; echo err >&2; sleep 2; exit 4'] } },
    undefined, { ...LONG, onprogress: (p) => seen.push(p), resetTimeoutOnProgress: true });
    const r = ok(res);
    assert.equal(r.status, 'failed');
    assert.equal(r.exit_code, 4);
    assert.equal(r.stdout, 'tick1\ntick2\ntick3\n');
    const text = seen.map((p) => p.message).join('');
    for (const t of ['tick1', 'tick2', 'tick3', '[stderr] err']) assert.ok(text.includes(t), text);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
    // A refused streamed call is the same tool error as a buffered one.
    const gone = await c.callTool({ name: 'session_exec', arguments: { session_id: 'ses_nope', command: ['true'] } },
      undefined, { onprogress: () => {} });
    failed(gone, 'not_found');
  } finally {
    await call(c, 'session_delete', { session_id: s.id });
  }
});

test('a tenant\'s applied tools are its MCP tools: listed with their schema, called with validated arguments, audited', async () => {
  const name = `add-${Date.now().toString(36)}`;
  const manifest = { apiVersion: 'sandboxd/v1', kind: 'Tool',
    metadata: { name, description: 'Adds a and b.' },
    spec: { sandbox_profile: 'container', image: 'host',
      command: ['python3', '-c', 'import json,sys; d=json.load(sys.stdin); print(d["a"]+d["b"])'],
      input_schema: { type: 'object', required: ['a', 'b'],
        properties: { a: { type: 'number' }, b: { type: 'number' } } } } };
  const applied = await fetch(d.url + '/v1/manifests/apply', { method: 'POST', body: JSON.stringify(manifest),
    headers: { Authorization: `Bearer ${alice}`, 'Content-Type': 'application/json' } });
  assert.equal(applied.status, 200, await applied.text());
  const { c } = await connect(alice);
  const { tools } = await c.listTools();
  const tool = tools.find((x) => x.name === name);
  assert.ok(tool, JSON.stringify(tools.map((x) => x.name)));
  assert.equal(tool.description, 'Adds a and b.');
  assert.deepEqual(tool.inputSchema, manifest.spec.input_schema);
  const r = ok(await call(c, name, { a: 40, b: 2 }));
  assert.equal(r.status, 'succeeded');
  assert.equal(r.stdout, '42\n');
  assert.equal(r.metadata.tool, name);
  // Arguments its schema refuses: a tool error listing them, nothing run.
  const e = failed(await call(c, name, { a: 'forty' }), 'invalid_request');
  assert.deepEqual(e.violations.map((v) => v.path).sort(), ['/input', '/input/a']);
  // Another tenant neither sees nor calls it.
  const { c: b } = await connect(bob);
  assert.ok(!(await b.listTools()).tools.some((x) => x.name === name));
  await assert.rejects(b.callTool({ name, arguments: { a: 1, b: 2 } }), McpError);
  const audit = await fetch(d.url + `/v1/audit?action=tool.invoke&limit=200`, { headers: { Authorization: `Bearer ${admin}` } });
  const events = (await audit.json()).events.filter((ev) => ev.target === name);
  assert.ok(events.some((ev) => ev.outcome === 'ok'), JSON.stringify(events));
});

// What a tenant has, read through our own REST API with its own key: every
// session and every execution, whatever its status.
async function holdings(key) {
  const get = async (path) => {
    const res = await fetch(d.url + path, { headers: { Authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    return res.json();
  };
  const sessions = (await get('/v1/sandbox/sessions?limit=200')).sessions;
  const executions = (await get('/v1/sandbox/executions?limit=200')).executions;
  return { sessions: sessions.map((x) => `${x.id}:${x.status}`).sort(),
    executions: executions.map((x) => x.id).sort() };
}

test('a refused tool call leaves nothing behind: no session, no execution (checked through REST)', async () => {
  const { c } = await connect(carol);
  const auth = { Authorization: `Bearer ${carol}`, 'Content-Type': 'application/json' };
  // Fill carol's quotas: her one session (through MCP) and her one execution (through REST).
  const held = ok(await call(c, 'session_create', { ttl_s: 600 }));
  const sleeper = await fetch(d.url + '/v1/sandbox/executions', { method: 'POST', headers: auth,
    body: JSON.stringify({ profile: 'container', command: ['sleep', '120'] }) });
  assert.equal(sleeper.status, 202, await sleeper.clone().text());
  const sleeperId = (await sleeper.json()).id;
  try {
    const before = await holdings(carol);
    assert.equal(before.sessions.length, 1);
    assert.equal(before.executions.length, 1);
    const refused = [
      // schema violations
      ['run_code', { language: 'cobol', code: 'x' }, 'invalid_request'],
      ['run_code', { code: 'print(1)', shell: true }, 'invalid_request'],
      ['session_create', { ttl_s: 'soon' }, 'invalid_request'],
      ['session_exec', { session_id: held.id, command: 'true' }, 'invalid_request'],
      ['session_write_file', { session_id: held.id, path: '/work/x', content: '***', encoding: 'base64' },
        'invalid_request'],
      // above the profile's ceiling (the policy check, after the schema)
      ['run_code', { language: 'python', code: 'print(1)', limits: { memory: '1000Gi' } }, 'invalid_request'],
      ['session_create', { limits: { memory: '1000Gi' } }, 'invalid_request'],
      // a profile the tenant may not use
      ['run_code', { language: 'python', code: 'print(1)', profile: 'gvisor' }, 'forbidden'],
      ['session_create', { profile: 'gvisor' }, 'forbidden'],
      // over quota
      ['session_create', {}, 'quota_exceeded'],
      ['run_code', { language: 'python', code: 'print(1)' }, 'quota_exceeded'],
    ];
    for (const [tool, args, code] of refused) {
      const e = failed(await call(c, tool, args), code);
      assert.ok(e.message.length > 10, `${tool}: ${e.message}`);
    }
    // an unknown tool is a JSON-RPC error, and runs nothing either
    await assert.rejects(c.callTool({ name: 'no_such_tool', arguments: { code: 'x' } }),
      (err) => err instanceof McpError && err.code === -32602);
    assert.deepEqual(await holdings(carol), before, 'a refused call created or ended something');
    // the refused writes wrote nothing, and the held session still works
    failed(await call(c, 'session_read_file', { session_id: held.id, path: '/work/x' }), 'not_found');
    const r = ok(await call(c, 'session_exec', { session_id: held.id, command: ['ls', '-A', '/work'] }));
    assert.equal(r.stdout, '');
  } finally {
    await fetch(`${d.url}/v1/sandbox/executions/${sleeperId}/cancel`, { method: 'POST', headers: auth });
    await call(c, 'session_delete', { session_id: held.id });
  }
});
