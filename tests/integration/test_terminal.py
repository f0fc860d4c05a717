"""Terminals: a background process with `pty` gets a
pseudo-terminal from the sandbox's own devpts, as its controlling tty;
resize sends SIGWINCH; `bash -i` and the python3 REPL are driven like a
person would; `sbx exec -it` gives a real interactive terminal."""
import fcntl
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import termios
import time

import pytest

from sbxsse import SSE, chunk_bytes, collect
from sbxtest import assert_error, marker, sbx_bin, sleeper, wait_until, workload_procs


@pytest.fixture
def term_session(alice, capable):
    s = alice.new_session(capable("terminal"))
    assert "terminal" in s["capabilities"]
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


class Screen:
    """A person at a terminal: types, then reads what appeared."""

    def __init__(self, client, sid, pid):
        self.c, self.url = client, f"/v1/sandbox/sessions/{sid}/processes/{pid}"
        self.seen = ""

    def type(self, text):
        r = self.c.post(self.url + "/stdin", data=text.encode())
        assert r.status_code == 200, r.text

    def read(self):
        self.seen = self.c.get(self.url + "/output").json()["stdout"]
        return self.seen

    def wait_for(self, text, timeout=15):
        return wait_until(lambda: text in self.read(), timeout, interval=0.1,
                          what=f"{text!r} on the screen; screen so far: {self.seen[-300:]!r}")

    def get(self):
        return self.c.get(self.url).json()


def start_pty(client, sid, argv, cols=80, rows=24):
    r = client.post(f"/v1/sandbox/sessions/{sid}/exec",
                    json={"command": argv, "background": True, "pty": {"cols": cols, "rows": rows}})
    assert r.status_code == 202, r.text
    return r.json()["pid"]


def test_bash_driven_like_a_person(daemon, alice, term_session, gvisor_gap):
    gvisor_gap("terminal: after a resize bash -i echoes no further input and Ctrl-C "
               "never brings the prompt back (gVisor 2022 pty job control)")
    sid = term_session["id"]
    pid = start_pty(alice, sid, ["bash", "-i"], cols=100, rows=30)
    s = Screen(alice, sid, pid)
    assert s.get()["pty"] == {"cols": 100, "rows": 30}
    s.type("stty size; tty\n")
    s.wait_for("30 100")
    s.wait_for("/dev/pts/")
    r = alice.post(s.url + "/resize", json={"cols": 132, "rows": 43})
    assert r.status_code == 200 and r.json() == {"cols": 132, "rows": 43}
    s.type("stty size\n")
    s.wait_for("43 132")
    # A foreground job and Ctrl-C typed at the terminal: the tty's line
    # discipline signals its foreground process group, bash survives.
    mark = marker()
    s.type(shlex.join(sleeper(mark, 100)) + "\n")
    wait_until(lambda: workload_procs(daemon, mark), 30, what="the foreground job to run")
    s.type("\x03")
    s.type("echo after-$((40+2))\n")
    s.wait_for("after-42")
    assert not workload_procs(daemon, mark), "Ctrl-C did not end the foreground job"
    s.type("exit\n")
    p = wait_until(lambda: s.get()["status"] == "exited" and s.get(), 15, what="bash exit")
    assert p["exit_code"] == 0
    assert_error(alice.post(s.url + "/resize", json={"cols": 80, "rows": 24}), 409, "conflict")


def test_sigwinch_reaches_the_program(alice, term_session, gvisor_gap):
    # the relay itself survives a resize (bytes typed after it arrive)
    gvisor_gap("terminal: a resize (TIOCSWINSZ on the master inside gVisor) "
               "delivers no SIGWINCH")
    sid = term_session["id"]
    prog = ("import signal, shutil, sys, time\n"
            "signal.signal(signal.SIGWINCH, lambda *a: print('winch', *shutil.get_terminal_size(), flush=True))\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")
    pid = start_pty(alice, sid, ["python3", "-c", prog])
    s = Screen(alice, sid, pid)
    s.wait_for("ready")
    alice.post(s.url + "/resize", json={"cols": 90, "rows": 20})
    s.wait_for("winch 90 20")
    alice.post(s.url + "/signal", json={"signal": "KILL"})


