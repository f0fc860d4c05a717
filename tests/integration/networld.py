"""networld.py — the test "internet" of the network-policy tests.

A network namespace joined to the host by one veth pair, holding addresses
ONLY from the documentation ranges (198.51.100.0/24, 203.0.113.0/24,
2001:db8::/32), with host routes to them.  Nothing here ever sends a
packet past this machine: the servers live in the namespace, the host end
of the veth is a host address, and the one private address the tests pin a
name to (rebinding) gets a `prohibit` route so it could not leave either.

What the world serves (all on v4 and v6, every world address):
  HTTP   80, 8080   echoes JSON {"host","path","tls","sni","local","peer"}
  HTTPS  443, 8443  the same over TLS, self-signed certificate made with
                    `openssl req` at start (SAN: every test name and address)
  TCP    7, 8       echo
  UDP    7, 8       echo
  DNS    D4/D6:5300 a tiny upstream resolver (dnspython) for names that are
                    NOT pinned with --resolve, so forwarding can be tested
and the host itself runs `HostService`, a dual-stack listener on all host
addresses answering a secret, which a sandbox must never read.  Every
request, connection, datagram and DNS query the world sees is logged, so a
test can prove a refused attempt never reached the server.

Parallel runs: each run takes a free "slot" (flock on /run/lock) that owns
a /28 of each v4 range, 2001:db8:<slot>::/48 and uniquely named netns and
veth, and clears what a crashed run of the same slot left.

Also a script: `networld.py selftest` builds a world, checks every server
from the host and from a second netns, tears it down and checks nothing is
left; `serve-web` and `serve-dns` are the servers (run inside the netns).
"""
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

SERVER_PYTHON = "/usr/bin/python3"  # has dnspython (python3-dnspython)
HERE = os.path.abspath(__file__)
LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
SLOTS = range(1, 16)

HTTP_PORTS = (80, 8080)
HTTPS_PORTS = (443, 8443)
ECHO_PORTS = (7, 8)
DNS_PORT = 5300


def sh(*argv, check=True, ns=None):
    """Runs one iproute2/sysctl command (in netns `ns` when given)."""
    if ns:
        argv = ("ip", "netns", "exec", ns) + argv
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def ip(*args, check=True):
    return sh("ip", *args, check=check)


# ---- slots ----------------------------------------------------------------

