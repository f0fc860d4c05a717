// node_driver.js — the interpreter side of a Node context.
// Embedded into sandboxd at build time (gen_drivers.py) and started inside
// the sandbox as `node -e <this file>`.  Node's standard modules only.
//
// Same protocol as python_driver.py: the nonce on the first stdin line,
// then one JSON request per line; replies are "<nonce> <json>\n" frames on
// stdout.  Code runs with vm.runInContext in one persistent context, so
// globals (var, function, and top-level let/const) live on between runs;
// `result` is util.inspect() of the completion value (a Promise is awaited
// first).  console.* inside the context is captured per run; other writes
// to the process's stdout/stderr are reported by the daemon as the run's
// output.  A run with "stream": true also sends progress frames as in
// python_driver.py, gathered for up to LIVE_INTERVAL_MS: they go out while
// the code yields to the event loop (awaits, timers), as its own output
// would.
'use strict';
const fs = require('fs');
const stream = require('stream');
const util = require('util');
const vm = require('vm');

const MAX_RESULT = 1 << 20;
const LIVE_INTERVAL_MS = 50;

// The progress frames of a streamed run (python_driver.py's Live).
class Live {
  constructor(seq, cap) {
    this.seq = seq;
    this.pending = []; // [stream, text, ticks waited], in order
    this.left = { stdout: cap, stderr: cap };
    this.timer = setInterval(() => this.flush(false), LIVE_INTERVAL_MS);
  }
  add(stream, s) {
    s = s.slice(0, Math.max(0, this.left[stream]));
    if (!this.timer || !s) return;
    this.left[stream] -= s.length;
    const last = this.pending[this.pending.length - 1];
    if (last && last[0] === stream) last[1] += s;
    else this.pending.push([stream, s, 0]);
  }
  flush(everything) {
    const keep = [];
    this.pending.forEach(([stream, text, ticks], i) => {
      const last = i === this.pending.length - 1;
      const cut = everything || ticks || !last ? text.length : text.lastIndexOf('\n') + 1;
      if (cut) send({ seq: this.seq, stream, text: text.slice(0, cut) });
      if (cut < text.length) keep.push([stream, text.slice(cut), ticks + 1]);
    });
    this.pending = keep;
  }
  close() {
    clearInterval(this.timer);
    this.timer = null;
    this.flush(true);
  }
}

class Capture {
  constructor(cap, live, name) {
    this.live = live;
    this.name = name;
    this.half = Math.max(1, Math.floor(cap / 2));
    this.head = '';
    this.tail = '';
    this.dropped = 0;
  }
  write(chunk) {
    let s = String(chunk);
    if (this.live) this.live.add(this.name, s);
    if (this.head.length < this.half) {
      const take = s.slice(0, this.half - this.head.length);
      this.head += take;
      s = s.slice(take.length);
    }
    if (s) {
      this.tail += s;
      if (this.tail.length > this.half) {
        this.dropped += this.tail.length - this.half;
        this.tail = this.tail.slice(-this.half);
      }
    }
    return true;
  }
  value() { return this.head + this.tail; }
}

let nonce = null;
let count = 0;
let current = null; // {out, err} of the run in progress
// console.Console wants real streams; these write synchronously into the
// run's capture (or, between runs, to the process's own descriptors).
const proxyStream = (which) => new stream.Writable({
  decodeStrings: false,
  write(chunk, encoding, done) {
    if (current) current[which].write(chunk);
    else process[which === 'out' ? 'stdout' : 'stderr'].write(chunk);
    done();
  },
});
const sandbox = {
  console: new console.Console({ stdout: proxyStream('out'), stderr: proxyStream('err') }),
  require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone: globalThis.structuredClone,
  module: { exports: {} },
};
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function send(obj) {
  fs.writeSync(1, `${nonce} ${JSON.stringify(obj)}\n`);
}

// The stack without the driver's own frames (vm and this script).
function userStack(stack) {
  return String(stack || '').split('\n')
    .filter((l) => !/\((node:vm:|\[eval\])|^\s+at (node:vm:|\[eval\])/.test(l))
    .join('\n');
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { name: String(e.name || 'Error'), value: String(e.message || ''),
             traceback: userStack(e.stack) };
  }
  return { name: 'Error', value: util.inspect(e), traceback: '' };
}

async function run(req) {
  count += 1;
  const cap = Number(req.max_output) || (1 << 20);
  const live = req.stream === true ? new Live(req.seq, cap) : null;
  current = { out: new Capture(cap, live, 'stdout'), err: new Capture(cap, live, 'stderr') };
  let result = null;
  let error = null;
  try {
    let value = vm.runInContext(String(req.code || ''), context,
                                { filename: `<cell-${count}>` });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) {
      result = util.inspect(value);
      if (result.length > MAX_RESULT) result = result.slice(0, MAX_RESULT) + '…';
    }
  } catch (e) {
    error = errorOf(e);
  }
  const { out, err } = current;
  current = null;
  if (live) live.close();
  send({ seq: req.seq, stdout: out.value(), stderr: err.value(),
         stdout_truncated: out.dropped > 0, stderr_truncated: err.dropped > 0,
         result, outputs: [], error, execution_count: count });
}

// Requests are handled one at a time, in order.
let pending = '';
let queue = Promise.resolve();
process.stdin.on('data', (data) => {
  pending += data.toString('utf8');
  let nl;
  while ((nl = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (nonce === null) {
      nonce = line.trim();
      send({ hello: true, language: 'node', version: process.versions.node });
      continue;
    }
    let req;
    try { req = JSON.parse(line); } catch (e) { continue; }
    if (req && req.op === 'run') queue = queue.then(() => run(req));
  }
});
process.stdin.on('end', () => process.exit(0));
process.on('uncaughtException', (e) => {
  // An error thrown later by a callback of user code: reported on stderr,
  // the context lives on.
  process.stderr.write(`Uncaught ${errorOf(e).traceback || util.inspect(e)}\n`);
});
process.on('unhandledRejection', (e) => {
  process.stderr.write(`Unhandled rejection: ${util.inspect(e)}\n`);
});
