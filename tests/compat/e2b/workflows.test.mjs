// Agent workflows through the real, unmodified `e2b` and
// `@e2b/code-interpreter` SDKs against a real sandboxd (started by
// tests/compat/test_e2b_sdk.py, which sets E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY for tenant alice and SBX_BOB_KEY for tenant bob).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox as Base, CommandExitError, NotFoundError, SandboxError, TimeoutError, Volume,
  VolumeError, VolumeNotFoundError } from 'e2b'
import { Sandbox } from '@e2b/code-interpreter'

const BOB = process.env.SBX_BOB_KEY
const TEMPLATE = process.env.SBX_E2B_TEMPLATE // undefined: the SDK's default template
let sbx

const until = async (pred, ms = 30000, what = 'condition') => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await pred()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

before(async () => {
  const opts = { envs: { GREETING: 'bonjour' }, metadata: { agent: 'compat-test' } }
  sbx = TEMPLATE ? await Sandbox.create(TEMPLATE, opts) : await Sandbox.create(opts)
})
after(async () => { await sbx?.kill() })

test('create and list: the sandbox is listed, running, with its template', async () => {
  const items = await Base.list().nextItems()
  const mine = items.find((s) => s.sandboxId === sbx.sandboxId)
  assert.ok(mine, 'listed')
  assert.equal(mine.state, 'running')
  assert.equal(mine.templateId, TEMPLATE ?? 'code-interpreter-v1')
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.ok(info.endAt > info.startedAt)
  assert.deepEqual(info.metadata, { agent: 'compat-test' })
  assert.equal(await sbx.isRunning(), true)
  const filtered = await Base.list({ query: { metadata: { agent: 'compat-test' } } }).nextItems()
  assert.deepEqual(filtered.map((s) => s.sandboxId), [sbx.sandboxId])
  assert.equal((await Base.list({ query: { metadata: { agent: 'other' } } }).nextItems()).length, 0)
  await sbx.setTimeout(900000)
  const later = await sbx.getInfo()
  assert.ok(later.endAt - later.startedAt >= 890000, 'the new timeout counts from now')
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.commands.run('echo $GREETING')).stdout, 'bonjour\n')
})

test('commands.run: stdout, stderr, exit codes, envs, cwd', async () => {
  const r = await sbx.commands.run('echo out; echo err >&2; echo $GREETING $EXTRA',
    { envs: { EXTRA: 'monde' } })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out\nbonjour monde\n')
  assert.equal(r.stderr, 'err\n')
  const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' })
  assert.equal(cwd.stdout.trim(), '/tmp')
})

test('commands.run: a failing command throws CommandExitError with its output', async () => {
  await assert.rejects(sbx.commands.run('echo partial; echo boom >&2; exit 7'), (e) => {
    assert.ok(e instanceof CommandExitError)
    assert.equal(e.exitCode, 7)
    assert.equal(e.stdout, 'partial\n')
    assert.equal(e.stderr, 'boom\n')
    assert.match(e.error, /exit status 7/)
    return true
  })
})

test('background command: streaming callbacks, list, kill', async () => {
  const seen = []
  const h = await sbx.commands.run('for i in 1 2 3; do echo tick$i; sleep 0.2; done; sleep 300',
    { background: true, onStdout: (d) => seen.push(d) })
  assert.ok(h.pid > 0)
  await until(() => seen.join('').includes('tick3'), 30000, 'three ticks')
  const procs = await sbx.commands.list()
  assert.ok(procs.some((p) => p.pid === h.pid && p.cmd === '/bin/bash'), 'listed while running')
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode !== 0)
  await until(async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid), 30000,
    'killed process gone from the list')
})

test('connect to a running command and read what it prints next', async () => {
  const h = await sbx.commands.run('sleep 0.5; echo later; sleep 300', { background: true })
  const got = []
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
  await until(() => got.join('').includes('later'), 30000, 'output through connect')
  await again.kill()
})

test('stdin: sendStdin reaches the program, closeStdin ends it', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await h.sendStdin('line one\n')
  await h.sendStdin('line two\n')
  await h.closeStdin()
  const r = await h.wait()
  assert.equal(r.stdout, 'line one\nline two\n')
})

test('a command without stdin reads EOF instead of waiting', async () => {
  const r = await sbx.commands.run('cat; echo done', { timeoutMs: 30000 })
  assert.equal(r.stdout, 'done\n')
})