class Slot:
    """An exclusive slot number for this process (flock)."""

    def __init__(self):
        self.n = None
        self.fd = None
        for n in SLOTS:
            fd = os.open(os.path.join(LOCK_DIR, f"sbx-networld-slot-{n}"),
                         os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.n, self.fd = n, fd
            return
        raise RuntimeError("networld: all slots busy (15 parallel runs?)")

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# ---- the world ------------------------------------------------------------

class NetWorld:
    """Build with start(), tear down with stop().  Attributes after start:

    A4/A6    "web A": allowed.test.example, sibling.test.example (same IP)
    W4       the wildcard names (sub.wild…, deep.sub.wild…, wild.test.example)
    B4/B6    the second server IP ("other"), for CIDR and port rules
    D4/D6    the DNS upstream (port DNS_PORT)
    HOST4/6  the host end of the veth: a host address, always closed
    PRIV4    a private address (prohibit-routed on the host) for rebinding
    names    {name: address} pinned with --resolve
    env_names {name: address} pinned through SANDBOXD_RESOLVE instead
    upstream_zone {name: [addresses]} served by the DNS upstream only
    cacert   PEM path of the self-signed certificate (also its own CA)
    host_port, host_secret   the host service
    """

    def __init__(self, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="sbx-networld-")
        self.slot = None
        self.procs = []
        self.host_service = None
        self.started = False

    # -- addressing --

    def _plan(self, s):
        b = 16 * s
        self.tag = uuid.uuid4().hex[:6]
        self.netns = f"tnworld{s:02d}-{self.tag}"
        self.hostif = f"tnw{s:02d}{self.tag}"           # 11 chars < IFNAMSIZ
        self.HOST4 = f"198.51.100.{b + 1}"
        self.A4 = f"198.51.100.{b + 10}"
        self.W4 = f"198.51.100.{b + 11}"
        self.D4 = f"198.51.100.{b + 14}"
        self.B4 = f"203.0.113.{b + 4}"
        self.HOST6 = f"2001:db8:{s:x}::1"
        self.A6 = f"2001:db8:{s:x}::10"
        self.B6 = f"2001:db8:{s:x}::20"
        self.D6 = f"2001:db8:{s:x}::53"
        self.PRIV4 = f"10.1.{s}.3"
        self.CLIENT4 = f"198.51.100.{b + 2}"  # selftest's second netns only
        self.net4 = [f"198.51.100.{b}/28", f"203.0.113.{b}/28"]
        self.net6 = f"2001:db8:{s:x}::/48"
        self.world4 = [self.A4, self.W4, self.D4, self.B4]
        self.world6 = [self.A6, self.B6, self.D6]
        self.names = {
            "allowed.test.example": self.A4,
            "sibling.test.example": self.A4,
            "sub.wild.test.example": self.W4,
            "deep.sub.wild.test.example": self.W4,
            "wild.test.example": self.W4,
            "other.test.example": self.B4,
            "v6.test.example": self.A6,
            "other6.test.example": self.B6,
            "loop.test.example": "127.0.0.1",
            "loop6.test.example": "::1",
            "private.test.example": self.PRIV4,
            "hostend.test.example": self.HOST4,
        }
        self.env_names = {"env.test.example": self.A4}
        self.upstream_zone = {
            "fwd.test.example": [self.A4],
            "fwdrebind.test.example": [self.PRIV4],
            "fwdloop.test.example": ["127.0.0.1"],
        }

    def resolve_args(self):
        out = []
        for n, a in self.names.items():
            out += ["--resolve", f"{n}={a}"]
        return out

    def resolve_env(self):
        """Value for SANDBOXD_RESOLVE (comma list)."""
        return ",".join(f"{n}={a}" for n, a in self.env_names.items())

    @property
    def dns_upstream(self):
        return f"{self.D4}:{DNS_PORT}"

    def daemon_args(self):
        return self.resolve_args() + ["--dns-upstream", self.dns_upstream]

    # -- lifecycle --

    def start(self):
        self.slot = Slot()
        self._plan(self.slot.n)
        try:
            clear_slot(self.slot.n)
            self._certificate()
            self._links()
            self._servers()
            self.host_service = HostService()
            self.host_port = self.host_service.port
            self.host_secret = self.host_service.secret
            self.started = True
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.host_service:
            self.host_service.stop()
            self.host_service = None
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait(10)
        self.procs = []
        if self.slot and self.slot.n is not None and hasattr(self, "netns"):
            kill_netns(self.netns)
            ip("netns", "del", self.netns, check=False)
            ip("link", "del", self.hostif, check=False)
            ip("route", "del", "prohibit", f"{self.PRIV4}/32", check=False)
        if self.slot:
            self.slot.release()
            self.slot = None
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.started = False

    def leftovers(self):
        """What of this world is still on the machine (after stop())."""
        left = []
        if self.netns in ip("netns", "list", check=False):
            left.append(f"netns {self.netns}")
        if ip("link", "show", self.hostif, check=False).strip():
            left.append(f"link {self.hostif}")
        if ip("route", "show", f"{self.PRIV4}/32", check=False).strip():
            left.append(f"route {self.PRIV4}")
        for p in self.procs:
            if p.poll() is None:
                left.append(f"pid {p.pid}")
        return left

    def _certificate(self):
        self.cacert = os.path.join(self.workdir, "cert.pem")
        self.key = os.path.join(self.workdir, "key.pem")
        sans = ["DNS:*.wild.test.example", "DNS:*.sub.wild.test.example"]
        sans += [f"DNS:{n}" for n in list(self.names) + list(self.env_names)
                 + list(self.upstream_zone)]
        sans += [f"IP:{a}" for a in self.world4 + self.world6]
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "2", "-subj", "/CN=allowed.test.example",
             "-keyout", self.key, "-out", self.cacert,
             "-addext", "subjectAltName=" + ",".join(sans),
             "-addext", "basicConstraints=critical,CA:TRUE"],
            check=True, capture_output=True, timeout=60)
        with open(self.cacert) as f:
            self.cacert_pem = f.read()

    def _links(self):
        ns, h = self.netns, self.hostif
        ip("netns", "add", ns)
        ip("link", "add", h, "type", "veth", "peer", "name", "w0", "netns", ns)
        # no DAD: the v6 addresses are usable at once, not after ~1 s
        with open(f"/proc/sys/net/ipv6/conf/{h}/accept_dad", "w") as f:
            f.write("0")
        sh("sysctl", "-qw", "net.ipv6.conf.w0.accept_dad=0", ns=ns)
        ip("addr", "add", f"{self.HOST4}/32", "dev", h)
        ip("-6", "addr", "add", f"{self.HOST6}/128", "dev", h, "nodad")
        ip("link", "set", h, "up")
        for net in self.net4:
            ip("route", "add", net, "dev", h, "src", self.HOST4)
        ip("-6", "route", "add", self.net6, "dev", h, "src", self.HOST6)
        ip("route", "add", "prohibit", f"{self.PRIV4}/32")
        ip("-n", ns, "link", "set", "lo", "up")
        for a in self.world4:
            ip("-n", ns, "addr", "add", f"{a}/32", "dev", "w0")
        for a in self.world6:
            ip("-n", ns, "-6", "addr", "add", f"{a}/128", "dev", "w0", "nodad")
        ip("-n", ns, "link", "set", "w0", "up")
        ip("-n", ns, "route", "add", f"{self.HOST4}/32", "dev", "w0")
        ip("-n", ns, "route", "add", "default", "via", self.HOST4, "dev", "w0")
        ip("-n", ns, "-6", "route", "add", f"{self.HOST6}/128", "dev", "w0")
        ip("-n", ns, "-6", "route", "add", "default", "via", self.HOST6, "dev", "w0")

    def _spawn(self, *args):
        p = subprocess.Popen(["ip", "netns", "exec", self.netns, SERVER_PYTHON, HERE] + list(args),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(self.workdir, f"{args[0]}.err"), "ab"),
                             start_new_session=True)
        self.procs.append(p)
        r, _, _ = select.select([p.stdout], [], [], 30)
        line = p.stdout.readline() if r else b""
        if line.strip() != b"READY":
            with open(os.path.join(self.workdir, f"{args[0]}.err"), "rb") as f:
                err = f.read().decode(errors="replace")
            raise RuntimeError(f"networld {args[0]} did not start: {line!r}\n{err}")

    def _servers(self):
        self.web_log = os.path.join(self.workdir, "web.jsonl")
        self.dns_log = os.path.join(self.workdir, "dns.jsonl")
        self._spawn("serve-web", self.cacert, self.key, self.web_log)
        zone = os.path.join(self.workdir, "zone.json")
        with open(zone, "w") as f:
            json.dump(self.upstream_zone, f)
        self._spawn("serve-dns", zone, self.dns_log, self.D4, self.D6)

    # -- what the world saw --

    def _read(self, path):
        try:
            with open(path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def web_events(self):
        """Every HTTP(S) request, TCP connection and UDP datagram seen."""
        return self._read(self.web_log)

    def dns_queries(self):
        return self._read(self.dns_log)

    def saw(self, token):
        """Whether any world server saw `token` (in a path, Host, payload)."""
        return any(token in json.dumps(e) for e in self.web_events())

    def dns_saw(self, token):
        return any(token in q.get("name", "") for q in self.dns_queries())


def kill_netns(ns):
    for pid in ip("netns", "pids", ns, check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def clear_slot(n):
    """Removes what a crashed run of slot n left (we hold its lock)."""
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"tnworld{n:02d}-"):
            kill_netns(name)
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(f"tnw{n:02d}"):
                ip("link", "del", name, check=False)
    ip("route", "del", "prohibit", f"10.1.{n}.3/32", check=False)


# ---- the host service -------------------------------------------------------

class HostService:
    """A TCP listener on every host address (v4 and v6) that answers a
    secret: whatever a sandbox reads from it is a leak."""

    def __init__(self):
        self.secret = "HOST-SECRET-" + uuid.uuid4().hex
        self.sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("::", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.hits = []
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stopping:
            try:
                c, peer = self.sock.accept()
            except OSError:
                return
            self.hits.append(peer[0])
            try:
                body = self.secret.encode()
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass
            c.close()

    def stop(self):
        self.stopping = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


# ---- servers (run inside the netns) -----------------------------------------

class EventLog:
    def __init__(self, path):
        self.f = open(path, "a")
        self.lock = threading.Lock()

    def write(self, **ev):
        ev["t"] = time.time()
        with self.lock:
            self.f.write(json.dumps(ev) + "\n")
            self.f.flush()


def dual_stack(kind):
    s = socket.socket(socket.AF_INET6, kind)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return s


def plain(addr):
    return addr[7:] if addr.startswith("::ffff:") else addr


def serve_web(cert, key, log_path):
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    log = EventLog(log_path)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def answer(self):
            tls = isinstance(self.connection, ssl.SSLSocket)
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            local = self.connection.getsockname()
            ev = {"kind": "https" if tls else "http", "method": self.command,
                  "host": self.headers.get("Host"), "path": self.path, "tls": tls,
                  "sni": getattr(self.connection, "sni", None) if tls else None,
                  "local": plain(local[0]), "port": local[1],
                  "peer": plain(self.client_address[0]), "body": body.decode(errors="replace")}
            log.write(**ev)
            out = json.dumps(dict(ev, server="networld")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(out)

        do_GET = do_POST = do_PUT = do_HEAD = answer

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6
        daemon_threads = True
        request_queue_size = 128

        def server_bind(self):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

        def handle_error(self, request, client_address):
            pass

    class TLSServer(Server):
        def finish_request(self, request, client_address):
            # the handshake in the connection's own thread, never in accept's
            request.settimeout(15)
            tls = ctx.wrap_socket(request, server_side=True)
            self.RequestHandlerClass(tls, client_address, self)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def remember_sni(sslsock, name, _ctx):
        sslsock.sni = name

    ctx.sni_callback = remember_sni

    servers = [Server(("::", p), Handler) for p in HTTP_PORTS]
    servers += [TLSServer(("::", p), Handler) for p in HTTPS_PORTS]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()

    def tcp_conn(c, peer, port):
        c.settimeout(30)
        first = True
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                if first:
                    log.write(kind="tcp", port=port, peer=plain(peer[0]),
                              local=plain(c.getsockname()[0]), data=d[:200].decode(errors="replace"))
                    first = False
                c.sendall(d)
        except OSError:
            pass
        finally:
            if first:
                log.write(kind="tcp", port=port, peer=plain(peer[0]),
                          local=plain(c.getsockname()[0]), data="")
            c.close()

    def tcp_echo(port):
        s = dual_stack(socket.SOCK_STREAM)
        s.bind(("::", port))
        s.listen(128)

        def loop():
            while True:
                c, peer = s.accept()
                threading.Thread(target=tcp_conn, args=(c, peer, port), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()

    def udp_echo(port):
        s = dual_stack(socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
        s.bind(("::", port))

        def loop():
            while True:
                d, anc, _, peer = s.recvmsg(65536, socket.CMSG_SPACE(20))
                log.write(kind="udp", port=port, peer=plain(peer[0]),
                          data=d[:200].decode(errors="replace"))
                # answer from the address the datagram was sent to
                s.sendmsg([d], [(l, t, v) for l, t, v in anc
                                if l == socket.IPPROTO_IPV6 and t == socket.IPV6_PKTINFO],
                          0, peer)
        threading.Thread(target=loop, daemon=True).start()

    for p in ECHO_PORTS:
        tcp_echo(p)
        udp_echo(p)
    print("READY", flush=True)
    while True:
        time.sleep(3600)


def serve_dns(zone_path, log_path, *addrs):
    import dns.message
    import dns.rcode
    import dns.rdatatype
    import dns.rrset

    with open(zone_path) as f:
        zone = {k.lower().rstrip("."): v for k, v in json.load(f).items()}
    log = EventLog(log_path)

    def answer(wire, peer, proto):
        q = dns.message.from_wire(wire)
        r = dns.message.make_response(q)
        if not q.question:
            r.set_rcode(dns.rcode.FORMERR)
            return r.to_wire()
        qq = q.question[0]
        name = qq.name.to_text().lower().rstrip(".")
        rtype = dns.rdatatype.to_text(qq.rdtype)
        log.write(kind="dns", name=name, type=rtype, peer=plain(peer[0]), proto=proto)
        if name not in zone:
            r.set_rcode(dns.rcode.NXDOMAIN)
            return r.to_wire()
        want = [a for a in zone[name] if (":" in a) == (rtype == "AAAA")]
        if rtype in ("A", "AAAA") and want:
            r.answer.append(dns.rrset.from_text(qq.name, 60, "IN", rtype, *want))
        return r.to_wire()

    def udp(addr):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.bind((addr, DNS_PORT))

        def loop():
            while True:
                d, peer = s.recvfrom(65535)
                try:
                    s.sendto(answer(d, peer, "udp"), peer)
                except Exception:  # a malformed query gets no answer
                    pass
        threading.Thread(target=loop, daemon=True).start()

    def tcp_conn(c, peer):
        c.settimeout(10)
        try:
            n = int.from_bytes(c.recv(2), "big")
            d = b""
            while len(d) < n:
                chunk = c.recv(n - len(d))
                if not chunk:
                    return
                d += chunk
            out = answer(d, peer, "tcp")
            c.sendall(len(out).to_bytes(2, "big") + out)
        except Exception:
            pass
        finally:
            c.close()

    def tcp(addr):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, DNS_PORT))
        s.listen(32)

        def loop():
            while True:
                c, peer = s.accept()
                threading.Thread(target=tcp_conn, args=(c, peer), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()

    for a in addrs:
        udp(a)
        tcp(a)
    print("READY", flush=True)
    while True:
        time.sleep(3600)


# ---- selftest -------------------------------------------------------------

def selftest():
    """Every server from the host and from a second netns; then teardown."""
    import dns.message
    import dns.query

    w = NetWorld().start()
    client_ns = f"tnclient{w.slot.n:02d}-{w.tag}"
    ok = True

    def check(what, cond, detail=""):
        nonlocal ok
        ok &= bool(cond)
        print(("ok   " if cond else "FAIL ") + what + (f"  ({detail})" if not cond else ""))

    def curl(url, pin, ns=None, extra=()):
        host = url.split("/")[2]
        port = 443 if url.startswith("https") else 80
        if ":" in host.rsplit("]", 1)[-1]:
            host, port = host.rsplit(":", 1)
        addr = f"[{pin}]" if ":" in pin else pin
        argv = ["curl", "-sS", "-m", "10", "--noproxy", "*", "--cacert", w.cacert,
                "--resolve", f"{host}:{port}:{addr}", *extra, url]
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"error": r.stderr.strip()}

    def echo(addr, port, kind, ns=None):
        code = ("import socket,sys\n"
                "a,p,k=sys.argv[1],int(sys.argv[2]),sys.argv[3]\n"
                "f=socket.AF_INET6 if ':' in a else socket.AF_INET\n"
                "if k=='tcp':\n s=socket.create_connection((a,p),5); s.sendall(b'hello')\n"
                "else:\n s=socket.socket(f,socket.SOCK_DGRAM); s.settimeout(5);"
                " s.connect((a,p)); s.send(b'hello')\n"
                "print(s.recv(100).decode())\n")
        argv = [SERVER_PYTHON, "-c", code, addr, str(port), kind]
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return r.stdout.strip()

    def probe_all(ns, where):
        for name, addr in [("allowed.test.example", w.A4), ("sibling.test.example", w.A4),
                           ("sub.wild.test.example", w.W4), ("v6.test.example", w.A6)]:
            for scheme, port in (("http", 80), ("https", 443), ("http", 8080), ("https", 8443)):
                got = curl(f"{scheme}://{name}:{port}/p/{where}", addr, ns)
                check(f"{where}: {scheme} {name}:{port} via {addr}",
                      got.get("host") in (name, f"{name}:{port}")
                      and got.get("path") == f"/p/{where}"
                      and got.get("local") == addr
                      and got.get("tls") == (scheme == "https")
                      and (scheme == "http" or got.get("sni") == name), got)
        for a in w.world4 + w.world6:
            for port in ECHO_PORTS:
                for kind in ("tcp", "udp"):
                    check(f"{where}: {kind} echo {a}:{port}", echo(a, port, kind, ns) == "hello")

    probe_all(None, "host")
    for a in (w.D4, w.D6):
        q = dns.message.make_query("fwd.test.example", "A")
        r = dns.query.udp(q, a, port=DNS_PORT, timeout=5)
        check(f"host: dns udp {a}", [x.to_text() for rr in r.answer for x in rr] == [w.A4], r)
        r = dns.query.tcp(dns.message.make_query("nope.test.example", "A"), a, port=DNS_PORT,
                          timeout=5)
        check(f"host: dns tcp {a} NXDOMAIN", r.rcode() == 3, r)
    check("dns log", w.dns_saw("fwd.test.example") and w.dns_saw("nope.test.example"))
    check("web log", w.saw("/p/host"))
    hs = socket.create_connection(("127.0.0.1", w.host_port), 5).recv(1000).decode()
    check("host service", w.host_secret in hs, hs)

    # a second netns, linked to the world directly
    try:
        ip("netns", "add", client_ns)
        ip("link", "add", "c0", "netns", client_ns, "type", "veth", "peer", "name", "wc",
           "netns", w.netns)
        sh("sysctl", "-qw", "net.ipv6.conf.c0.accept_dad=0", ns=client_ns)
        sh("sysctl", "-qw", "net.ipv6.conf.wc.accept_dad=0", ns=w.netns)
        client6 = w.net6.split("::")[0] + "::2"
        ip("-n", client_ns, "addr", "add", f"{w.CLIENT4}/32", "dev", "c0")
        ip("-n", client_ns, "-6", "addr", "add", f"{client6}/128", "dev", "c0", "nodad")
        for n, dev in ((client_ns, "c0"), (w.netns, "wc")):
            ip("-n", n, "link", "set", dev, "up")
        ip("-n", client_ns, "link", "set", "lo", "up")
        for a in w.world4:
            ip("-n", client_ns, "route", "add", f"{a}/32", "dev", "c0")
        # NDP answers only for the receiving interface's own addresses: the
        # world's v6 addresses sit on w0, so route them via wc's own address
        gw6 = w.net6.split("::")[0] + "::fe"
        ip("-n", w.netns, "-6", "addr", "add", f"{gw6}/128", "dev", "wc", "nodad")
        ip("-n", client_ns, "-6", "route", "add", f"{gw6}/128", "dev", "c0")
        for a in w.world6:
            ip("-n", client_ns, "-6", "route", "add", f"{a}/128", "via", gw6, "dev", "c0")
        ip("-n", w.netns, "route", "add", f"{w.CLIENT4}/32", "dev", "wc")
        ip("-n", w.netns, "-6", "route", "add", f"{client6}/128", "dev", "wc")
        probe_all(client_ns, "netns")
        check("netns peers logged", any(e.get("peer") == w.CLIENT4 for e in w.web_events()))
    finally:
        ip("netns", "del", client_ns, check=False)
    w.stop()
    left = w.leftovers()
    check("teardown leaves nothing", not left, left)
    return 0 if ok else 1


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "selftest"
    if cmd == "serve-web":
        serve_web(*sys.argv[2:5])
    elif cmd == "serve-dns":
        serve_dns(*sys.argv[2:])
    elif cmd == "selftest":
        sys.exit(selftest())
    else:
        sys.exit(f"usage: {sys.argv[0]} selftest|serve-web|serve-dns")
