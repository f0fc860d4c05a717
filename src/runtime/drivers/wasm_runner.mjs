// wasm_runner.mjs — placeholder runner (WASI modules only) until the full one lands.
import net from 'node:net';
import { openSync, closeSync, readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
const args = process.argv.slice(2);
const socket = args[args.indexOf('--socket') + 1];
function parse(buf) {
  let o = 8;
  const pid = buf.readUInt32LE(4);
  const strv = () => { const n = buf.readUInt32LE(o); o += 4; const v = []; for (let i = 0; i < n; i++) { const l = buf.readUInt32LE(o); o += 4; v.push(buf.subarray(o, o + l).toString()); o += l; } return v; };
  const argv = strv(); const env = strv(); const l = buf.readUInt32LE(o); o += 4; const cwd = buf.subarray(o, o + l).toString(); o += l;
  const fds = [buf.readUInt32LE(o), buf.readUInt32LE(o + 4), buf.readUInt32LE(o + 8)]; o += 12;
  return { pid, argv, env, cwd, fds, end: o };
}
net.createServer((c) => {
  let buf = Buffer.alloc(0);
  c.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    let job; try { job = parse(buf); } catch { return; }
    if (job.end > buf.length) return;
    c.removeAllListeners('data');
    const fds = [0, 1, 2].map((i) => openSync(`/proc/${job.pid}/fd/${job.fds[i]}`, i ? 'w' : 'r'));
    c.write('{"started":true}\n');
    let code = 0, extra = '';
    try {
      if (!job.argv[0].endsWith('.wasm')) { extra = ',"refused":"not a .wasm module"'; code = 127; }
      else {
        const env = Object.fromEntries(job.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
        const wasi = new WASI({ version: 'preview1', args: job.argv, env, preopens: { '/work': '/work', '/tmp': '/tmp' }, stdin: fds[0], stdout: fds[1], stderr: fds[2], returnOnExit: true });
        const path = job.argv[0].startsWith('/') ? job.argv[0] : job.cwd + '/' + job.argv[0];
        const inst = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(path)), wasi.getImportObject());
        code = wasi.start(inst);
      }
    } catch (e) { code = 134; }
    for (const fd of fds) closeSync(fd);
    c.end(`{"exit":${code}${extra}}\n`);
  });
}).listen('\0' + socket);
