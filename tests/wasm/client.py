#!/usr/bin/env python3
"""Test client of the sandboxd wasm runner; does what sbx-init's C client
(src/init/engine.c) does: makes three pipes of its own for the job's stdin,
stdout and stderr, sends the request with ITS OWN pid and those pipes' fd
numbers, waits for {"started"}, closes its copies of the runner's ends, relays
its stdin into the job and the job's output to its stdout/stderr, and exits
with the job's code once the output has ended and the final line came.

  client.py [options] SOCKET -- ARGV...
    -C DIR         cwd sent in the request (default: this process's cwd)
    -e KEY=VALUE   environment entry (repeatable; nothing else is sent)
    --timing FILE  append the connect->final-reply time in microseconds
    --repeat N     run the job N times (benchmark; stdin only to the first)
    --reply FILE   append the raw reply lines to FILE
"""
import json
import os
import select
import socket
import struct
import sys
import threading
import time


def request(argv, env, cwd, fds):
    def item(b):
        return struct.pack("<I", len(b)) + b

    parts = [b"SBX1", struct.pack("<II", os.getpid(), len(argv))]
    parts += [item(a.encode()) for a in argv]
    parts.append(struct.pack("<I", len(env)))
    parts += [item(e.encode()) for e in env]
    parts.append(item(cwd.encode()))
    parts.append(struct.pack("<III", *fds))
    return b"".join(parts)


def connect(name):
    # Node 20 binds the abstract name NUL-padded to the whole sun_path (108
    # bytes); a later libuv binds just its bytes. Try both, as the C client.
    b = b"\0" + name.encode()
    last = None
    for addr in (b + b"\0" * (108 - len(b)), b):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(addr)
            return s
        except OSError as e:
            last = e
            s.close()
    raise last


def read_line(s, buf):
    while b"\n" not in buf[0]:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf[0] += chunk
    line, buf[0] = buf[0].split(b"\n", 1)
    return line


def copy_stdin(w):
    try:
        while True:
            data = os.read(0, 65536)
            if not data:
                break
            os.write(w, data)
    except OSError:
        pass
    try:
        os.close(w)
    except OSError:
        pass


def once(sockname, argv, env, cwd, with_stdin, reply_file):
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    t0 = time.perf_counter_ns()
    s = connect(sockname)
    # No shutdown(SHUT_WR): the runner takes EOF from the client as "killed".
    s.sendall(request(argv, env, cwd, (in_r, out_w, err_w)))
    buf = [b""]
    lines = []
    first = read_line(s, buf)
    if first is not None:
        lines.append(first)
    started = first is not None and b'"started"' in first
    os.close(in_r)
    os.close(out_w)
    os.close(err_w)
    if started and with_stdin:
        threading.Thread(target=copy_stdin, args=(in_w,), daemon=True).start()
    else:
        os.close(in_w)
    final = None if started else first
    open_fds = {out_r: 1, err_r: 2} if started else {}
    sock_open = started
    while open_fds or sock_open:
        watch = list(open_fds) + ([s.fileno()] if sock_open else [])
        ready, _, _ = select.select(watch, [], [])
        for fd in ready:
            if fd == s.fileno():
                final = read_line(s, buf)
                if final is not None:
                    lines.append(final)
                sock_open = False
                continue
            data = os.read(fd, 65536)
            if not data:
                del open_fds[fd]
                os.close(fd)
                continue
            view = memoryview(data)
            while view:
                n = os.write(open_fds[fd], view)
                view = view[n:]
    us = (time.perf_counter_ns() - t0) // 1000
    for fd in (out_r, err_r):
        try:
            os.close(fd)
        except OSError:
            pass
    s.close()
    if reply_file:
        with open(reply_file, "ab") as f:
            f.write(b"".join(l + b"\n" for l in lines))
    return final, us


def main():
    args = sys.argv[1:]
    cwd, env, timing, repeat, reply_file = os.getcwd(), [], None, 1, None
    while args and args[0] != "--" and args[0].startswith("-"):
        opt = args.pop(0)
        if opt == "-C":
            cwd = args.pop(0)
        elif opt == "-e":
            env.append(args.pop(0))
        elif opt == "--timing":
            timing = args.pop(0)
        elif opt == "--repeat":
            repeat = int(args.pop(0))
        elif opt == "--reply":
            reply_file = args.pop(0)
        else:
            sys.exit("client.py: unknown option " + opt)
    if len(args) < 3 or args[1] != "--":
        sys.exit(__doc__)
    sockname, argv = args[0], args[2:]
    code = 255
    for i in range(repeat):
        final, us = once(sockname, argv, env, cwd, i == 0, reply_file)
        if timing:
            with open(timing, "a") as f:
                f.write("%d\n" % us)
        if final is None:
            sys.stderr.write("client.py: the runner went away\n")
            sys.exit(137)
        rep = json.loads(final.decode())
        if "refused" in rep:
            sys.stderr.write(rep["refused"] + "\n")
        code = rep["exit"]
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