test('pty: an interactive shell echoes what it is sent, resize works', async () => {
  const chunks = []
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(Buffer.from(d)) })
  const text = () => Buffer.concat(chunks).toString()
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo "pty-$((6*7))"\n'))
  await until(() => text().includes('pty-42') && text().includes('30 100'), 30000, 'pty echo')
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('exit\n'))
  const r = await term.wait()
  assert.equal(r.exitCode, 0)
})

test('files: write, read, list, exists, rename, makeDir, remove', async () => {
  const info = await sbx.files.write('/work/dir/a.txt', 'alpha')
  assert.equal(info.path, '/work/dir/a.txt')
  assert.equal(await sbx.files.read('/work/dir/a.txt'), 'alpha')
  await sbx.files.write([{ path: '/work/dir/b.txt', data: 'beta' }, { path: '/work/dir/c.txt', data: 'gamma' }])
  const names = (await sbx.files.list('/work/dir')).map((e) => e.name).sort()
  assert.deepEqual(names, ['a.txt', 'b.txt', 'c.txt'])
  const deep = await sbx.files.list('/work', { depth: 2 })
  assert.ok(deep.some((e) => e.path === '/work/dir/c.txt' && e.type === 'file'))
  assert.equal(await sbx.files.makeDir('/work/dir/sub/deeper'), true)
  assert.equal(await sbx.files.makeDir('/work/dir/sub/deeper'), false, 'exists already')
  const moved = await sbx.files.rename('/work/dir/b.txt', '/work/dir/sub/b2.txt')
  assert.equal(moved.name, 'b2.txt')
  assert.equal((await sbx.files.getInfo('/work/dir/sub')).type, 'dir')
  assert.equal(await sbx.files.exists('/work/dir/b.txt'), false)
  await sbx.files.remove('/work/dir/a.txt')
  assert.equal(await sbx.files.exists('/work/dir/a.txt'), false)
  await assert.rejects(sbx.files.read('/work/dir/a.txt'), (e) => e instanceof NotFoundError)
})

test('files: binary upload and download keep every byte', async () => {
  const blob = randomBytes(300 * 1024)
  blob[0] = 0; blob[1] = 0xff
  await sbx.files.write('/work/bin/blob.bin', blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.length))
  const back = Buffer.from(await sbx.files.read('/work/bin/blob.bin', { format: 'bytes' }))
  assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(blob).digest('hex'))
  const r = await sbx.commands.run('sha256sum /work/bin/blob.bin')
  assert.equal(r.stdout.split(' ')[0], createHash('sha256').update(blob).digest('hex'))
})

test('files: watchDir reports creates, writes and removes', async () => {
  await sbx.files.makeDir('/work/watched')
  const events = []
  const w = await sbx.files.watchDir('/work/watched', (e) => events.push(e))
  await sbx.files.write('/work/watched/new.txt', 'x')
  await sbx.commands.run('echo more >> /work/watched/new.txt; rm /work/watched/new.txt')
  await until(() => events.some((e) => e.type === 'remove' && e.name === 'new.txt'), 30000, 'remove event')
  assert.ok(events.some((e) => e.type === 'create' && e.name === 'new.txt'))
  assert.ok(events.some((e) => e.type === 'write' && e.name === 'new.txt'))
  await w.stop()
})

test('runCode: state kept between calls, stdout, the last expression', async () => {
  const a = await sbx.runCode('counter = 40\nprint("set")')
  assert.deepEqual(a.logs.stdout, ['set\n'])
  const b = await sbx.runCode('counter += 2\ncounter')
  assert.equal(b.text, '42')
  assert.equal(b.error, undefined)
})

test('runCode streams: onStdout and onStderr fire while the code runs', async () => {
  const seen = []
  const at = (kind) => (m) => seen.push({ kind, line: m.line, t: Date.now() })
  const e = await sbx.runCode(
    'import os, sys, time\nprint("first")\nprint("oops", file=sys.stderr)\n' +
    'os.system("echo from-a-child")\ntime.sleep(2)\nprint("second")\n6 * 7',
    { onStdout: at('out'), onStderr: at('err') })
  const end = Date.now()
  assert.equal(e.text, '42')
  // the child writes to the interpreter's own stdout: it may overtake a line
  assert.deepEqual(e.logs.stdout.join('').split('\n').sort(), ['', 'first', 'from-a-child', 'second'])
  assert.deepEqual(e.logs.stderr, ['oops\n'])
  const first = seen.find((s) => s.line.includes('first'))
  const second = seen.find((s) => s.line.includes('second'))
  assert.ok(end - first.t >= 1000, `"first" came ${end - first.t} ms before the end`)
  assert.ok(second.t - first.t >= 1000, `"second" came ${second.t - first.t} ms after "first"`)
  assert.ok(end - seen.find((s) => s.kind === 'err').t >= 1000, 'stderr streamed too')
  assert.ok(end - seen.find((s) => s.line.includes('child')).t >= 1000, "a child's output too")
  const js = []
  await sbx.runCode(
    '(async () => { console.log("a"); await new Promise((r) => setTimeout(r, 2000)); ' +
    'console.log("b") })()',
    { language: 'javascript', onStdout: (m) => js.push({ line: m.line, t: Date.now() }) })
  assert.equal(js.map((m) => m.line).join(''), 'a\nb\n')
  assert.ok(js[1].t - js[0].t >= 1000, `javascript: "b" came ${js[1].t - js[0].t} ms after "a"`)
})

