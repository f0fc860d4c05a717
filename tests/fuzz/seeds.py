#!/usr/bin/python3
"""seeds.py — writes the seed corpora of tests/fuzz/corpus/<name>/ (small
valid inputs and edge cases; many taken from the unit tests' own inputs:
tests/unit/test_schema.c, test_net.c).  Rerun after changing a harness's
input format; files found by fuzzing (reproducers) live beside the seeds
under names that do not start with "seed-" and are never rewritten here.

    /usr/bin/python3 tests/fuzz/seeds.py"""
import gzip
import io
import json
import os
import re
import ssl
import struct
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(name, items):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.unlink(os.path.join(d, f))
    for i, data in enumerate(items):
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, "seed-%03d" % i), "wb") as f:
            f.write(data)


def c_strings(path, func):
    """The string literals passed as first argument to func(...) in a C test."""
    src = open(os.path.join(ROOT, path)).read()
    out = []
    for m in re.finditer(re.escape(func) + r'\(\s*"((?:[^"\\]|\\.)*)"', src):
        out.append(bytes(m.group(1), "utf-8").decode("unicode_escape").encode("latin-1", "replace"))
    return out


# ---- router: raw HTTP requests -----------------------------------------------
def req(method, target, headers=(), body=b""):
    h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (method, target)
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if body:
        h += "Content-Length: %d\r\n" % len(body)
    return h.encode() + b"\r\n" + body


router = [
    req("GET", "/healthz"),
    req("GET", "/v1/sandbox/sessions?limit=5&cursor=abc&status=ready"),
    req("GET", "/v1/sandbox/sessions/sess-1/files?path=%2Fwork%2Fa%20b.txt", [("Accept-Language", "fr-CA, en;q=0.5")]),
    req("DELETE", "/v1/sandbox/sessions/sess-1/files?path=/work/../etc/passwd"),
    req("GET", "/v1/sandbox/sessions/sess-1/ports/8000/static/a%2Fb?x=1&x=2&y"),
    req("GET", "/v1/sandbox/sessions/sess-1/ports/8000"),
    req("POST", "/v1/sandbox/sessions/s/processes/12/signal", body=b'{"signal":"TERM"}'),
    req("DELETE", "/v1/sandbox/images/docker.io/library/python:3.12-slim"),
    req("GET", "/v1/sandbox/sessions/%2e%2e/files?path=%00"),
    req("GET", "/v1/sandbox/sessions//exec"),
    req("PATCH", "/v1/sandbox/executions/x/cancel"),
    req("GET", "/v1/audit?tenant=1&after=99999999999999999999&limit=0"),
    req("GET", "/v1/sandbox/usage?group_by=tenant&from=2024-01-01T00:00:00Z"),
    req("GET", "/v1/sandbox/sessions?limit=%31%30%30&cursor=" + "A" * 80),
    req("GET", "/v1/sandbox/sessions/" + "x" * 300 + "/files"),
    b"GET /metrics HTTP/1.0\r\n\r\n",
    b"GET /v1/sandbox/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"G\x00T / HTTP/1.1\r\n\r\n",
]
write("router", router)

# ---- schema: request bodies ---------------------------------------------------
schema = c_strings("tests/unit/test_schema.c", "exec_field")
schema += [s for s in c_strings("tests/unit/test_schema.c", "J") if s.startswith(b"{")]
schema += [
    b'{"profile":"default","limits":{"memory":"256Mi","cpu":"0.5","pids":64,"disk":"1Gi"},'
    b'"network":{"egress":"allowlist","allow":["pypi.org","*.pythonhosted.org:443"]},'
    b'"env":{"A":"1"},"metadata":{"k":"v"},"ttl_s":600}',
    b'{"image":"docker.io/library/python:3.12-slim","limits":{"memory":"1e3"}}',
    b'{"command":["sh","-c","echo hi"],"stdin":"x","cwd":"/work","timeout_s":5,'
    b'"background":true,"pty":{"cols":80,"rows":24},"env":{"PATH":"/bin"}}',
    b'{"language":"python","code":"print(1)","timeout_s":1e308}',
    b'{"limits":{"memory":"-1","cpu":"1000000000000000000000"},"ttl_s":-5}',
    b'{"image":null,"profile":null,"network":null,"metadata":null,"env":null}',
]
write("schema", schema)

