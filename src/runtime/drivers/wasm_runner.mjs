// sandboxd wasm runner: the engine of the `wasm` sandbox class.
//
// Started once per sandbox by sbx-init (PID 1 of a `container` sandbox), with
// this file's text on stdin (docs/wasm.md, section "wasm-runner"):
//
//   /usr/bin/node --experimental-permission --allow-wasi --allow-worker \
//     --allow-fs-read=/work/* --allow-fs-read=/tmp/* --allow-fs-read=/proc/* \
//     --allow-fs-read=<MODULES>/* --allow-fs-write=/work/* --allow-fs-write=/tmp/* \
//     --allow-fs-write=/proc/* --no-warnings --input-type=module - \
//     --socket sbx-engine --modules <MODULES>
//
// (one --allow-fs-* flag per path: Node 20.20 does not split a comma list.)
//
// Each exec of the sandbox is a short-lived client that connects to the
// abstract unix socket "\0<socket>" (Node 20 binds it NUL-padded to the whole
// sun_path), sends one request and reads JSON lines. The job's stdin, stdout
// and stderr are three pipes of the client, which the runner opens through
// /proc/<client pid>/fd/<n> and writes/reads directly.
//
// Request, little-endian: "SBX1", u32 pid, u32 argc, argc x (u32 len, bytes),
// u32 envc, envc x (u32 len, "KEY=VALUE"), u32 cwdlen, cwd bytes, u32 stdin fd,
// u32 stdout fd, u32 stderr fd (numbers in the client); at most 8 MiB.
// Replies, one JSON object a line: {"started":true} once the runner holds the
// three fds (the client then closes its copies of those ends), then, after the
// runner has closed them again, the final line and close: {"exit":N} |
// {"exit":127,"refused":"..."} | {"exit":134,"trap":"..."}. A job refused
// before it starts gets only the final line. A client that closes (or
// half-closes) its end before the final line is taken as killed: its job is
// terminated at once.
//
// Jobs, by argv[0]: *.wasm -> WASI preview 1 module; python/python3 ->
// Pyodide; node/nodejs -> QuickJS (quickjs-emscripten, sync variant);
// anything else is refused. Every job runs in a worker_thread, so it can be
// terminated; only Node built-ins and the two npm packages under <MODULES>
// are used. Nothing is ever printed on stdout; the runner's own errors go to
// stderr.

import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';

// Node 20's node:wasi, called from wasm through V8's fast API path, works on a
// stale copy of the module's memory after memory.grow: every WASI call after
// the first growth reads or writes freed memory (SIGSEGV, V8 fatal errors, or
// output silently lost -- and a guest-controlled write into the runner's heap).
// The slow path looks the memory up on each call. Must precede any wasm
// compilation; workers share the flag.
v8.setFlagsFromString('--no-turbo-fast-api-calls');

const MAX_REQUEST = 8 << 20;
const WASM_PAGE = 65536;

// ---------------------------------------------------------------- options