test('runCode: an exception comes back with its traceback', async () => {
  const e = await sbx.runCode('def f():\n    return 1 / 0\nf()')
  assert.equal(e.error.name, 'ZeroDivisionError')
  assert.match(e.error.value, /division by zero/)
  assert.match(e.error.traceback, /in f/)
})

test('runCode: a matplotlib figure is a PNG result', async () => {
  const e = await sbx.runCode(
    'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
    'plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
  assert.equal(e.error, undefined, JSON.stringify(e.error))
  const png = e.results.find((r) => r.png)
  assert.ok(png, 'a png result')
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
})

test('runCode: javascript and separate contexts', async () => {
  const js = await sbx.runCode('const v = 6 * 7; v', { language: 'javascript' })
  assert.equal(js.text, '42')
  const ctx = await sbx.createCodeContext({ language: 'python' })
  await sbx.runCode('counter = -1', { context: ctx })
  assert.equal((await sbx.runCode('counter', { context: ctx })).text, '-1')
  assert.equal((await sbx.runCode('counter')).text, '42', 'the default context kept its own')
  assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  const fresh = await sbx.runCode('counter', { context: ctx })
  assert.equal(fresh.error?.name, 'NameError', 'a restarted context lost its state')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
})

test('getMetrics: what the sandbox uses now, as measured', async () => {
  await sbx.commands.run('head -c 8388608 /dev/urandom > /work/ballast.bin')
  const [m, ...more] = await sbx.getMetrics()
  assert.equal(more.length, 0, 'one sample: the current one')
  assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60000, String(m.timestamp))
  assert.ok(m.cpuCount >= 1 && m.cpuUsedPct >= 0, JSON.stringify(m))
  assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal && m.memCache <= m.memUsed, JSON.stringify(m))
  assert.ok(m.diskUsed >= 8 << 20 && m.diskUsed <= m.diskTotal, JSON.stringify(m))
  await sbx.commands.run('rm /work/ballast.bin')
  const [after] = await Base.getMetrics(sbx.sandboxId)
  assert.ok(after.diskUsed <= m.diskUsed - (8 << 20), 'the removed file no longer counts')
  const hour = 3600 * 1000
  assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() - 2 * hour),
                                          end: new Date(Date.now() - hour) }), [],
    'no history is kept: a past interval is empty')
})

test('a command past its timeout is killed, even once its client left', async () => {
  await assert.rejects(sbx.commands.run('sleep 300', { timeoutMs: 1500 }),
    (e) => e instanceof TimeoutError || /deadline|timed out|abort/i.test(String(e)))
  const left = await sbx.commands.run('sleep 301', { background: true, timeoutMs: 1500 })
  await left.disconnect()
  const kept = await sbx.commands.run('sleep 302', { background: true, timeoutMs: 0 })
  await kept.disconnect()
  const running = async () => (await sbx.commands.list()).map((p) => p.args.join(' '))
  await until(async () => !(await running()).some((a) => /sleep 30[01]/.test(a)), 30000,
    'both timed-out commands gone')
  assert.ok((await running()).some((a) => a.includes('sleep 302')), 'no timeout: still running')
  await sbx.commands.kill(kept.pid)
})

test('a sandbox past its timeout is killed', async () => {
  const short = await Base.create({ timeoutMs: 2000 })
  assert.equal(await short.isRunning(), true)
  await until(async () => (await short.isRunning()) === false, 60000, 'sandbox expiry')
  await assert.rejects(short.commands.run('true'))
  assert.equal(await Base.kill(short.sandboxId), false, 'already gone')
})