# ---- policy: network objects --------------------------------------------------
entries = [e for e in c_strings("tests/unit/test_net.c", "allow") if e.startswith(b"[")]
policy = [b'{"egress":"allowlist","allow":' + e + b"}" for e in entries]
policy += [e for e in c_strings("tests/unit/test_net.c", "parse_err") if e.startswith(b"{")]
policy += [b'{"egress":"none"}', b'{"egress":"allowlist","allow":[]}',
           b'{"egress":"allowlist","allow":["[2001:db8::1]:443","10.0.0.0/8","::ffff:127.0.0.1",'
           b'"198.51.100.7:0","*.*.example.com","a..b","xn--bcher-kva.example"]}', b"null"]
write("policy", policy)

# ---- sni: a real ClientHello (OpenSSL through Python), HTTP heads ------------
def client_hello(name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


hello = client_hello("pypi.org")
sni = [hello, client_hello("files.pythonhosted.org"), hello[:5 + 40],
       # the handshake split over two records
       hello[:3] + struct.pack(">H", 60) + hello[5:65] + hello[:3] +
       struct.pack(">H", len(hello) - 65) + hello[65:],
       b"GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\nUser-Agent: x\r\n\r\n",
       b"GET http://pypi.org:8080/a?b HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: x\r\n"
       b"Connection: keep-alive\r\n\r\n",
       b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
       b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
       b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
       b"GET / HTTP/1.1\nHost: a\n\n"]
write("sni", sni)

# ---- dns: [asker byte][query] --------------------------------------------------
def qname(name):
    return b"".join(bytes([len(l)]) + l for l in name.encode().split(b".") if l) + b"\0"


def query(name, qtype=1, qclass=1, flags=0x0100, qd=1):
    return struct.pack(">HHHHHH", 0x1234, flags, qd, 0, 0, 0) + qname(name) + struct.pack(">HH", qtype, qclass)


dns = [b"\0" + query("pypi.org"), b"\1" + query("pypi.org", 28), b"\0" + query("x.pythonhosted.org"),
       b"\0" + query("files.pythonhosted.org"), b"\0" + query("many.example.com", 28),
       b"\0" + query("closed.example.com"), b"\0" + query("meta.example.com"),
       b"\0" + query("PyPI.Org."), b"\0" + query("pypi.org", 16), b"\0" + query("pypi.org", 1, 3),
       b"\2" + query("pypi.org"), b"\0" + query("nope.example"), b"\0" + query("pypi.org", flags=0x8100),
       b"\0" + query("pypi.org", flags=0x2900), b"\0" + query("pypi.org", qd=2),
       # a compression pointer to itself, and one past the end
       b"\0" + struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\xc0\x0c\0\1\0\1",
       b"\0" + struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\xc0\xff\0\1\0\1",
       b"\0" + struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\x3f" + b"a" * 63 + b"\0\0\1",
       b"\0" + query(".".join(["a" * 63] * 4)), b"\0" + query("a_b.example.com"), b"\0\0\0"]
write("dns", dns)

# ---- archive: tars ---------------------------------------------------------------
def tar(members, fmt=tarfile.PAX_FORMAT, compress=False):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=fmt) as t:
        for m in members:
            ti = tarfile.TarInfo(m[0])
            kind = m[1]
            if kind == "file":
                data = m[2] if len(m) > 2 else b"hello\n"
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                       "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                ti.linkname = m[2]
            t.addfile(ti)
    data = bio.getvalue()
    # tarfile pads to a 10 KiB record; the end-of-archive blocks suffice
    body = data.rstrip(b"\0")
    data = body + b"\0" * (-len(body) % 512) + b"\0" * 1024
    return gzip.compress(data, mtime=0) if compress else data


