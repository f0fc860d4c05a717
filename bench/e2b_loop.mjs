// e2b_loop.mjs — bench/e2bbench.py's timed loop: `sandbox.commands.run('true')`
// through the real e2b SDK (tests/compat's pinned install), and in the same
// node process, alternating batches, our own exec API by fetch (keep-alive)
// with ["true"] and with what the SDK really runs, ["/bin/bash","-l","-c","true"].
// argv: COMPAT_DIR N WARM ROUNDS; env E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY,
// SBX_URL.  Prints {"sdk":[µs…], "api_true":[…], "api_bash":[…]}.
import { createRequire } from 'node:module'
import { join } from 'node:path'

const [compat, n, warm, rounds] = [process.argv[2], +process.argv[3], +process.argv[4], +process.argv[5]]
const { Sandbox } = createRequire(join(compat, 'package.json'))('e2b')
const key = process.env.E2B_API_KEY
const sbx = await Sandbox.create({ timeoutMs: 600000 })
const url = `${process.env.SBX_URL}/v1/sandbox/sessions/${sbx.sandboxId}/exec`
const api = (command) => async () => {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify({ command }),
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' } })
  const j = await r.json()
  if (j.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(j)}`)
}
const loops = { sdk: () => sbx.commands.run('true'), api_true: api(['true']),
                api_bash: api(['/bin/bash', '-l', '-c', 'true']) }
const out = { sdk: [], api_true: [], api_bash: [] }
try {
  for (let r = 0; r < rounds; r++) {
    for (const [name, fn] of Object.entries(loops)) {
      for (let i = 0; i < warm; i++) await fn()
      for (let i = 0; i < n; i++) {
        const t = process.hrtime.bigint()
        await fn()
        out[name].push(Number(process.hrtime.bigint() - t) / 1000)
      }
    }
  }
} finally {
  await sbx.kill()
}
console.log(JSON.stringify(out))