def test_python_repl(alice, term_session):
    sid = term_session["id"]
    pid = start_pty(alice, sid, ["python3", "-i", "-q"])
    s = Screen(alice, sid, pid)
    s.wait_for(">>> ")
    s.type("x = 6 * 7\n")
    s.type("x\n")
    s.wait_for("42")
    s.type("import os; os.isatty(0), os.getsid(0) == os.getpid()\n")
    s.wait_for("(True, True)")
    # ^D at an empty prompt: the REPL's EOF (what ?eof=true types on a tty).
    r = alice.post(s.url + "/stdin?eof=true", data=b"")
    assert r.status_code == 200
    p = wait_until(lambda: s.get()["status"] == "exited" and s.get(), 15, what="python exit")
    assert p["exit_code"] == 0


def test_full_screen_program_and_follow(alice, term_session):
    """A curses-style program: alternate screen and cursor addressing come
    through the output stream verbatim, and the follower ends with exit."""
    sid = term_session["id"]
    prog = ("import sys, shutil\n"
            "c, r = shutil.get_terminal_size()\n"
            "sys.stdout.write('\\x1b[?1049h\\x1b[H\\x1b[2J' + f'size {c}x{r}' + '\\x1b[%d;1Hbottom' % r)\n"
            "sys.stdout.write('\\x1b[?1049l'); sys.stdout.flush()\n")
    pid = start_pty(alice, sid, ["python3", "-c", prog], cols=70, rows=20)
    evs, ex = collect(alice.get(f"/v1/sandbox/sessions/{sid}/processes/{pid}/output",
                                headers=SSE, stream=True))
    out = b"".join(chunk_bytes(d) for e, d in evs if e == "stdout")
    assert b"\x1b[?1049h" in out and b"size 70x20" in out and b"\x1b[20;1Hbottom" in out
    assert ex["exit_code"] == 0


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def wait_exit(pid, timeout=20):
    """waitpid, bounded: an sbx that never exits fails the test instead of
    hanging the run; returns the wait status."""
    box = []

    def reaped():
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            box.append(status)
        return bool(box)
    wait_until(reaped, timeout, what="sbx to exit")
    return box[0]


def read_until(fd, want, timeout=20):
    """Reads the terminal until `want` (bytes, or a compiled bytes regex)
    appears; returns everything read."""
    found = want.search if isinstance(want, re.Pattern) else (lambda b: want in b)
    buf = b""
    deadline = time.monotonic() + timeout
    while not found(buf):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{want!r} not seen; got {buf[-500:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def test_sbx_exec_it(daemon, keys, alice, term_session):
    env = dict(os.environ, SANDBOXD_URL=daemon.url, SANDBOXD_API_KEY=keys["alice"])
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sbx_bin(), ["sbx", "exec", "-it", term_session["id"], "--", "bash"], env)
    try:
        set_size(fd, 33, 101)
        read_until(fd, b"$ ")
        os.write(fd, b"stty size; echo hi-$((1+1))\r")
        out = read_until(fd, b"hi-2")
        assert b"33 101" in out  # the local window's size went along
        set_size(fd, 40, 120)  # the window changes: SIGWINCH → resize
        procs = f"/v1/sandbox/sessions/{term_session['id']}/processes"
        wait_until(lambda: any(p["pty"] == {"cols": 120, "rows": 40}
                               for p in alice.get(procs).json()["processes"]), 30,
                   what="the resize to reach the session's terminal")
        os.write(fd, b"stty size; exit 3\r")
        read_until(fd, b"40 120")
        status = wait_exit(pid)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def test_sbx_exec_it_clean_exit_on_ctrl_d(daemon, keys, term_session):
    env = dict(os.environ, SANDBOXD_URL=daemon.url, SANDBOXD_API_KEY=keys["alice"])
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sbx_bin(), ["sbx", "exec", "-it", term_session["id"], "--", "bash"], env)
    try:
        read_until(fd, b"$ ")
        before = subprocess.run(["stty", "-a"], stdin=fd, capture_output=True).stdout
        assert b"-icanon" in before  # raw while the remote shell runs
        os.write(fd, b"echo typed-$((6*7))\r")
        # The output, then the next prompt: a Ctrl-D typed while bash still
        # runs the command reaches readline as a NUL, not as end of input.
        read_until(fd, re.compile(rb"typed-42\r?\n.*\$ ", re.S))
        os.write(fd, b"\x04")  # Ctrl-D at the prompt: bash exits 0
        status = wait_exit(pid)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        after = subprocess.run(["stty", "-a"], stdin=fd, capture_output=True).stdout
        assert b" icanon" in after and b" echo" in after  # the local tty is restored
    finally:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