archive = [tar([("d", "dir"), ("d/a.txt", "file"), ("d/l", "sym", "a.txt"), ("d/h", "hard", "d/a.txt")]),
           tar([("a", "file")], fmt=tarfile.GNU_FORMAT), tar([("a", "file")], fmt=tarfile.USTAR_FORMAT),
           tar([("a", "file"), ("b", "file")], compress=True),
           tar([("/etc/passwd", "file")]), tar([("../x", "file")]), tar([("a/../../x", "file")]),
           tar([("l", "sym", "/etc")]), tar([("l", "sym", "../../x")]), tar([("l", "sym", "d"), ("l/x", "file")]),
           tar([("h", "hard", "/etc/shadow")]), tar([("h", "hard", "later"), ("later", "file")]),
           tar([("dev", "chr")]), tar([("f", "fifo")]), tar([("x" * 5000, "file")]),
           tar([("./a", "file"), ("a", "dir"), ("a//b/./c", "file")]),
           tar([("f%d" % i, "file") for i in range(5)]), tar([("big", "file", b"x" * 2048)]),
           b"", b"not a tar at all"]
write("archive", archive)

# ---- image: manifests, indexes, configs, references -------------------------------
D = "sha256:" + "ab" * 32
desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": D, "size": 123}
image = [
    {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
     "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": D, "size": 7},
     "layers": [desc, desc]},
    {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
     "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": D, "size": 7},
     "layers": [dict(desc, mediaType="application/vnd.docker.image.rootfs.diff.tar.gzip")]},
    {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
     "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": D, "size": 1,
                    "platform": {"os": "linux", "architecture": "arm64"}},
                   {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": D, "size": 1,
                    "platform": {"os": "linux", "architecture": "amd64"}}]},
    {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                        "digest": "sha256:../../etc", "size": -1}]},
    {"schemaVersion": 1, "fsLayers": [{"blobSum": D}]},
    {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [D, D]},
     "config": {"Env": ["PATH=/usr/bin", "A=b"], "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hi"],
                "User": "1000:1000", "WorkingDir": "/work"}},
    {"os": "windows", "rootfs": {"diff_ids": []}},
    {"os": "linux", "rootfs": {"diff_ids": [D]}, "config": {"Env": [1], "Cmd": "x"}},
]
image = [json.dumps(x).encode() for x in image]
image += [b"docker.io/library/python:3.12-slim", b"127.0.0.1:5000/a/b@" + D.encode(),
          b"UPPER/case", b"a" * 300, b"localhost:99999/x:tag"]
write("image", image)

# ---- init_msg: [fd kind][datagram] -------------------------------------------------
def s(x):
    x = x.encode() if isinstance(x, str) else x
    return struct.pack("<I", len(x)) + x + b"\0"


def dg(mtype, payload, mid=7, flags=0, ln=None):
    return struct.pack("<IIII", mtype, mid, flags, len(payload) if ln is None else ln) + payload


