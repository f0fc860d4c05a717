// A template the operator mapped to a profile AND an image
// (`e2b_templates = tiny=container:<ref>`, docs/compat/e2b.md): the real,
// unmodified `e2b` SDK creates its sandbox on that image.  Started by
// tests/compat/test_e2b_sdk.py::test_template_mapped_to_an_image, which pushes
// a busybox image to a loopback registry and sets SBX_E2B_TEMPLATE (the
// name), SBX_IMAGE_MARKER (a string only that image's /etc/os-release holds)
// SBX_IMAGE_REF (its reference), SBX_URL (our own API) and E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const TEMPLATE = process.env.SBX_E2B_TEMPLATE
const MARKER = process.env.SBX_IMAGE_MARKER

test('a template mapped to an image: the sandbox runs on that image', async () => {
  assert.ok(TEMPLATE && MARKER, 'run from test_e2b_sdk.py')
  const sbx = await Sandbox.create(TEMPLATE, { metadata: { via: 'image-template' } })
  try {
    const info = await sbx.getInfo()
    assert.equal(info.templateId, TEMPLATE)
    // the session our own API sees is on that image and profile
    const own = await (await fetch(`${process.env.SBX_URL}/v1/sandbox/sessions/${sbx.sandboxId}`,
      { headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` } })).json()
    assert.equal(own.image, process.env.SBX_IMAGE_REF, JSON.stringify(own))
    assert.equal(own.profile, 'container', JSON.stringify(own))
    // through envd's filesystem (sbx-init inside the image's root)...
    const osr = await sbx.files.read('/etc/os-release')
    assert.match(osr, new RegExp(`ID=${MARKER}`))
    assert.equal(await sbx.files.exists('/etc/debian_version'), false, 'the host\'s root, not the image')
    assert.equal(await sbx.files.read('/only-in-image.txt'), `${MARKER}\n`)
    // ...and through a command (the SDK runs `/bin/bash -l -c …`; the image's
    // /bin/bash hands it to busybox sh), with the image's own tools
    const r = await sbx.commands.run('. /etc/os-release; echo $ID; readlink -f /bin/sh; ls /bin | wc -l')
    const [id, sh, n] = r.stdout.trim().split('\n')
    assert.equal(id, MARKER)
    assert.equal(sh, '/bin/busybox')
    assert.ok(Number(n) <= 5, `a busybox image's /bin, not Debian's: ${n} entries`)
    // writes land in the sandbox's own layer
    await sbx.files.write('/work/w.txt', 'written')
    assert.equal((await sbx.commands.run('cat /work/w.txt')).stdout, 'written')
  } finally {
    await sbx.kill()
  }
  // the default template is still on the default image
  const plain = await Sandbox.create()
  try {
    assert.equal(await plain.files.exists('/only-in-image.txt'), false)
  } finally {
    await plain.kill()
  }
})