test('another tenant sees no sandbox of ours', async () => {
  const opts = { apiKey: BOB }
  const bobs = await Base.list(opts).nextItems()
  assert.ok(!bobs.some((s) => s.sandboxId === sbx.sandboxId))
  await assert.rejects(Base.connect(sbx.sandboxId, opts), (e) => e instanceof NotFoundError)
  await assert.rejects(Base.getInfo(sbx.sandboxId, opts), (e) => e instanceof NotFoundError)
  await assert.rejects(Base.getMetrics(sbx.sandboxId, opts), (e) => e instanceof NotFoundError)
  assert.equal(await Base.kill(sbx.sandboxId, opts), false)
  // bob's own sandbox's token does not open ours either
  const bob = await Base.create(opts)
  try {
    const forged = await Base.connect(bob.sandboxId, opts)
    // the header names our sandbox, the token is bob's
    const ours = new Base({ sandboxId: sbx.sandboxId, envdAccessToken: forged.envdAccessToken,
                            envdVersion: '0.5.7', apiKey: BOB })
    await assert.rejects(ours.commands.run('id'), (e) => /not.found|not_found/i.test(String(e)))
    await assert.rejects(ours.files.read('/etc/hostname'), (e) => e instanceof NotFoundError)
  } finally {
    await bob.kill()
  }
  assert.equal(await sbx.isRunning(), true, 'ours survived bob')
})

test('unsupported calls answer at once with a clear error', async () => {
  await assert.rejects(sbx.pause(), (e) => e instanceof SandboxError && /not supported/.test(e.message))
  await assert.rejects(Base.create('no-such-template'), (e) => /template 'no-such-template' not found/.test(e.message))
  await assert.rejects(Base.create({ allowInternetAccess: true }), (e) => /network/.test(e.message))
})

// Every call of e2b 2.51 that sandboxd refuses: E2B's error shape (the SDK's
// own error class), a message saying what and why, at once, and nothing
// made.  The SDK has no resume call: connect() resumes a paused sandbox,
// and as none is ever paused here, connect() of a running one just works.
test('resume, snapshots, fork, network, volumes: refused at once, clearly', async () => {
  const quick = async (what, p, check) => {
    const t0 = Date.now()
    await assert.rejects(p, (e) => { check(e); return true }, what)
    assert.ok(Date.now() - t0 < 5000, `${what} took ${Date.now() - t0} ms`)
  }
  const unsupported = (re, cls = SandboxError) => (e) => {
    assert.ok(e instanceof cls, `${e.constructor.name}: ${e.message}`)
    assert.ok(!(e instanceof NotFoundError), `a refusal is not "not found": ${e.message}`)
    assert.match(e.message, /^405: /)
    assert.match(e.message, re)
    assert.match(e.message, /not supported by sandboxd's E2B-compatible API: \S/)
  }
  const before = (await Base.list().nextItems()).map((s) => s.sandboxId).sort()
  const resumed = await Base.connect(sbx.sandboxId)
  assert.equal(resumed.sandboxId, sbx.sandboxId)
  assert.equal((await resumed.commands.run('echo resumed')).stdout, 'resumed\n')
  await quick('betaPause', sbx.betaPause(), unsupported(/pausing a sandbox/))
  await quick('onTimeout: pause', Base.create({ lifecycle: { onTimeout: 'pause', autoResume: true } }),
    unsupported(/autoPause/))
  await quick('createSnapshot', sbx.createSnapshot({ name: 'snap' }), unsupported(/snapshots/))
  await quick('listSnapshots', Base.listSnapshots().nextItems(), unsupported(/snapshots/))
  await quick('fork', sbx.fork(), unsupported(/forking a sandbox/))
  await quick('updateNetwork', Base.updateNetwork(sbx.sandboxId, { allowOut: ['1.1.1.1'] }),
    unsupported(/network.*PATCH \/v1\/sandbox\/sessions/))
  await quick('Volume.create', Volume.create('vol'), unsupported(/volumes/, VolumeError))
  await quick('Volume.list', Volume.list(), unsupported(/volumes/, VolumeError))
  // By id: none exists, which the SDK says its own way
  await quick('Volume.getInfo', Volume.getInfo('vol_x'), (e) => assert.ok(e instanceof VolumeNotFoundError))
  assert.equal(await Volume.destroy('vol_x'), false)
  assert.equal(await Base.deleteSnapshot('snap_x'), false)
  assert.deepEqual((await Base.list().nextItems()).map((s) => s.sandboxId).sort(), before,
    'a refused call made or removed a sandbox')
  assert.equal(await sbx.isRunning(), true)
})