u32 = lambda v: struct.pack("<I", v)
u64 = lambda v: struct.pack("<Q", v)
init = [b"\0" + dg(2, b""),                                       # PING
        b"\0" + dg(6, s("/work/a.txt") + u32(0o644) + u32(1)),       # OPEN_WRITE, mkdir parents
        b"\0" + dg(5, s("/work/a.txt")),                            # OPEN_READ
        b"\1" + dg(7, s("/") + u32(100)),                           # LIST into a memfd
        b"\1" + dg(9, s("/*") + u32(10)),                           # GLOB
        b"\0" + dg(8, s("/work")),                                  # REMOVE
        b"\1" + dg(60, s("/")),                                     # STAT
        b"\1" + dg(63, s("/l")),                                    # READLINK
        b"\0" + dg(61, s("/a/b/c") + u32(0o700) + u32(7)),          # MKDIR -p, mode
        b"\0" + dg(62, s("/a") + s("/b") + u32(1)),                 # MOVE
        b"\0" + dg(64, s("/l") + s("../../../etc")),                # SYMLINK
        b"\0" + dg(80, u32(8000) + u32(4)),                         # CONNECT
        b"\2" + dg(100, s("/etc/hostname")),                        # READ_TO + pipe
        b"\3" + dg(101, s("/w.txt") + u32(0o600) + u32(7) + u64(1700000000)),  # WRITE_FROM + socket
        b"\0" + dg(4, u32(0) + s("/work") + u32(1) + s("true") + u32(0)),      # EXEC, no fds
        b"\0" + dg(6, s("/../etc/x") + u32(0o644) + u32(0)),
        b"\0" + dg(6, struct.pack("<I", 0xffffffff) + b"/x\0" + u32(0) + u32(0)),
        b"\0" + dg(5, s("/a"), ln=99), b"\0" + dg(5, s("/a"), flags=1), b"\0" + b"\1\0\0",
        b"\1" + dg(60, s("/a")) + b"trailing", b"\0" + dg(999, b"")]
write("init_msg", init)

# ---- chan_reply: [fd_in][replies…][watch stream] ------------------------------------
def rep(ctl, payload=b"", mem=b""):
    return bytes([ctl]) + struct.pack("<H", len(payload)) + payload + struct.pack("<H", len(mem)) + mem


stat_file = struct.pack("<BIQqH", 1, 0o644, 5, 1700000000, 0)
stat_link = struct.pack("<BIQqH", 3, 0o777, 6, 1700000000, 6) + b"target"
lst = struct.pack("<BIQqHI", 1, 0o644, 5, 1700000000, 5, 0) + b"a.txt"
ok = lambda v, aux=None: u64(v) + (u64(aux) if aux is not None else b"")
wev = lambda k, isdir, p1, p2=b"", cnt=0: struct.pack("<BBHHI", k, isdir, len(p1), len(p2), cnt) + p1 + p2
chan = [b"\0" + rep(0, ok(0), stat_file) + rep(0, ok(0), stat_link) + rep(0, ok(1), lst) +
        rep(0, ok(1), lst) + rep(8, ok(5)) + rep(0, ok(0)) + rep(0, ok(0)),
        b"\1" + rep(0, ok(0), stat_file) + rep(1, u32(2)) + rep(0, ok(2), lst + lst) + rep(0, ok(0, 0o644)),
        b"\0" + rep(4, ok(0)) + rep(0, ok(0), stat_file) + rep(2) + rep(3, b"\0\0\x0b\0"),
        b"\0" + rep(0, ok(0), b"\xff" * 23) + rep(16, ok(0)) + rep(32, ok(0)) + rep(0, b"\1\2\3"),
        b"\0" + rep(0, ok(1 << 40), lst) + rep(0, ok(0)) + rep(0, ok(0)) + rep(0, ok(0)) +
        rep(0, ok(0)) + rep(0, ok(0)) + rep(0, ok(0)) + rep(0, ok(0)) +
        wev(1, 0, b"a.txt") + wev(4, 1, b"d", b"e") + wev(5, 0, b"", cnt=9) + wev(7, 0, b""),
        b"\0" + rep(1, u32(0xffffffff)) * 8 + wev(1, 0, b"../x") + wev(1, 0, b"a\0b"),
        b"\0", b"\1" + rep(8, ok(0))]