function parseOptions(argv) {
  const o = {
    socket: null,
    modules: '/usr/local/lib/sandboxd/wasm/node_modules',
    preopenRoot: null, // tests only: /work -> DIR/work, /tmp -> DIR/tmp
    maxMemoryMiB: 1024, // per WASI instance / QuickJS runtime
    cacheEntries: 32,
    cacheMiB: 256,
    verbose: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fatal(`option ${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--socket': o.socket = next(); break;
      case '--modules': o.modules = next(); break;
      case '--preopen-root': o.preopenRoot = path.resolve(next()); break;
      case '--wasm-max-memory-mib': o.maxMemoryMiB = posInt(a, next()); break;
      case '--cache-entries': o.cacheEntries = posInt(a, next()); break;
      case '--cache-mib': o.cacheMiB = posInt(a, next()); break;
      case '--verbose': o.verbose = true; break;
      default:
        // process.argv holds node's own path and "-" (the script from stdin).
        if (i > 1 && a.startsWith('--')) log(`ignoring unknown option ${a}`);
    }
  }
  if (!o.socket) fatal('--socket NAME is required');
  if (o.maxMemoryMiB > 4096) o.maxMemoryMiB = 4096;
  o.modules = o.modules.replace(/\/+$/, '') || '/';
  return o;
}

function posInt(name, v) {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) fatal(`${name}: not a positive integer: ${v}`);
  return n;
}

function log(msg) {
  try { process.stderr.write(`wasm-runner: ${msg}\n`); } catch { /* stderr gone */ }
}

function fatal(msg) {
  log(msg);
  process.exit(2);
}

const opts = parseOptions(process.argv);

// A path as the job sees it (/work/..., /tmp/...) -> the path on this host.
function hostPath(p) {
  if (!opts.preopenRoot) return p;
  for (const top of ['/work', '/tmp']) {
    if (p === top || p.startsWith(top + '/')) return opts.preopenRoot + p;
  }
  return p;
}

const PREOPENS = { '/work': hostPath('/work'), '/tmp': hostPath('/tmp') };

function haveFile(p) {
  try { return fs.statSync(p).isFile(); } catch { return false; }
}

// ---------------------------------------------------------------- classify

function classify(argv0) {
  if (argv0.endsWith('.wasm')) return 'wasi';
  const base = path.posix.basename(argv0);
  if (/^python(3(\.\d+)?)?$/.test(base)) return 'python';
  if (base === 'node' || base === 'nodejs' || base === 'javascript') return 'js';
  return null;
}

function refused(message) {
  return { exit: 127, refused: message };
}

// ---------------------------------------------------------------- WASI module cache

// Caps the declared maximum of every (32-bit, own) memory of a module at
// maxPages, so memory.grow fails (malloc returns NULL) instead of the runner
// growing towards 4 GiB inside the sandbox's memory cgroup. Returns the
// original bytes when there is nothing to change or the module is malformed
// (WebAssembly.compile reports that).
function capMemory(bytes, maxPages) {
  const u8 = bytes;
  if (u8.length < 8 || u8[0] !== 0 || u8[1] !== 0x61 || u8[2] !== 0x73 || u8[3] !== 0x6d) return bytes;
  const readLeb = (pos) => {
    let r = 0, mul = 1, b;
    do {
      if (pos >= u8.length || mul > 2 ** 63) throw new Error('bad leb');
      b = u8[pos++];
      r += (b & 0x7f) * mul;
      mul *= 128;
    } while (b & 0x80);
    return [r, pos];
  };
  const leb = (n) => {
    const out = [];
    do {
      let b = n % 128;
      n = Math.floor(n / 128);
      if (n) b |= 0x80;
      out.push(b);
    } while (n);
    return out;
  };
  try {
    let pos = 8;
    while (pos < u8.length) {
      const id = u8[pos];
      const [size, start] = readLeb(pos + 1);
      const end = start + size;
      if (end > u8.length) return bytes;
      if (id === 5) {
        let [count, p] = readLeb(start);
        const out = leb(count);
        let changed = false;
        for (let k = 0; k < count; k++) {
          const flags = u8[p++];
          let min, max = null;
          [min, p] = readLeb(p);
          if (flags & 1) [max, p] = readLeb(p);
          if (!(flags & 4) && !(flags & 2) && min <= maxPages && (max === null || max > maxPages)) {
            out.push(flags | 1, ...leb(min), ...leb(maxPages));
            changed = true;
          } else {
            out.push(flags, ...leb(min));
            if (max !== null) out.push(...leb(max));
          }
        }
        if (p !== end || !changed) return bytes;
        const head = Buffer.from([5, ...leb(out.length)]);
        return Buffer.concat([u8.subarray(0, pos), head, Buffer.from(out), u8.subarray(end)]);
      }
      pos = end;
    }
  } catch {
    return bytes;
  }
  return bytes;
}

class ModuleCache {
  constructor(maxEntries, maxBytes, maxPages) {
    this.maxEntries = maxEntries;
    this.maxBytes = maxBytes;
    this.maxPages = maxPages;
    this.bySha = new Map(); // sha -> {size, promise}; insertion order = LRU order
    this.bytes = 0;
    this.byStat = new Map(); // dev:ino:size:mtime:ctime -> sha (skips re-reading)
    this.hits = 0;
    this.misses = 0;
  }

  // -> WebAssembly.Module, or throws an Error whose message is for the user.
  async get(file, shown) {
    let st;
    try {
      st = fs.statSync(file, { bigint: true });
    } catch (e) {
      throw new Error(`${shown}: ${describeFsError(e)}`);
    }
    if (!st.isFile()) throw new Error(`${shown}: not a regular file`);
    if (st.size > BigInt(this.maxBytes)) throw new Error(`${shown}: module larger than the cache (${opts.cacheMiB} MiB)`);
    const statKey = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
    let sha = this.byStat.get(statKey);
    let data = null;
    const read = async () => {
      try {
        data = await fs.promises.readFile(file);
      } catch (e) {
        throw new Error(`${shown}: ${describeFsError(e)}`);
      }
      sha = crypto.createHash('sha256').update(data).digest('hex');
      this.byStat.delete(statKey);
      this.byStat.set(statKey, sha);
      if (this.byStat.size > 1024) this.byStat.delete(this.byStat.keys().next().value);
    };
    if (!sha || !this.bySha.has(sha)) await read();
    let entry = this.bySha.get(sha);
    const hit = !!entry;
    const t0 = process.hrtime.bigint();
    if (entry) {
      this.hits++;
      this.bySha.delete(sha); // LRU touch
      this.bySha.set(sha, entry);
    } else {
      this.misses++;
      const patched = capMemory(data, this.maxPages);
      entry = { size: data.length, promise: WebAssembly.compile(patched) };
      this.bySha.set(sha, entry);
      this.bytes += entry.size;
      this.evict();
    }
    try {
      const module = await entry.promise;
      return { module, hit, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
    } catch (e) {
      if (this.bySha.get(sha) === entry) {
        this.bySha.delete(sha);
        this.bytes -= entry.size;
      }
      throw new Error(`${shown}: not a valid WebAssembly module: ${e.message}`);
    }
  }

  evict() {
    while ((this.bySha.size > this.maxEntries || this.bytes > this.maxBytes) && this.bySha.size > 1) {
      const [sha, e] = this.bySha.entries().next().value;
      this.bySha.delete(sha);
      this.bytes -= e.size;
    }
  }
}

function describeFsError(e) {
  switch (e && e.code) {
    case 'ENOENT': return 'No such file or directory';
    case 'EACCES': return 'Permission denied';
    case 'EISDIR': return 'Is a directory';
    case 'ENOTDIR': return 'Not a directory';
    case 'ERR_ACCESS_DENIED': return 'outside the paths the wasm runner may read (/work, /tmp)';
    default: return (e && (e.code || e.message)) || String(e);
  }
}

const cache = new ModuleCache(opts.cacheEntries, opts.cacheMiB * 1048576, Math.floor((opts.maxMemoryMiB * 1048576) / WASM_PAGE));

// ---------------------------------------------------------------- worker sources
// Each function below is stringified and evaluated as a worker (eval: true),
// so it may use nothing from this module's scope: only require() and
// workerData.

function wasiWorkerMain() {
  const { parentPort } = require('node:worker_threads');
  const { WASI } = require('node:wasi');
  const fs = require('node:fs');

  let current = null; // a strong reference to the running WASI object

  function run(m) {
    const wasi = new WASI({
      version: 'preview1',
      args: m.argv,
      env: m.env,
      preopens: m.preopens,
      stdin: m.fds[0],
      stdout: m.fds[1],
      stderr: m.fds[2],
      returnOnExit: true,
    });
    let instance;
    try {
      instance = new WebAssembly.Instance(m.module, wasi.getImportObject());
    } catch (e) {
      return { exit: 127, refused: `${m.argv[0]}: cannot instantiate (a WASI preview 1 command needs only wasi_snapshot_preview1 imports): ${e.message}` };
    }
    if (typeof instance.exports._start !== 'function' || !(instance.exports.memory instanceof WebAssembly.Memory)) {
      return { exit: 127, refused: `${m.argv[0]}: not a WASI command module (no _start or memory export)` };
    }
    current = wasi;
    // A worker goes back to the pool after its job, but not one whose
    // instance grew big: its memory would stay until the next GC; ending the
    // worker frees it now.
    const big = () => instance.exports.memory.buffer.byteLength > 64 * 1048576;
    try {
      const code = wasi.start(instance);
      return { exit: (Number(code) >>> 0) & 0xff, retire: big() };
    } catch (e) {
      // RuntimeError: unreachable, out-of-bounds access, division by zero...
      // RangeError: the wasm stack overflowed.
      const isTrap = e instanceof WebAssembly.RuntimeError || e instanceof RangeError;
      const msg = String((e && e.message) || e);
      try { fs.writeSync(m.fds[2], isTrap ? `wasm trap: ${msg}\n` : `wasm runner: ${msg}\n`); } catch { /* stderr gone */ }
      return isTrap ? { exit: 134, trap: msg, retire: big() } : { exit: 1, retire: true };
    } finally {
      current = null;
    }
  }

  parentPort.on('message', (m) => {
    let res;
    try {
      res = run(m);
    } catch (e) {
      res = { exit: 127, refused: `wasm runner: ${(e && e.message) || e}`, retire: true };
    }
    parentPort.postMessage({ type: 'done', id: m.id, ...res });
  });
  parentPort.postMessage({ type: 'ready' });
}

// Shared by the Pyodide and QuickJS workers (prepended to their source).
function ioHelpers() {
  const fs = require('node:fs');
  const sleepCell = new Int32Array(new SharedArrayBuffer(4));
  function writeAll(fd, buf) {
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(fd, buf, off, buf.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN') { Atomics.wait(sleepCell, 0, 0, 2); continue; }
        throw e;
      }
    }
    return buf.length;
  }
  function readSome(fd, buf) {
    for (;;) {
      try {
        return fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        if (e.code === 'EAGAIN') { Atomics.wait(sleepCell, 0, 0, 2); continue; }
        if (e.code === 'EOF') return 0;
        throw e;
      }
    }
  }
  function readAll(fd) {
    const parts = [];
    const buf = Buffer.alloc(65536);
    for (;;) {
      const n = readSome(fd, buf);
      if (n <= 0) break;
      parts.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(parts);
  }
  return { writeAll, readSome, readAll };
}

const PYTHON_SETUP = String.raw`
import sys, os, json, builtins, traceback, types, atexit

_state = {
    "builtins": dict(builtins.__dict__),
    "path": list(sys.path),
    "main": sys.modules["__main__"],
    "recursionlimit": sys.getrecursionlimit(),
    "environ": dict(os.environ),
}

def _exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        print(c, file=sys.stderr)
    except Exception:
        pass
    return 1

def _report(e):
    # The traceback without this module's own frame, as CPython prints it.
    tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
    e = e.with_traceback(tb)
    try:
        sys.excepthook(type(e), e, tb)
    except BaseException:
        traceback.print_exception(type(e), e, tb)

def run(spec_json):
    spec = json.loads(spec_json)
    sys.argv = list(spec["argv"])
    os.environ.clear()
    os.environ.update(spec["env"])
    try:
        os.chdir(spec["cwd"])
    except OSError:
        os.chdir("/")
    mode = spec["mode"]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    rc = 0
    try:
        if mode == "c":
            sys.path[:] = [""] + _state["path"]
            exec(compile(spec["code"], "<string>", "exec"), main.__dict__)
        elif mode == "file" or mode == "stdin":
            if mode == "stdin":
                name = "<stdin>"
                src = sys.stdin.buffer.read()
                sys.path[:] = [""] + _state["path"]
            else:
                name = spec["file"]
                full = os.path.join(spec["cwd"], name)
                try:
                    with open(full, "rb") as f:
                        src = f.read()
                except OSError as e:
                    sys.stderr.write("%s: can't open file %r: [Errno %s] %s\n" % (spec["exe"], full, e.errno, e.strerror))
                    return 2
                sys.path[:] = [os.path.dirname(os.path.abspath(full))] + _state["path"]
                main.__file__ = name
            exec(compile(src, name, "exec"), main.__dict__)
        elif mode == "m":
            import runpy
            sys.path[:] = [os.getcwd()] + _state["path"]
            runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
        elif mode == "version":
            print("Python " + sys.version.split()[0])
    except SystemExit as e:
        rc = _exit_code(e)
    except BaseException as e:
        _report(e)
        rc = 1
    finally:
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
        for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                s.flush()
            except BaseException:
                pass
    return rc

def cleanup():
    # After every run (once its reply is on its way): put the interpreter back
    # as it was after start-up, so that no state carries over to the next run.
    # Builtins restored; every module imported by the run dropped (re-imported
    # on demand); attributes of already-loaded modules that the run rebound,
    # added or deleted restored; std streams, hooks, argv, path, environment
    # and cwd reset.
    atexit._clear()
    sys.modules["__main__"] = _state["main"]
    b = builtins.__dict__
    b.clear()
    b.update(_state["builtins"])
    for name in list(sys.modules):
        if name not in _state["modules"]:
            del sys.modules[name]
    # (list comparisons run in C and short-cut on identity: ~0.4 ms for the
    # ~180 modules loaded at start-up; a per-item loop in Python takes 3 ms)
    for d, keys, values in _state["snapshot"]:
        if len(d) != len(keys) or list(d.values()) != values or list(d) != keys:
            saved = dict(zip(keys, values))
            for k in [k for k in d if k not in saved]:
                del d[k]
            d.update(saved)
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    sys.excepthook = sys.__excepthook__
    sys.setrecursionlimit(_state["recursionlimit"])
    sys.argv = [""]
    sys.path[:] = _state["path"]
    os.environ.clear()
    os.environ.update(_state["environ"])
    try:
        os.chdir("/")
    except OSError:
        pass

def finish_setup():
    # Called after a warm-up run, so that what every run imports at run time
    # is part of the baseline.
    _state["modules"] = set(sys.modules)
    snap = []
    for name, m in list(sys.modules.items()):
        if m is None or name in ("sys", "builtins", "__main__"):
            continue
        d = getattr(m, "__dict__", None)
        if type(d) is dict:
            snap.append((d, list(d), list(d.values())))
    _state["snapshot"] = snap

_state["modules"] = set(sys.modules)
_state["snapshot"] = []
`;

function pythonWorkerMain() {
  const { parentPort, workerData } = require('node:worker_threads');
  const fs = require('node:fs');
  const os = require('node:os');
  const { writeAll, readSome } = ioHelpers();

  // Emscripten's NODEFS reads process.binding('constants'), which the
  // permission model forbids; hand it the same constants.
  const origBinding = process.binding;
  process.binding = function (name) {
    if (name === 'constants') return { fs: fs.constants, os: os.constants };
    return origBinding.call(process, name);
  };

  let cur = null; // the running job: {fds}
  const out = (i) => (buf) => {
    if (!cur) { process.stderr.write(Buffer.from(buf)); return buf.length; }
    return writeAll(cur.fds[i], buf);
  };

  (async () => {
    const { loadPyodide } = await import(workerData.pyodideURL);
    const py = await loadPyodide({
      indexURL: workerData.pyodideDir + '/',
      env: { HOME: '/home/pyodide' },
      stdout: (s) => process.stderr.write(s + '\n'),
      stderr: (s) => process.stderr.write(s + '\n'),
    });
    py.setStdout({ write: out(1), isatty: false });
    py.setStderr({ write: out(2), isatty: false });
    py.setStdin({ read: (buf) => (cur ? readSome(cur.fds[0], buf) : 0), isatty: false });
    for (const [at, host] of Object.entries(workerData.mounts)) {
      try {
        if (!fs.statSync(host).isDirectory()) continue;
        py.FS.mkdirTree(at);
        py.mountNodeFS(at, host);
      } catch (e) {
        process.stderr.write(`wasm-runner: python: cannot mount ${host} at ${at}: ${e.message}\n`);
      }
    }
    const ns = py.toPy({});
    py.runPython(workerData.setup, { globals: ns });
    const run = ns.get('run');
    const cleanup = ns.get('cleanup');
    const finishSetup = ns.get('finish_setup');
    // Warm-up: the first run imports what every run needs.
    run(JSON.stringify({ mode: 'c', code: 'pass', argv: ['-c'], env: {}, cwd: '/', exe: 'python3' }));
    cleanup();
    finishSetup();

    parentPort.on('message', (m) => {
      cur = m;
      let res;
      try {
        res = { exit: run(JSON.stringify(m.spec)) };
      } catch (e) {
        // Not a Python exception (those are handled in run()): the
        // interpreter itself failed (e.g. a fatal error); retire this worker.
        const msg = String((e && e.message) || e);
        try { writeAll(m.fds[2], Buffer.from(`python: fatal error: ${msg}\n`)); } catch { /* gone */ }
        res = e instanceof WebAssembly.RuntimeError ? { exit: 134, trap: msg, retire: true } : { exit: 1, retire: true };
      }
      cur = null;
      parentPort.postMessage({ type: 'done', id: m.id, ...res });
      if (res.retire) return;
      // Off the job's critical path.
      try {
        cleanup();
      } catch (e) {
        process.stderr.write(`wasm-runner: python: cleanup failed, retiring the interpreter: ${(e && e.message) || e}\n`);
        process.exit(1);
      }
    });
    parentPort.postMessage({ type: 'ready', version: py.version });
  })().catch((e) => {
    parentPort.postMessage({ type: 'fatal', message: String((e && e.message) || e) });
  });
}

const JS_PRELUDE = String.raw`
(function (h) {
  'use strict';
  const fmt = (v, depth, seen) => {
    switch (typeof v) {
      case 'string': return depth ? JSON.stringify(v) : v;
      case 'function': return '[Function: ' + (v.name || '(anonymous)') + ']';
      case 'bigint': return v + 'n';
      case 'symbol': return v.toString();
      case 'undefined': return 'undefined';
      case 'object': {
        if (v === null) return 'null';
        if (v instanceof Error) return v.stack ? v.name + ': ' + v.message + '\n' + v.stack.replace(/\n$/, '') : String(v);
        if (seen.includes(v)) return '[Circular]';
        if (depth > 3) return Array.isArray(v) ? '[Array]' : '[Object]';
        const s = seen.concat([v]);
        if (Array.isArray(v)) return v.length ? '[ ' + v.map((x) => fmt(x, depth + 1, s)).join(', ') + ' ]' : '[]';
        if (v instanceof Date) return v.toISOString();
        if (v instanceof RegExp) return String(v);
        const keys = Object.keys(v);
        const body = keys.map((k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)) + ': ' + fmt(v[k], depth + 1, s));
        return keys.length ? '{ ' + body.join(', ') + ' }' : '{}';
      }
      default: return String(v);
    }
  };
  const line = (args) => args.map((a) => fmt(a, 0, [])).join(' ') + '\n';
  const write = h.write, exit = h.exit;
  const console = {
    log: (...a) => write(1, line(a)),
    info: (...a) => write(1, line(a)),
    debug: (...a) => write(1, line(a)),
    warn: (...a) => write(2, line(a)),
    error: (...a) => write(2, line(a)),
    trace: (...a) => write(2, line(['Trace:'].concat(a))),
  };
  const process = {
    argv: [],
    env: {},
    exit: (code) => exit(code === undefined ? 0 : Number(code) | 0),
    stdout: { write: (s) => (write(1, String(s)), true) },
    stderr: { write: (s) => (write(2, String(s)), true) },
  };
  globalThis.console = console;
  globalThis.print = console.log;
  globalThis.process = process;
  // Called once, by the runner, just before the job's code.
  globalThis.__sbx_job = (argv, env) => {
    process.argv = argv;
    process.env = env;
    globalThis.scriptArgs = argv.slice(1);
    delete globalThis.__sbx_job;
  };
})(globalThis.__sbx);
delete globalThis.__sbx;
`;

function jsWorkerMain() {
  const { parentPort, workerData } = require('node:worker_threads');
  const fs = require('node:fs');
  const { createRequire } = require('node:module');
  const { writeAll, readAll } = ioHelpers();
  let QJS = null;

  // A fresh QuickJS runtime and context per job, prepared (with the prelude
  // evaluated) while the worker is idle; the job only sets argv/env.
  function prepare() {
    const rt = QJS.newRuntime();
    rt.setMemoryLimit(workerData.memoryLimit);
    rt.setMaxStackSize(workerData.stackSize);
    const st = { fds: null, exitCode: null };
    rt.setInterruptHandler(() => st.exitCode !== null);
    const ctx = rt.newContext();
    const handles = [];
    const keep = (h) => { handles.push(h); return h; };
    const host = keep(ctx.newObject());
    const write = keep(ctx.newFunction('write', (fdH, sH) => {
      if (st.exitCode !== null || !st.fds) return;
      const fd = ctx.getNumber(fdH) === 2 ? 2 : 1;
      writeAll(st.fds[fd], Buffer.from(ctx.getString(sH), 'utf8'));
    }));
    const exit = keep(ctx.newFunction('exit', (cH) => {
      st.exitCode = (ctx.getNumber(cH) >>> 0) & 0xff;
      // Unwinds now; the interrupt handler stops any catch that swallows it.
      return { error: ctx.newError('process.exit') };
    }));
    ctx.setProp(host, 'write', write);
    ctx.setProp(host, 'exit', exit);
    ctx.setProp(ctx.global, '__sbx', host);
    const pre = ctx.evalCode(workerData.prelude, '<prelude>');
    if (pre.error) {
      const d = ctx.dump(pre.error);
      pre.error.dispose();
      throw new Error('prelude failed: ' + JSON.stringify(d));
    }
    pre.value.dispose();
    return { rt, ctx, st, handles };
  }

  function dispose(p) {
    for (const h of p.handles.reverse()) { try { if (h.alive) h.dispose(); } catch { /* ignore */ } }
    try { p.ctx.dispose(); } catch { /* leaked handles: the runtime goes anyway */ }
    try { p.rt.dispose(); } catch { /* idem */ }
  }

  function run(p, m) {
    const { spec, fds } = m;
    const { ctx, rt, st } = p;
    st.fds = fds;
    let src, filename;
    if (spec.mode === 'e' || spec.mode === 'p') {
      src = spec.code;
      filename = '[eval]';
    } else if (spec.mode === 'file') {
      try {
        src = fs.readFileSync(spec.host, 'utf8');
      } catch (e) {
        writeAll(fds[2], Buffer.from(`node: cannot read ${spec.file}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.code || e.message}\n`));
        return { exit: 1 };
      }
      if (src.startsWith('#!')) src = '//' + src.slice(2);
      filename = spec.file;
    } else {
      src = readAll(fds[0]).toString('utf8');
      filename = '[stdin]';
    }

    const report = (errH) => {
      if (st.exitCode !== null) return st.exitCode;
      let d;
      try { d = ctx.dump(errH); } catch { d = '<unprintable>'; }
      let text;
      if (d && typeof d === 'object' && typeof d.message === 'string') {
        let stack = String(d.stack || '').split('\n').filter((l) => l !== '');
        if (stack.length > 20) stack = [...stack.slice(0, 20), `    ... ${stack.length - 20} more frames`];
        text = `${d.name || 'Error'}: ${d.message}\n${stack.map((l) => l + '\n').join('')}`;
      } else {
        text = `Uncaught ${typeof d === 'string' ? d : JSON.stringify(d)}\n`;
      }
      writeAll(fds[2], Buffer.from(text, 'utf8'));
      return 1;
    };

    const setJob = ctx.evalCode(`__sbx_job(${JSON.stringify(spec.argv)}, ${JSON.stringify(spec.env)})`, '<job>');
    if (setJob.error) { setJob.error.dispose(); throw new Error('cannot set argv/env'); }
    setJob.value.dispose();

    const r = ctx.evalCode(src, filename);
    if (r.error) {
      const rc = report(r.error);
      r.error.dispose();
      return { exit: rc };
    }
    if (spec.mode === 'p') {
      const con = ctx.getProp(ctx.global, 'console');
      const log = ctx.getProp(con, 'log');
      const pr = ctx.callFunction(log, ctx.undefined, r.value);
      if (pr.error) pr.error.dispose(); else pr.value.dispose();
      log.dispose();
      con.dispose();
    }
    r.value.dispose();
    for (;;) {
      const jobs = rt.executePendingJobs(-1);
      if (jobs.error) {
        const rc = report(jobs.error);
        jobs.error.dispose();
        return { exit: rc };
      }
      if (!jobs.value) break;
    }
    return { exit: st.exitCode !== null ? st.exitCode : 0 };
  }

  let prepared = null;
  (async () => {
    const req = createRequire(workerData.modules + '/');
    const core = req('quickjs-emscripten-core');
    const variant = req('@jitl/quickjs-wasmfile-release-sync');
    QJS = await core.newQuickJSWASMModuleFromVariant(variant);
    prepared = prepare();
    parentPort.on('message', (m) => {
      let res;
      let p = null;
      try {
        p = prepared || prepare();
        prepared = null;
        res = run(p, m);
      } catch (e) {
        const msg = String((e && e.message) || e);
        try { writeAll(m.fds[2], Buffer.from(`node: engine error: ${msg}\n`)); } catch { /* gone */ }
        res = e instanceof WebAssembly.RuntimeError ? { exit: 134, trap: msg, retire: true } : { exit: 1, retire: true };
      }
      if (p) p.st.fds = null;
      parentPort.postMessage({ type: 'done', id: m.id, ...res });
      // Off the job's critical path: drop this context, prepare the next.
      if (p) dispose(p);
      if (!res.retire) {
        try { prepared = prepare(); } catch { prepared = null; }
      }
    });
    parentPort.postMessage({ type: 'ready' });
  })().catch((e) => {
    parentPort.postMessage({ type: 'fatal', message: String((e && e.message) || e) });
  });
}

// Worker sources run as ES modules (the runner is started with
// --input-type=module, which eval workers inherit), where there is no
// require(): hand them one for built-ins.
const workerSource = (...fns) =>
  `((require) => {\n${fns.map((f, i) => (i === fns.length - 1 ? `(${f})();` : `const ${f.name} = ${f};`)).join('\n')}\n})(` +
  `typeof require === 'function' ? require : (id) => process.getBuiltinModule(id));\n`;

const ENGINES = {
  wasi: {
    src: workerSource(wasiWorkerMain),
    data: {},
  },
  python: {
    src: workerSource(ioHelpers, pythonWorkerMain),
    data: {
      pyodideURL: pathToFileURL(path.join(opts.modules, 'pyodide', 'pyodide.mjs')).href,
      pyodideDir: path.join(opts.modules, 'pyodide'),
      mounts: PREOPENS,
      setup: PYTHON_SETUP,
    },
  },
  js: {
    src: workerSource(ioHelpers, jsWorkerMain),
    data: {
      modules: opts.modules,
      prelude: JS_PRELUDE,
      memoryLimit: opts.maxMemoryMiB * 1048576,
      stackSize: 512 * 1024,
    },
  },
};

// ---------------------------------------------------------------- workers and pools

let nextJobId = 1;

class EngineWorker {
  constructor(kind, pool) {
    this.kind = kind;
    this.pool = pool;
    this.jobs = 0;
    this.dead = false;
    this.job = null; // {id, resolve, reject}
    this.readyP = new Promise((res, rej) => { this.readyRes = res; this.readyRej = rej; });
    this.readyP.catch(() => {});
    this.exitedP = new Promise((res) => { this.exitedRes = res; });
    const eng = ENGINES[kind];
    this.w = new Worker(eng.src, { eval: true, workerData: eng.data, stdout: true, stderr: true });
    this.w.stdout.on('data', (d) => process.stderr.write(d));
    this.w.stderr.on('data', (d) => process.stderr.write(d));
    this.w.on('message', (m) => this.onMessage(m));
    this.w.on('error', (e) => {
      log(`${kind} worker error: ${(e && e.stack) || e}`);
    });
    this.w.on('exit', () => {
      this.dead = true;
      this.readyRej(new Error(`${kind} engine exited while starting`));
      if (this.job) {
        const j = this.job;
        this.job = null;
        j.reject(new Error(`${kind} engine exited`));
      }
      this.exitedRes();
      this.pool.onExit(this);
    });
  }

  onMessage(m) {
    if (m.type === 'ready') {
      this.readyRes();
    } else if (m.type === 'fatal') {
      log(`${this.kind} engine failed to start: ${m.message}`);
      this.readyRej(new Error(m.message));
      this.kill();
    } else if (m.type === 'done' && this.job && this.job.id === m.id) {
      const j = this.job;
      this.job = null;
      j.resolve(m);
    }
  }

  run(msg) {
    this.jobs++;
    return new Promise((resolve, reject) => {
      this.job = { id: msg.id, resolve, reject };
      this.w.postMessage(msg);
    });
  }

  kill() {
    if (!this.dead) this.w.terminate().catch(() => {});
    return this.exitedP;
  }
}

class Pool {
  // minIdle: ready workers kept in reserve (spawned ahead of demand).
  // keepOne: once used, keep at least one worker alive (idle or busy).
  constructor(kind, { minIdle = 0, maxIdle = 1, maxJobs = Infinity, keepOne = false, eager = false }) {
    Object.assign(this, { kind, minIdle, maxIdle, maxJobs, keepOne });
    this.active = eager;
    this.idle = [];
    this.starting = new Set();
    this.busy = new Set();
    this.waiters = [];
    this.failedAt = 0;
    if (eager) this.topUp();
  }

  spawn() {
    const ew = new EngineWorker(this.kind, this);
    this.starting.add(ew);
    ew.readyP.then(
      () => {
        this.starting.delete(ew);
        this.give(ew);
      },
      (err) => {
        this.starting.delete(ew);
        this.failedAt = Date.now();
        const w = this.waiters.shift();
        if (w) w.reject(err);
      },
    );
  }

  give(ew) {
    if (ew.dead) return;
    const w = this.waiters.shift();
    if (w) {
      this.busy.add(ew);
      w.resolve(ew);
    } else if (this.idle.length < this.maxIdle) {
      this.idle.push(ew);
    } else {
      ew.kill();
    }
  }

  acquire() {
    this.active = true;
    const p = new Promise((resolve, reject) => {
      const ew = this.idle.pop();
      if (ew) {
        this.busy.add(ew);
        resolve(ew);
        return;
      }
      this.waiters.push({ resolve, reject });
      if (this.starting.size < this.waiters.length) this.spawn();
    });
    this.topUp();
    return p;
  }

  release(ew, retire) {
    this.busy.delete(ew);
    if (retire || ew.dead || ew.jobs >= this.maxJobs) ew.kill();
    else this.give(ew);
    this.topUp();
  }

  onExit(ew) {
    this.busy.delete(ew);
    this.starting.delete(ew);
    const i = this.idle.indexOf(ew);
    if (i >= 0) this.idle.splice(i, 1);
    this.topUp();
  }

  topUp() {
    if (!this.active || Date.now() - this.failedAt < 5000) return;
    while (this.idle.length + this.starting.size - this.waiters.length < this.minIdle) this.spawn();
    if (this.keepOne && this.idle.length + this.starting.size + this.busy.size === 0) this.spawn();
  }
}

const pools = {
  // One reserve worker always ready; finished workers go back to the pool
  // (a WASI instance cannot touch its worker's JS state) up to 2 idle.
  wasi: new Pool('wasi', { minIdle: 1, maxIdle: 2, maxJobs: 500, eager: true }),
  python: new Pool('python', { maxIdle: 1, keepOne: true }),
  js: new Pool('js', { maxIdle: 1, keepOne: true }),
};

// ---------------------------------------------------------------- requests

// -> {pid, argv, env, cwd} | null (incomplete) | throws Error (malformed)
function parseRequest(buf) {
  let pos = 0;
  const need = (n) => {
    if (pos + n > buf.length) throw INCOMPLETE;
  };
  const u32 = () => {
    need(4);
    const v = buf.readUInt32LE(pos);
    pos += 4;
    return v;
  };
  const bytes = () => {
    const n = u32();
    if (n > MAX_REQUEST) throw new Error('field too long');
    need(n);
    const s = buf.toString('utf8', pos, pos + n);
    pos += n;
    return s;
  };
  try {
    need(4);
    if (buf.toString('latin1', 0, 4) !== 'SBX1') throw new Error('bad magic (expected SBX1)');
    pos = 4;
    const pid = u32();
    const argc = u32();
    if (argc < 1 || argc > MAX_REQUEST / 4) throw new Error('bad argc');
    const argv = [];
    for (let i = 0; i < argc; i++) argv.push(bytes());
    const envc = u32();
    if (envc > MAX_REQUEST / 4) throw new Error('bad envc');
    const env = {};
    for (let i = 0; i < envc; i++) {
      const kv = bytes();
      const eq = kv.indexOf('=');
      if (eq > 0) env[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    const cwd = bytes();
    const fds = [u32(), u32(), u32()];
    if (pid < 1 || pid > 0x7fffffff) throw new Error('bad pid');
    if (fds.some((fd) => fd > 0x7fffffff)) throw new Error('bad fd number');
    return { pid, argv, env, cwd: cwd.startsWith('/') ? cwd : '/', fds };
  } catch (e) {
    if (e === INCOMPLETE) return null;
    throw e;
  }
}
const INCOMPLETE = Symbol('incomplete');

// Opens the job's stdin/stdout/stderr -- the client's fds numbered in the
// request -- through /proc (the client made itself dumpable; same uid).
// Anonymous pipes reopen without blocking; named FIFOs could block and sockets
// cannot be reopened, so both are refused.
function openClientFds(pid, nums) {
  const fds = [];
  try {
    for (let i = 0; i < 3; i++) {
      const p = `/proc/${pid}/fd/${nums[i]}`;
      let target;
      try {
        target = fs.readlinkSync(p);
      } catch (e) {
        throw new Error(`cannot reach fd ${nums[i]} of client process ${pid}: ${e.code || e.message}`);
      }
      if (target.startsWith('socket:')) throw new Error(`fd ${nums[i]} of the client is a socket; the wasm runner needs a pipe, a file or /dev/null`);
      if (target.startsWith('/') && fs.statSync(p).isFIFO()) throw new Error(`fd ${nums[i]} of the client is a named FIFO (${target}); use an anonymous pipe`);
      const C = fs.constants;
      const flags = i === 0 ? C.O_RDONLY | C.O_NOCTTY : C.O_WRONLY | C.O_APPEND | C.O_NOCTTY;
      try {
        fds.push(fs.openSync(p, flags));
      } catch (e) {
        throw new Error(`cannot open fd ${nums[i]} (${target}) of client process ${pid}: ${e.code || e.message}`);
      }
    }
  } catch (e) {
    closeFds(fds);
    throw e;
  }
  return fds;
}

function closeFds(fds) {
  for (const fd of fds) {
    try { fs.closeSync(fd); } catch { /* already gone */ }
  }
  fds.length = 0;
}

function resolveJobPath(cwd, p) {
  return path.posix.resolve(cwd || '/', p);
}

// python3 [flags] (-c CODE | -m MOD | FILE | - | nothing) [args...]
function pythonSpec(req) {
  const a = req.argv;
  const exe = a[0];
  let i = 1;
  const spec = { exe, env: req.env, cwd: hostlessCwd(req.cwd) };
  for (; i < a.length; i++) {
    const x = a[i];
    if (x === '-c' || x === '-m') {
      if (i + 1 >= a.length) return { error: `Argument expected for the ${x} option`, code: 2 };
      if (x === '-c') return { ...spec, mode: 'c', code: a[i + 1], argv: ['-c', ...a.slice(i + 2)] };
      return { ...spec, mode: 'm', module: a[i + 1], argv: [a[i + 1], ...a.slice(i + 2)] };
    }
    if (x.startsWith('-c') && x.length > 2) return { ...spec, mode: 'c', code: x.slice(2), argv: ['-c', ...a.slice(i + 1)] };
    if (x === '-V' || x === '--version') return { ...spec, mode: 'version', argv: [exe] };
    if (x === '-W' || x === '-X') { i++; continue; }
    if (/^-[uBEsSIOqbdvR]+$/.test(x) || x === '-OO' || /^-[WX]./.test(x)) continue;
    if (x === '-') return { ...spec, mode: 'stdin', argv: ['-', ...a.slice(i + 1)] };
    if (x === '--') { i++; break; }
    if (x.startsWith('-')) return { error: `Unknown option: ${x}`, code: 2 };
    break;
  }
  if (i >= a.length) return { ...spec, mode: 'stdin', argv: [''] };
  return { ...spec, mode: 'file', file: a[i], argv: a.slice(i) };
}

// Python sees /work and /tmp at their own names (NODEFS mounts), so it gets the
// job's cwd unmapped.
function hostlessCwd(cwd) {
  return cwd || '/';
}

// node [flags] (-e CODE | -p CODE | FILE | - | nothing) [args...]
function jsSpec(req) {
  const a = req.argv;
  const spec = { env: req.env };
  let i = 1;
  for (; i < a.length; i++) {
    const x = a[i];
    if (x === '-e' || x === '--eval' || x === '-p' || x === '--print') {
      if (i + 1 >= a.length) return { error: `${x} requires an argument`, code: 9 };
      return { ...spec, mode: x === '-p' || x === '--print' ? 'p' : 'e', code: a[i + 1], argv: ['node', ...a.slice(i + 2)] };
    }
    if (x === '-') return { ...spec, mode: 'stdin', argv: ['node', ...a.slice(i + 1)] };
    if (x === '--') { i++; break; }
    if (x.startsWith('-')) continue; // node's own flags mean nothing to QuickJS
    break;
  }
  if (i >= a.length) return { ...spec, mode: 'stdin', argv: ['node'] };
  const file = resolveJobPath(req.cwd, a[i]);
  return { ...spec, mode: 'file', file, host: hostPath(file), argv: ['node', file, ...a.slice(i + 1)] };
}

function writeToFd(fd, text) {
  try { fs.writeSync(fd, text); } catch { /* client gone */ }
}

async function execute(job, req) {
  const argv0 = req.argv[0];
  const kind = classify(argv0);
  if (!kind) {
    return refused(`the wasm profile runs WASI modules (*.wasm), python (Pyodide) and javascript (QuickJS); '${argv0}' is none of them`);
  }
  const msg = { type: 'job', id: nextJobId++ };
  if (kind === 'wasi') {
    const file = resolveJobPath(req.cwd, argv0);
    try {
      const c = await cache.get(hostPath(file), argv0);
      msg.module = c.module;
      job.note = c.hit ? 'cache hit' : `cache miss, compiled in ${c.ms.toFixed(1)} ms`;
    } catch (e) {
      return refused(e.message);
    }
    msg.argv = req.argv;
    msg.env = req.env;
    msg.preopens = PREOPENS;
  } else if (kind === 'python') {
    if (!haveFile(path.join(ENGINES.python.data.pyodideDir, 'pyodide.mjs')) || !haveFile(path.join(ENGINES.python.data.pyodideDir, 'pyodide.asm.wasm'))) {
      return refused(`python is not available: Pyodide is not installed under ${opts.modules} (scripts/wasm-deps.sh installs it)`);
    }
    const spec = pythonSpec(req);
    if (spec.error) return { ...refused(`${argv0}: ${spec.error}`), exit: spec.code };
    msg.spec = spec;
  } else {
    if (!haveFile(path.join(opts.modules, '@jitl', 'quickjs-wasmfile-release-sync', 'package.json')) ||
        !haveFile(path.join(opts.modules, 'quickjs-emscripten-core', 'package.json'))) {
      return refused(`javascript is not available: quickjs-emscripten is not installed under ${opts.modules} (scripts/wasm-deps.sh installs it)`);
    }
    const spec = jsSpec(req);
    if (spec.error) return { ...refused(`${argv0}: ${spec.error}`), exit: spec.code };
    msg.spec = spec;
  }
  if (job.aborted) return null;

  try {
    job.fds = openClientFds(req.pid, req.fds);
  } catch (e) {
    return refused(`wasm runner: ${e.message}`);
  }
  msg.fds = job.fds;
  // The client may now close its own copies of these ends: from here on EOF
  // on them is the job's.
  try { job.sock.write('{"started":true}\n'); } catch { /* gone: abort() follows */ }

  let ew;
  try {
    ew = await pools[kind].acquire();
  } catch (e) {
    return refused(`${kind === 'js' ? 'javascript' : kind} engine failed to start: ${e.message}`);
  }
  if (job.aborted) {
    pools[kind].release(ew, false);
    return null;
  }
  job.worker = ew;
  let done;
  try {
    done = await ew.run(msg);
  } catch (e) {
    // The worker exited under the job: killed for a disconnect, or crashed.
    job.worker = null;
    pools[kind].release(ew, true);
    if (job.aborted) return null;
    writeToFd(job.fds[2], `wasm runner: ${e.message}\n`);
    return { exit: 1 };
  }
  job.worker = null;
  pools[kind].release(ew, !!done.retire);
  if (done.refused !== undefined) return { exit: done.exit, refused: done.refused };
  if (done.trap !== undefined) return { exit: done.exit, trap: done.trap };
  return { exit: done.exit };
}

function serve(sock) {
  const job = { sock, aborted: false, finished: false, worker: null, fds: [], parsed: false, note: '' };
  const chunks = [];
  let total = 0;
  const t0 = process.hrtime.bigint();

  const abort = () => {
    if (job.finished || job.aborted) return;
    job.aborted = true;
    if (job.worker) job.worker.kill(); // the job's fds close once it has exited
  };
  sock.on('error', () => {});
  sock.on('end', abort);
  sock.on('close', abort);
  sock.on('data', (d) => {
    if (job.parsed) return;
    chunks.push(d);
    total += d.length;
    if (total > MAX_REQUEST) {
      job.parsed = true;
      reply(sock, refused(`wasm runner: request larger than ${MAX_REQUEST} bytes`));
      return;
    }
    let req;
    try {
      req = parseRequest(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    } catch (e) {
      job.parsed = true;
      reply(sock, refused(`wasm runner: malformed request: ${e.message}`));
      return;
    }
    if (!req) {
      if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks));
      return;
    }
    job.parsed = true;
    run(job, req, sock, t0);
  });
}

async function run(job, req, sock, t0) {
  let res;
  try {
    res = await execute(job, req);
  } catch (e) {
    log(`internal error: ${(e && e.stack) || e}`);
    res = refused(`wasm runner: internal error: ${(e && e.message) || e}`);
  }
  closeFds(job.fds);
  job.finished = true;
  if (opts.verbose) {
    const us = Number(process.hrtime.bigint() - t0) / 1000;
    log(`job pid=${req.pid} argv0=${req.argv[0]} -> ${job.aborted ? 'aborted' : JSON.stringify(res)} in ${us.toFixed(0)} us${job.note ? ` (${job.note})` : ''}`);
  }
  if (!job.aborted && res) reply(sock, res);
}

function reply(sock, obj) {
  try { sock.end(JSON.stringify(obj) + '\n'); } catch { /* client gone */ }
}

// ---------------------------------------------------------------- main

process.on('uncaughtException', (e) => log(`uncaught: ${(e && e.stack) || e}`));
process.on('unhandledRejection', (e) => log(`unhandled rejection: ${(e && e.stack) || e}`));

const server = net.createServer({ allowHalfOpen: false }, serve);
server.on('error', (e) => fatal(`cannot listen on @${opts.socket}: ${e.message}`));
server.listen('\0' + opts.socket, () => {
  if (opts.verbose) log(`listening on @${opts.socket} (modules ${opts.modules}${opts.preopenRoot ? `, preopen root ${opts.preopenRoot}` : ''})`);
});
