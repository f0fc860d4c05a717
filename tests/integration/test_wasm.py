"""The wasm profile (docs/wasm.md): WASI modules, Python on Pyodide and
JavaScript on QuickJS, run by an engine inside a container sandbox, with the
same API and result objects as every other profile.  Modules are built here
with Debian's clang (wasm32-wasi) and attack what they can: files outside
their preopens, endless loops, memory, output floods, other tenants.

Runs only when the wasm profile is wanted (make test-wasm:
SANDBOXD_TEST_PROFILES=wasm); elsewhere the suite's daemons have no engine."""
import base64
import os
import shutil
import subprocess
import time

import pytest

from conftest import wanted_wasm
from sbxtest import assert_error

pytestmark = pytest.mark.skipif(not wanted_wasm(), reason="the wasm profile is not wanted in this run")

MODULES = {
    "hello": r'''
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  printf("hello");
  for (int i = 1; i < argc; i++) printf(" %s", argv[i]);
  printf("\n");
  const char *foo = getenv("FOO");
  if (foo) printf("FOO=%s\n", foo);
  return 0;
}''',
    "exit": r'''
#include <stdlib.h>
int main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }''',
    "cat": r'''
#include <stdio.h>
int main(void) {
  char buf[4096]; size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) fwrite(buf, 1, n, stdout);
  fprintf(stderr, "done\n");
  return 0;
}''',
    "files": r'''
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  FILE *in = fopen("/work/in.txt", "r");
  char line[256] = "";
  if (!in || !fgets(line, sizeof line, in)) { perror("/work/in.txt"); return 1; }
  fclose(in);
  FILE *out = fopen("/work/out/result.txt", "w");
  if (!out) { perror("/work/out/result.txt"); return 2; }
  fprintf(out, "read: %s", line);
  fclose(out);
  FILE *t = fopen("/tmp/scratch", "w");
  if (!t) { perror("/tmp/scratch"); return 3; }
  fclose(t);
  printf("ok\n");
  return 0;
}''',
    "escape": r'''
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void) {
  const char *paths[] = {"/etc/passwd", "/proc/self/environ", "/work/../etc/passwd",
                         "../../../../etc/hostname", "/usr/bin/node", "/", NULL};
  int opened = 0;
  for (int i = 0; paths[i]; i++) {
    int fd = open(paths[i], O_RDONLY);
    if (fd >= 0) {
      char buf[64];
      ssize_t n = read(fd, buf, sizeof buf);
      printf("OPENED %s (%zd bytes)\n", paths[i], n);
      opened++;
      close(fd);
    } else {
      printf("refused %s: %s\n", paths[i], strerror(errno));
    }
  }
  return opened;
}''',
    "loop": r'''
#include <stdio.h>
int main(void) {
  printf("before the loop\n");
  fflush(stdout);
  volatile unsigned long n = 0;
  for (;;) n++;
}''',
    "grow": r'''
#include <stdio.h>
#include <stdlib.h>
static char *blocks[4096]; /* kept: the compiler may not drop what is reachable */
int main(void) {
  size_t total = 0;
  for (int i = 0; i < 4096; i++) {
    volatile char *p = malloc(16 << 20);
    if (!p) { printf("malloc failed after %zu MiB\n", total >> 20); return 42; }
    for (size_t off = 0; off < (16u << 20); off += 4096) p[off] = (char)off;
    blocks[i] = (char *)p;
    total += 16 << 20;
  }
  return 0;
}''',
    "flood": r'''
#include <stdio.h>
#include <string.h>
int main(void) {
  static char line[1024];
  memset(line, 'x', sizeof line - 1);
  line[sizeof line - 2] = '\n';
  for (int i = 0; i < 50 * 1024; i++) fputs(line, stdout);
  printf("END\n");
  return 0;
}''',
}


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    """The test modules, built with clang --target=wasm32-wasi."""
    clang = shutil.which("clang") or shutil.which("clang-14")
    assert clang, "clang is needed to build the test modules (scripts/install-deps.sh)"
    d = tmp_path_factory.mktemp("wasm")
    out = {}
    for name, src in MODULES.items():
        c = d / f"{name}.c"
        c.write_text(src)
        w = d / f"{name}.wasm"
        subprocess.run([clang, "--target=wasm32-wasi", "-O2", "-fuse-ld=lld", "-Wl,--strip-all",
                        "-o", str(w), str(c)], check=True, capture_output=True)
        out[name] = w.read_bytes()
    return out


@pytest.fixture(scope="module")
def wasm_profile(profile_table):
    p = profile_table.get("wasm")
    assert p and p["available"], f"the wasm profile is unavailable: {p and p.get('reason')}"
    return p