# eight ERR replies (one per file operation), then the two execs' shepherds
errs = rep(1, u32(2)) * 8
ctl = lambda c, p: bytes([c, len(p)]) + p
exited = lambda st: ctl(2, u32(st) + u64(1500) + u64(2048))
chan += [b"\0" + errs + bytes([2]) + ctl(0, u32(42)) + exited(0) + bytes([3]) + ctl(4, b"") + ctl(0, u32(43)) + exited(9),
         b"\1" + errs + bytes([1]) + ctl(1, u32(2) + u32(0)) + bytes([1]) + ctl(1, u32(13) + u32(1)),
         b"\0" + errs + bytes([2]) + ctl(3, u32(12)) + ctl(0, u32(0)) + bytes([2]) + ctl(0, u32(0x80000000)) + ctl(8, u32(1)),
         b"\0" + errs + bytes([0]) + bytes([4]) + ctl(7, b"\x22" + u32(0)) + ctl(5, b"") + ctl(6, b"") + exited(0x7f)]
write("chan_reply", chan)

# ---- link: [mode][fds][msg/size][split] + link frames (vm/link.h) ---------------
MSG, OPEN, DATA, EOF_, CLOSE, CREDIT = 1, 2, 3, 4, 5, 6
CH_IN, CH_OUT, CH_STREAM, CH_SEQ, CH_FILE_IN, CH_FILE_OUT = 1, 2, 3, 4, 5, 6
MAX_PAYLOAD, WINDOW, MAX_FILE = 64 * 1024 + 256, 256 * 1024, 64 << 20


def fr(kind, chan=0, payload=b"", flags=0, aux=0, zero=0, ln=None):
    return struct.pack("<BBHIII", kind, flags, zero, chan, len(payload) if ln is None else ln,
                       aux) + payload


def lmsg(chan, datagram, ids=()):
    return fr(MSG, chan, u32(len(ids)) + b"".join(u32(i) for i in ids) + datagram)


