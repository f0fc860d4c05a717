// conformance.mjs — @modelcontextprotocol/conformance's server scenarios
// against a real sandboxd's /mcp.
//
// The conformance client sends no credentials, and /mcp requires an API
// key, so it talks to a loopback relay that adds `Authorization: Bearer`
// to each request and forwards it unchanged otherwise (method, headers,
// body; the answer streamed back as it comes).  Every active server
// scenario runs; conformance-baseline.yml lists the ones we knowingly do
// not pass (docs/mcp.md says why), and the conformance CLI fails on any
// other failure and on a baseline entry that started passing.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

function relay(target, key) {
  const up = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${key}` }; // Host as sent
    const out = http.request({ host: up.hostname, port: up.port, path: req.url, method: req.method, headers },
      (r) => { res.writeHead(r.statusCode, r.headers); r.pipe(res); });
    out.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    req.pipe(out);
  });
  return new Promise((res) => server.listen(0, '127.0.0.1', () => res(server)));
}

const d = await startDaemon();
let status = 1;
try {
  const server = await relay(d.url, d.key('conformance'));
  const url = `http://127.0.0.1:${server.address().port}/mcp`;
  const args = [cli, 'server', '--url', url, '--suite', 'active',
    '--expected-failures', join(here, 'conformance-baseline.yml'), ...process.argv.slice(2)];
  // Asynchronously: the relay answers from this process's event loop.
  const child = spawn(process.execPath, args, { stdio: 'inherit', cwd: here });
  const kill = setTimeout(() => child.kill('SIGKILL'), 900_000);
  status = await new Promise((res) => child.on('exit', (code) => res(code ?? 1)));
  clearTimeout(kill);
  server.close();
} finally {
  await d.stop();
}
process.exit(status);