def put(c, sid, path, data):
    r = c.put(f"/v1/sandbox/sessions/{sid}/files", params={"path": path}, data=data)
    assert r.status_code in (200, 201), r.text
    return r


@pytest.fixture
def wsession(alice, wasm_profile, modules):
    s = alice.new_session("wasm", limits={"memory": "256Mi"})
    for name, data in modules.items():
        put(alice, s["id"], f"/work/{name}.wasm", data)
    yield s["id"]
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def run(c, sid, command, **kw):
    body = dict(kw, command=command) if command is not None else kw
    r = c.post(f"/v1/sandbox/sessions/{sid}/exec", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_profile(wasm_profile):
    assert wasm_profile["class"] == "wasm" and wasm_profile["driver"] == "wasm"
    assert set(wasm_profile["capabilities"]) == {"exec", "files", "archive"}


def test_hello_argv_env_and_exit_codes(alice, wsession):
    r = run(alice, wsession, ["/work/hello.wasm", "a b", "c"], env={"FOO": "bar"})
    assert (r["status"], r["exit_code"], r["stdout"]) == ("succeeded", 0, "hello a b c\nFOO=bar\n")
    r = run(alice, wsession, ["hello.wasm"], cwd="/work")  # relative to the cwd
    assert r["stdout"] == "hello\n", r
    for code in (3, 255):
        r = run(alice, wsession, ["/work/exit.wasm", str(code)])
        assert (r["status"], r["exit_code"]) == ("failed", code), r


def test_stdin_and_stderr(alice, wsession):
    data = "line one\nline two\n" * 1000
    r = run(alice, wsession, ["/work/cat.wasm"], stdin=data)
    assert r["exit_code"] == 0 and r["stdout"] == data and r["stderr"] == "done\n", r


def test_preopens_read_and_write(alice, wsession):
    put(alice, wsession, "/work/in.txt", b"from the API\n")
    alice.post(f"/v1/sandbox/sessions/{wsession}/files/mkdir", params={"path": "/work/out"})
    r = run(alice, wsession, ["/work/files.wasm"])
    assert (r["exit_code"], r["stdout"]) == (0, "ok\n"), r
    got = alice.get(f"/v1/sandbox/sessions/{wsession}/files", params={"path": "/work/out/result.txt"})
    assert got.content == b"read: from the API\n"


def test_nothing_outside_the_preopens(alice, wsession):
    r = run(alice, wsession, ["/work/escape.wasm"])
    assert r["exit_code"] == 0, r  # the number of paths it could open
    assert "OPENED" not in r["stdout"] and r["stdout"].count("refused") == 6, r
    assert "root:" not in r["stdout"]


def test_a_program_that_is_not_wasm_is_refused(alice, wsession):
    r = run(alice, wsession, ["sh", "-c", "id"])
    assert r["exit_code"] == 127 and "wasm" in r["stderr"], r
    assert r["stdout"] == ""


def test_endless_loop_is_killed_at_the_timeout(alice, wsession):
    t0 = time.monotonic()
    r = run(alice, wsession, ["/work/loop.wasm"], timeout_s=1)
    assert r["status"] == "timeout" and r["stdout"] == "before the loop\n", r
    assert time.monotonic() - t0 < 10
    # The engine is still there for the next run.
    assert run(alice, wsession, ["/work/hello.wasm"])["stdout"] == "hello\n"


def test_memory_past_the_limit(alice, wasm_profile, modules):
    s = alice.new_session("wasm", limits={"memory": "192Mi"})
    try:
        put(alice, s["id"], "/work/grow.wasm", modules["grow"])
        put(alice, s["id"], "/work/hello.wasm", modules["hello"])
        r = run(alice, s["id"], ["/work/grow.wasm"], timeout_s=60)
        # Either the cgroup's OOM killer (the engine dies: reason memory) or
        # the engine's own cap (malloc fails in the module): never a hang.
        assert r["status"] == "oom_killed" or r["exit_code"] == 42, r
        assert run(alice, s["id"], ["/work/hello.wasm"])["stdout"] == "hello\n"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_output_flood_is_capped(alice, wsession):
    r = run(alice, wsession, ["/work/flood.wasm"], timeout_s=60)
    assert r["exit_code"] == 0 and r["stdout_truncated"], {k: v for k, v in r.items() if k != "stdout"}
    assert r["stdout"].endswith("END\n") and len(r["stdout"]) < 2 * (1 << 20)


def test_an_execution_with_files_in_and_out(alice, wasm_profile, modules):
    r = alice.post("/v1/sandbox/executions", json={
        "profile": "wasm", "command": ["/work/files.wasm"],
        "files": [{"path": "/work/files.wasm", "encoding": "base64",
                   "content": base64.b64encode(modules["files"]).decode()},
                  {"path": "/work/in.txt", "content": "an execution\n"},
                  {"path": "/work/out/.keep", "content": ""}],
        "collect": ["/work/out/*.txt"]})
    assert r.status_code == 202, r.text
    f = alice.wait_execution(r.json()["id"])
    assert f["status"] == "succeeded" and f["stdout"] == "ok\n", f
    [file] = f["files"]
    got = alice.get(f"/v1/sandbox/executions/{f['id']}/files", params={"path": file["path"]})
    assert got.content == b"read: an execution\n"


def test_tenants_have_their_own_runners(alice, bob, wasm_profile, modules):
    a = alice.new_session("wasm")
    b = bob.new_session("wasm")
    try:
        put(alice, a["id"], "/work/in.txt", b"alice's\n")
        put(bob, b["id"], "/work/in.txt", b"bob's\n")
        for c, s in ((alice, a), (bob, b)):
            put(c, s["id"], "/work/files.wasm", modules["files"])
            c.post(f"/v1/sandbox/sessions/{s['id']}/files/mkdir", params={"path": "/work/out"})
            assert run(c, s["id"], ["/work/files.wasm"])["exit_code"] == 0
        ra = alice.get(f"/v1/sandbox/sessions/{a['id']}/files", params={"path": "/work/out/result.txt"})
        rb = bob.get(f"/v1/sandbox/sessions/{b['id']}/files", params={"path": "/work/out/result.txt"})
        assert (ra.content, rb.content) == (b"read: alice's\n", b"read: bob's\n")
        assert_error(bob.post(f"/v1/sandbox/sessions/{a['id']}/exec",
                              json={"command": ["/work/files.wasm"]}), 404, "not_found")
    finally:
        alice.delete(f"/v1/sandbox/sessions/{a['id']}")
        bob.delete(f"/v1/sandbox/sessions/{b['id']}")


def test_what_the_profile_does_not_offer(alice, wsession):
    assert_error(alice.post("/v1/sandbox/sessions", json={"profile": "wasm", "image": "python:3.12-slim"}),
                 400, "invalid_request")
    r = alice.post(f"/v1/sandbox/sessions/{wsession}/contexts", json={"language": "python"})
    assert r.status_code == 409, r.text


def packages_available(profile):
    return not (profile.get("note") or "").startswith("python and javascript unavailable")


def test_python_on_pyodide(alice, wsession, wasm_profile):
    if not packages_available(wasm_profile):
        pytest.fail(f"the engine's packages are missing: {wasm_profile.get('note')}")
    r = run(alice, wsession, None, language="python", code="import json, sys\nx = 41\nprint(json.dumps({'v': x + 1}), sys.argv[0] != '')")
    assert (r["exit_code"], r["stdout"]) == (0, '{"v": 42} True\n'), r
    r = run(alice, wsession, None, language="python", code="print(x)")  # state is per run
    assert r["exit_code"] == 1 and "NameError" in r["stderr"], r
    r = run(alice, wsession, None, language="python", code="def f():\n    raise ValueError('boom')\nf()")
    assert r["exit_code"] == 1 and "Traceback" in r["stderr"] and "ValueError: boom" in r["stderr"], r
    r = run(alice, wsession, None, language="python", code="import sys; sys.exit(3)")
    assert r["exit_code"] == 3, r


def test_javascript_on_quickjs(alice, wsession, wasm_profile):
    if not packages_available(wasm_profile):
        pytest.fail(f"the engine's packages are missing: {wasm_profile.get('note')}")
    r = run(alice, wsession, None, language="javascript", code="console.log(6 * 7)")
    assert (r["exit_code"], r["stdout"]) == (0, "42\n"), r
    r = run(alice, wsession, None, language="javascript", code="throw new TypeError('nope')")
    assert r["exit_code"] == 1 and "TypeError" in r["stderr"], r
    # No host objects: what Node would offer is not there.
    r = run(alice, wsession, None, language="javascript",
            code="console.log(typeof require, typeof fetch, typeof process.binding,"
                 " typeof process.versions, typeof WebAssembly)")
    assert r["stdout"] == "undefined undefined undefined undefined undefined\n", r
    r = run(alice, wsession, None, language="javascript", code="for(;;){}", timeout_s=1)
    assert r["status"] == "timeout", r