def hosthdr(fds=0, exec_=False, size=0, slices=0, split=0x88, short=None):
    """The harness's 4 bytes for the host relay; short = the window shortened
    by (short+1)*16 KiB."""
    b0 = slices << 1 | (8 | short << 4 if short is not None else 0)
    return bytes([b0, fds, (size // 512) << 1 | exec_, split])


def guesthdr(slices=0, split=0x88, short=None):
    return bytes([1 | hosthdr(slices=slices, split=split, short=short)[0], 0, 0, split])


ok_reply = dg(10, u64(0))                   # OK{0} to request 7
pong = dg(3, b"", mid=1)
exited = dg(34, u32(0) + u64(1500) + u64(2048), mid=0)
# host: fds bit 0 CH_IN (id 1), 1 CH_OUT, 2 CH_STREAM, 3 CH_SEQ, 4 memfd; ids in that order
ALL = 0x1f                                  # ids 1 IN, 2 OUT, 3 STREAM, 4 SEQ, 5 FILE
link = [
    # the guest's replies on channel 0, then a clean end of every kind
    hosthdr() + lmsg(0, ok_reply) + lmsg(0, pong) + fr(EOF_, 0),
    hosthdr(ALL, size=4096) +
    fr(DATA, 2, b"stdout bytes\n") + fr(EOF_, 2) + fr(CLOSE, 2) +         # CH_OUT
    fr(DATA, 3, b"stream") + fr(EOF_, 3) + fr(CLOSE, 3) +                 # CH_STREAM
    lmsg(4, exited) + fr(CLOSE, 4) +                                      # CH_SEQ
    fr(DATA, 5, struct.pack("<BIQqH", 1, 0o644, 5, 1700000000, 0)) +      # CH_FILE_OUT
    fr(EOF_, 5) + fr(CLOSE, 5) + fr(EOF_, 1) + fr(CLOSE, 1) +             # CH_IN
    lmsg(0, ok_reply),
    # a payload memfd goes in (EXEC): the guest closes it
    hosthdr(0x18, exec_=True, size=8192) + fr(CLOSE, 2) + lmsg(1, dg(32, u32(42), mid=0)),
    # the same streams in two and three slices (the incremental reader)
    hosthdr(0x06, slices=1, split=0x05) + fr(DATA, 1, b"a" * 3000) + fr(DATA, 2, b"b" * 100) +
    fr(EOF_, 1) + fr(CLOSE, 1),
    hosthdr(0x06, slices=2, split=0x73) + fr(DATA, 1, b"a" * 3000) + fr(DATA, 2, b"b" * 100) +
    fr(EOF_, 2) + fr(CLOSE, 2) + lmsg(0, ok_reply),
    # CREDIT within what was sent (windows short by 16 KiB), and past it
    hosthdr(0x05, short=0) + fr(CREDIT, 1, aux=16384) + fr(CREDIT, 2, aux=1000) + fr(CREDIT, 0, aux=4),
    hosthdr(0x05, short=0) + fr(CREDIT, 1, aux=16385),
    hosthdr(0x05) + fr(CREDIT, 1, aux=1),
    hosthdr() + fr(CREDIT, 0, aux=0xffffffff),
    # DATA up to the window's end, and one byte past it (window short by 240 KiB)
    hosthdr(0x02, short=14) + fr(DATA, 1, b"x" * 16384),
    hosthdr(0x02, short=14) + fr(DATA, 1, b"x" * 16384) + fr(DATA, 1, b"y"),
    hosthdr(0x02, short=15) + fr(DATA, 1, b"x" * 2),
    # CH_FILE_OUT: up to its size, one byte past it
    hosthdr(0x10, size=1024) + fr(DATA, 1, b"r" * 1024) + fr(EOF_, 1) + fr(CLOSE, 1),
    hosthdr(0x10, size=1024) + fr(DATA, 1, b"r" * 1000) + fr(DATA, 1, b"r" * 25),
    # what the guest may never send the host
    hosthdr() + lmsg(0, ok_reply, ids=(1,)),                                 # MSG with ids
    hosthdr(0x08) + lmsg(0, ok_reply, ids=(1,)),
    hosthdr() + fr(OPEN, 1, u64(0), flags=CH_IN),                            # OPEN
    hosthdr(0x01) + fr(DATA, 1, b"into stdin"),                              # DATA on CH_IN
    hosthdr(0x18, exec_=True, size=512) + fr(DATA, 2, b"p"),                 # … on CH_FILE_IN
    hosthdr() + fr(DATA, 0, b"not a message"),                               # DATA on chan 0
    hosthdr(0x04) + lmsg(1, ok_reply),                                       # MSG on a stream
    hosthdr() + fr(DATA, 9, b"nobody"),                                      # unknown channel
    hosthdr() + fr(EOF_, 1023) + fr(CLOSE, 1024) + fr(DATA, 0xffffffff, b"z"),
    hosthdr() + fr(CLOSE, 0),                                                # chan 0 cannot close
    hosthdr(0x02) + fr(CLOSE, 1) + fr(DATA, 1, b"after close"),
    hosthdr(0x02) + fr(EOF_, 1) + fr(DATA, 1, b"after eof"),
    hosthdr() + fr(DATA, 0, ln=MAX_PAYLOAD + 1),                             # oversize len
    hosthdr() + fr(MSG, 0, ln=0xffffffff),
    hosthdr() + fr(MSG, 0, u32(0) + ok_reply, zero=1),                       # zero field
    hosthdr() + fr(7, 0) + fr(0, 0),                                         # unknown kinds
    hosthdr() + fr(EOF_, 0, b"x") + fr(CREDIT, 0, b"x", aux=1),              # len on control frames
    hosthdr(0x02) + fr(DATA, 1, b"x", aux=3),                                # aux off CREDIT
    hosthdr() + fr(MSG, 0, u32(0) + b"short"),                               # no datagram header
    hosthdr() + fr(MSG, 0, u32(9) + b"\0" * 60),                             # nids > 8
    hosthdr() + fr(MSG, 0, u32(0) + dg(10, b"\0" * (MAX_PAYLOAD - 20))),   # the largest frame
    # truncated frames: a header cut short, a payload cut short
    hosthdr() + lmsg(0, ok_reply)[:9],
    hosthdr(0x02, slices=2, split=0x31) + fr(DATA, 1, b"q" * 500)[:300],
]
# guest: the host OPENs every class, fills and names them, then closes them
opens = (fr(OPEN, 1, u64(0), flags=CH_IN) + fr(OPEN, 2, u64(0), flags=CH_OUT) +
         fr(OPEN, 3, u64(0), flags=CH_STREAM) + fr(OPEN, 4, u64(0), flags=CH_SEQ) +
         fr(OPEN, 5, u64(4096), flags=CH_FILE_IN) + fr(OPEN, 6, u64(4096), flags=CH_FILE_OUT))
link += [
    guesthdr() + opens + fr(DATA, 5, b"#!/bin/sh\n") + fr(EOF_, 5) +
    lmsg(0, dg(4, b"\0" * 8), ids=(5, 1, 2, 2, 4)) + fr(DATA, 1, b"stdin") + fr(EOF_, 1) +
    lmsg(0, dg(60, s("/a")), ids=(6,)) + lmsg(4, dg(35, u32(9), mid=0)) + fr(DATA, 3, b"w") +
    fr(EOF_, 3) + fr(CLOSE, 1) + fr(CLOSE, 2) + fr(CLOSE, 3) + fr(CLOSE, 4) + fr(CLOSE, 5),
    guesthdr(slices=2, split=0x2c) + opens + lmsg(0, ok_reply, ids=(1, 2, 3, 4, 5, 6)),
    guesthdr(short=3) + opens + fr(CREDIT, 0, aux=65536) + fr(CREDIT, 3, aux=1),  # 3: full window
    guesthdr() + fr(OPEN, 7, u64(MAX_FILE), flags=CH_FILE_IN) + fr(DATA, 7, b"end", ln=None) +
    fr(OPEN, 8, u64(MAX_FILE), flags=CH_FILE_OUT),                          # sparse 64 MiB
    guesthdr() + fr(OPEN, 7, u64(MAX_FILE + 1), flags=CH_FILE_IN),         # over the limit
    guesthdr() + fr(OPEN, 7, u64(1), flags=CH_IN),                           # size on a pipe
    guesthdr() + fr(OPEN, 0, u64(0), flags=CH_IN),                           # id 0
    guesthdr() + fr(OPEN, 1024, u64(0), flags=CH_IN),
    guesthdr() + fr(OPEN, 1, u64(0), flags=CH_IN) * 2,                       # twice
    guesthdr() + fr(OPEN, 1, u64(0), flags=7) + fr(OPEN, 1, u64(0), flags=0),
    guesthdr() + fr(OPEN, 1, u32(0), flags=CH_IN),                           # len 4
    guesthdr() + fr(OPEN, 1, u64(16), flags=CH_FILE_IN) + fr(DATA, 1, b"0123456789abcdefg"),
    guesthdr() + fr(OPEN, 1, u64(0), flags=CH_SEQ) + lmsg(0, ok_reply, ids=(1, 9)),
    guesthdr() + fr(OPEN, 1, u64(0), flags=CH_SEQ) + lmsg(0, ok_reply, ids=(1,) * 9),
    guesthdr() + fr(OPEN, 1, u64(0), flags=CH_OUT) + fr(CLOSE, 1) + fr(CREDIT, 1, aux=100),  # after CLOSE
    guesthdr() + b"".join(fr(OPEN, i, u64(0), flags=CH_STREAM) for i in range(1, 201)),
    guesthdr() + b"".join(fr(OPEN, i, u64(1 << 20), flags=CH_FILE_OUT) for i in range(1, 101)),
]
write("link", link)
