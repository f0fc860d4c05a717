"""imgworld.py — the image world of the image tests: a real registry
(Debian's `docker-registry`, i.e. distribution 2.8) on a free loopback port
with a temporary config and storage, optionally behind htpasswd basic auth
or the bearer-token flow (a tiny token server in this file signs JWTs with
openssl), and test images built here from small rootfs trees with
busybox-static — as OCI layouts written directly (they are just JSON and
tars), pushed with skopeo, or converted by skopeo to an OCI archive or a
`docker save` tarball.

Only 127.0.0.1 is ever contacted.
"""
import base64
import warnings

with warnings.catch_warnings():  # htpasswd wants bcrypt; crypt has it (deprecated in 3.11)
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.parse
import urllib.request

from sbxtest import build_dir, free_port

BUSYBOX = "/bin/busybox"


def sbx_image_bin():
    b = build_dir()
    for cand in (os.path.join(b, "sbx-image"), os.path.join(b, "src", "image", "sbx-image")):
        if os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError(f"sbx-image not found under {b}")


def sbx_image(state, *args, check=True, env=None, timeout=300):
    """Runs `sbx-image ARGS --state-dir STATE`; returns CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sbx_image_bin(), *args, "--state-dir", str(state)],
                       capture_output=True, text=True, env=e, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"sbx-image {args} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


# ---- layers and images -------------------------------------------------------

def sha256(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def tar_bytes(entries):
    """entries: list of (name, kind, data/target, mode[, (uid, gid)]) with
    kind in file|dir|symlink|hardlink|chardev|fifo (owner 0:0 unless
    given).  Returns the tar (uncompressed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ent in entries:
            name, kind = ent[0], ent[1]
            data = ent[2] if len(ent) > 2 else None
            mode = ent[3] if len(ent) > 3 else None
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if len(ent) > 4:
                ti.uid, ti.gid = ent[4]
            if kind == "file":
                data = data if isinstance(data, bytes) else (data or "").encode()
                ti.size = len(data)
                ti.mode = 0o644 if mode is None else mode
                t.addfile(ti, io.BytesIO(data))
                continue
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755 if mode is None else mode
            elif kind == "symlink":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, data, 0o777
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, data
            elif kind == "chardev":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, data[0], data[1]
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            t.addfile(ti)
    return buf.getvalue()


def rootfs_entries(extra_files=None):
    """A busybox rootfs: /bin/busybox, /bin/sh → busybox, /etc, /tmp."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    ents = [("bin", "dir"), ("bin/busybox", "file", bb, 0o755), ("bin/sh", "symlink", "busybox"),
            ("etc", "dir"), ("etc/passwd", "file", "root:x:0:0:root:/root:/bin/sh\n"),
            ("tmp", "dir", None, 0o1777)]
    for name, content in (extra_files or {}).items():
        ents.append((name, "file", content))
    return ents


class Image:
    """An OCI image held in memory: layers (compressed blobs), a config."""

    def __init__(self, layers_entries, config=None, compress="gzip"):
        self.layers = []  # (mediaType, blob bytes, diff_id)
        for ents in layers_entries:
            raw = tar_bytes(ents)
            if compress == "gzip":
                blob = gzip.compress(raw, mtime=0)
                mt = "application/vnd.oci.image.layer.v1.tar+gzip"
            else:
                blob, mt = raw, "application/vnd.oci.image.layer.v1.tar"
            self.layers.append((mt, blob, sha256(raw)))
        cfg = {"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/tmp",
               "Cmd": ["/bin/sh", "-c", "echo hi"], "User": "0"}
        cfg.update(config or {})
        self.config = json.dumps({
            "architecture": "amd64", "os": "linux", "config": cfg,
            "rootfs": {"type": "layers", "diff_ids": [l[2] for l in self.layers]},
        }, sort_keys=True).encode()
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "size": len(self.config), "digest": sha256(self.config)},
            "layers": [{"mediaType": mt, "size": len(b), "digest": sha256(b)}
                       for mt, b, _ in self.layers],
        }, sort_keys=True).encode()
        self.digest = sha256(self.manifest)

    def layer_digests(self):
        return [sha256(b) for _, b, _ in self.layers]

    def write_layout(self, path, ref_name=None):
        """An OCI image layout directory at path."""
        blobs = os.path.join(path, "blobs", "sha256")
        os.makedirs(blobs, exist_ok=True)
        for b in [self.config, self.manifest] + [l[1] for l in self.layers]:
            with open(os.path.join(blobs, sha256(b)[7:]), "wb") as f:
                f.write(b)
        entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "size": len(self.manifest), "digest": self.digest}
        if ref_name:
            entry["annotations"] = {"org.opencontainers.image.ref.name": ref_name}
        with open(os.path.join(path, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": [entry]}, f)
        with open(os.path.join(path, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        return path


def skopeo(*args):
    p = subprocess.run(["skopeo", "--insecure-policy", *args], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"skopeo {args}: {p.stderr}")
    return p


def to_oci_archive(layout, path):
    skopeo("copy", f"oci:{layout}", f"oci-archive:{path}")
    return path


def to_docker_archive(layout, path, name):
    skopeo("copy", f"oci:{layout}", f"docker-archive:{path}:{name}")
    return path


# ---- the registry ------------------------------------------------------------

def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class Registry:
    """docker-registry on 127.0.0.1:<free port>.  auth: None, "htpasswd"
    (user/password below) or a TokenServer (bearer flow)."""

    user, password = "tester", "s3cret-pw"

    def __init__(self, workdir, storage=None, auth=None):
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        self.storage = storage or os.path.join(self.dir, "storage")
        os.makedirs(self.storage, exist_ok=True)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.auth = auth
        self.proc = None

    def config(self):
        cfg = ["version: 0.1", "log:", "  level: warn", "storage:",
               "  filesystem:", f"    rootdirectory: {self.storage}",
               "  delete:", "    enabled: true", "http:", f"  addr: 127.0.0.1:{self.port}"]
        if self.auth == "htpasswd":
            hp = os.path.join(self.dir, "htpasswd")
            with open(hp, "w") as f:
                f.write(f"{self.user}:{crypt.crypt(self.password, crypt.mksalt(crypt.METHOD_BLOWFISH))}\n")
            cfg += ["auth:", "  htpasswd:", "    realm: test", f"    path: {hp}"]
        elif isinstance(self.auth, TokenServer):
            t = self.auth
            cfg += ["auth:", "  token:", f"    realm: {t.url}/token", f"    service: {t.service}",
                    f"    issuer: {t.issuer}", f"    rootcertbundle: {t.cert}"]
        return "\n".join(cfg) + "\n"

    def start(self):
        path = os.path.join(self.dir, "config.yml")
        with open(path, "w") as f:
            f.write(self.config())
        self.log = open(os.path.join(self.dir, "registry.log"), "w")
        self.proc = subprocess.Popen(["docker-registry", "serve", path], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_port(self.port)
        return self

    def stop(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self.log.close()

    def push(self, image, repo_tag):
        """Pushes an Image (through a temp OCI layout) to repo_tag."""
        layout = os.path.join(self.dir, "push-" + hashlib.sha1(repo_tag.encode()).hexdigest()[:8])
        shutil.rmtree(layout, ignore_errors=True)
        image.write_layout(layout)
        skopeo("copy", "--dest-tls-verify=false", f"oci:{layout}",
               f"docker://{self.host}/{repo_tag}")
        return f"{self.host}/{repo_tag}"

    def blob_path(self, digest):
        hexd = digest.split(":", 1)[1]
        return os.path.join(self.storage, "docker", "registry", "v2", "blobs", "sha256",
                            hexd[:2], hexd, "data")

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()


def write_auth_json(state, host, user, password):
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, "auth.json")
    tok = base64.b64encode(f"{user}:{password}".encode()).decode()
    with open(path, "w") as f:
        json.dump({"auths": {host: {"auth": tok}}}, f)
    os.chmod(path, 0o600)


# ---- a bearer token server ---------------------------------------------------

def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class TokenServer:
    """The token endpoint of the Docker auth flow: GET /token?service&scope
    with basic credentials answers {"token": JWT} signed RS256 with a
    self-signed certificate (sent in the x5c header; the registry trusts it
    through rootcertbundle).  Counts issued tokens; refuses bad passwords."""

    service, issuer = "sbx-test-registry", "sbx-test-issuer"
    user, password = "tokenuser", "tokenpass"

    def __init__(self, workdir):
        self.dir = str(workdir)
        os.makedirs(self.dir, exist_ok=True)
        self.key = os.path.join(self.dir, "key.pem")
        self.cert = os.path.join(self.dir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        self.key, "-out", self.cert, "-days", "2", "-subj", "/CN=sbx-token"],
                       check=True, capture_output=True)
        der = subprocess.run(["openssl", "x509", "-in", self.cert, "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x5c = base64.b64encode(der).decode()
        self.issued = []
        self.refused = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def sign(self, claims):
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        signing = (b64url(json.dumps(header).encode()) + "." +
                   b64url(json.dumps(claims).encode())).encode()
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", self.key], input=signing,
                             check=True, capture_output=True).stdout
        return signing.decode() + "." + b64url(sig)

    def token_for(self, scope):
        access = []
        if scope:
            typ, name, actions = scope.split(":", 2)
            access.append({"type": typ, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        return self.sign({"iss": self.issuer, "sub": self.user, "aud": self.service,
                          "exp": now + 300, "nbf": now - 10, "iat": now,
                          "jti": os.urandom(8).hex(), "access": access})

    def start(self):
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                want = "Basic " + base64.b64encode(
                    f"{server.user}:{server.password}".encode()).decode()
                if u.path != "/token" or self.headers.get("Authorization") != want:
                    server.refused += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                scope = q.get("scope", [""])[0]
                body = json.dumps({"token": server.token_for(scope)}).encode()
                server.issued.append(scope)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def push_token(self, repo):
        return self.token_for(f"repository:{repo}:pull,push")


def fetch(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read()


def tree_digest(path):
    """Every name, mode, owner, size, mtime, xattr and byte under path."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, path)} {st.st_mode:o} {st.st_uid}:{st.st_gid} "
                     f"{st.st_size} {st.st_mtime_ns} {st.st_rdev}\n".encode())
            try:
                for x in sorted(os.listxattr(p, follow_symlinks=False)):
                    h.update(x.encode() + os.getxattr(p, x, follow_symlinks=False))
            except OSError:
                pass
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def registry_fixture(name):
    """A module-scoped pytest fixture `registry`: a Registry on loopback."""
    import pytest

    @pytest.fixture(scope="module")
    def registry(tmp_path_factory):
        r = Registry(tmp_path_factory.mktemp(name)).start()
        yield r
        r.stop()
    return registry
