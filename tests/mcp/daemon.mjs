// daemon.mjs — a real sandboxd for the MCP tests: `sandboxd serve` on a free
// 127.0.0.1 port with a temporary state dir, keys made with `sandboxd key
// create`, stopped with SIGTERM.  The binaries come from SANDBOXD_BUILD
// (default: ../../build), like tests/integration/sbxtest.py.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const build = resolve(process.env.SANDBOXD_BUILD || join(here, '..', '..', 'build'));
export const sandboxdBin = join(build, 'sandboxd');
export const sbxBin = join(build, 'sbx');

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.unref();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

// config: the text of a sandboxd.conf (INI) to start with, or none.
export async function startDaemon({ config } = {}) {
  const state = mkdtempSync(join(tmpdir(), 'sbx-mcp-'));
  const conf = config ? [ '--config', join(state, 'sandboxd.conf') ] : [];
  if (config) writeFileSync(conf[1], config);
  const port = await freePort();
  const log = join(state, 'sandboxd.log');
  const fd = openSync(log, 'a');
  const initBin = join(build, 'sbx-init');
  const proc = spawn(sandboxdBin, ['serve', '--listen', `127.0.0.1:${port}`, '--state-dir', state,
    '--sbx-init', initBin, '--log-format', 'json', ...conf], { stdio: ['ignore', fd, fd] });
  process.on('exit', () => proc.exitCode === null && proc.kill('SIGKILL')); // never outlive the test
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000; // a loaded 2-core machine; first start probes drivers
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`sandboxd exited at start:\n${readFileSync(log, 'utf8')}`);
    try {
      if ((await fetch(url + '/healthz')).status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`sandboxd not healthy in time:\n${readFileSync(log, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const key = (tenant, admin = false) => execFileSync(sandboxdBin,
    ['key', 'create', '--tenant', tenant, '--state-dir', state, ...(admin ? ['--admin'] : [])],
    { encoding: 'utf8' }).trim();
  return {
    url, state, log, key,
    async stop() {
      if (proc.exitCode === null) {
        const done = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 20_000);
        await done;
        clearTimeout(t);
      }
      rmSync(state, { recursive: true, force: true });
    },
  };
}
