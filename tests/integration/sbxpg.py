"""sbxpg.py — a throw-away PostgreSQL server for the tests (Debian's
postgresql package): initdb into a temp dir owned by the `postgres` user
(PostgreSQL refuses to run as root), a unix socket in that dir plus a free
127.0.0.1 port with password (SCRAM) authentication, two roles per the
deployment in docs/postgres.md — `sbx_owner` (owns the schema, runs
migrations) and `sbx_app` (what the daemon connects as: DML only, no
superuser, no BYPASSRLS) — and one database per daemon.

Used by conftest.py (SANDBOXD_TEST_DATABASE=postgres), by
test_postgres.py, and as a wrapper for the C unit test:

    sbxpg.py run -- ./test_store_pg

starts a server and a database, exports SBX_TEST_PG_APP_URL,
SBX_TEST_PG_OWNER_URL, SBX_TEST_PG_SUPER_URL, runs the command, stops and
removes the server.  Exits 77 (meson's "skipped") only when the PostgreSQL
binaries are not installed.
"""
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

OWNER = "sbx_owner"
APP = "sbx_app"


def pg_bindir():
    """Newest /usr/lib/postgresql/N/bin holding initdb, or None."""
    cands = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.path.exists(d + "/initdb")]
    cands.sort(key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)
    return cands[-1] if cands else None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in a temp dir.  start(), database(), stop()."""

    def __init__(self):
        self.bindir = pg_bindir()
        if not self.bindir:
            raise FileNotFoundError("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        self.dir = None
        self.port = None
        self.owner_pw = uuid.uuid4().hex
        self.app_pw = uuid.uuid4().hex
        self.as_user = None  # run the server as this user (when we are root)

    # -- process plumbing --

    def _run(self, argv, check=True, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        if self.as_user:
            kw["user"] = self.as_user
            kw["group"] = pwd.getpwnam(self.as_user).pw_gid
            kw["extra_groups"] = []
        r = subprocess.run(argv, cwd=self.dir, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({r.returncode}): {r.stdout}\n{r.stderr}")
        return r

    @property
    def data(self):
        return os.path.join(self.dir, "data")

    @property
    def log(self):
        return os.path.join(self.dir, "server.log")

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="sbx-pg-")
        if os.geteuid() == 0:
            self.as_user = "postgres"
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o755)  # the socket must be reachable by the daemon
        pwfile = os.path.join(self.dir, "superpw")
        with open(pwfile, "w") as f:
            f.write(uuid.uuid4().hex + "\n")
        if self.as_user:
            pw = pwd.getpwnam(self.as_user)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        self._run([self.bindir + "/initdb", "-D", self.data, "-U", "postgres", "--no-sync",
                   "-E", "UTF8", "--locale=C.UTF-8", "--auth-local=trust",
                   "--auth-host=scram-sha-256", "--pwfile", pwfile])
        self.port = free_port()
        self.pg_start()
        self.psql("postgres", f"CREATE ROLE {OWNER} LOGIN PASSWORD '{self.owner_pw}';"
                              f"CREATE ROLE {APP} LOGIN PASSWORD '{self.app_pw}'")
        return self

    def pg_start(self):
        # Test speed over durability: a clean stop still writes everything.
        opts = (f"-c port={self.port} -c listen_addresses=127.0.0.1"
                f" -c unix_socket_directories={self.dir} -c fsync=off"
                f" -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run([self.bindir + "/pg_ctl", "-D", self.data, "-l", self.log, "-o", opts,
                   "-w", "-t", "60", "start"])

    def pg_stop(self, mode="fast"):
        self._run([self.bindir + "/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60",
                   "stop"], check=False)

    def stop(self):
        if not self.dir:
            return
        self.pg_stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def psql(self, db, sql):
        """Runs sql as the superuser over the unix socket; returns stdout."""
        r = self._run([self.bindir + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                       "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d", db,
                       "-c", sql])
        return r.stdout.strip()

    # -- URLs and databases --

    def url(self, db, role, password):
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{db}"

    def app_url(self, db):
        return self.url(db, APP, self.app_pw)

    def owner_url(self, db):
        return self.url(db, OWNER, self.owner_pw)

    def super_url(self, db):
        return f"postgresql://postgres@/{db}?host={self.dir}&port={self.port}"

    def database(self, name=None):
        """A new empty database owned by sbx_owner; returns its name."""
        name = name or "sbx_" + uuid.uuid4().hex[:12]
        self.psql("postgres", f"CREATE DATABASE {name} OWNER {OWNER}")
        return name


# ---- SANDBOXD_TEST_DATABASE=postgres: one server per pytest session ------

_server = None
_databases = {}  # state dir → app URL (a restarted daemon finds its data)


def enabled():
    return os.environ.get("SANDBOXD_TEST_DATABASE", "").lower() in ("postgres", "postgresql")


def database_for(state_dir, sandboxd):
    """The app URL of state_dir's own database (created and initialised
    with `sandboxd db init` on first use), or None in SQLite mode."""
    global _server
    if not enabled():
        return None
    key = os.path.realpath(str(state_dir))
    if key not in _databases:
        if _server is None:
            _server = PgServer().start()
        db = _server.database()
        app, owner = _server.app_url(db), _server.owner_url(db)
        r = subprocess.run([sandboxd, "db", "init", "--database", app, "--owner-url", owner],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"sandboxd db init failed: {r.stderr}")
        _databases[key] = app
    return _databases[key]


def session_server():
    """The session's server (None before the first database_for)."""
    return _server


def query(database_url, sql):
    """Runs sql as the superuser on the database behind a daemon's
    database_url (for tests that inspect or tamper with rows behind the
    daemon's back); returns the rows as tuples of strings."""
    db = database_url.rsplit("/", 1)[1].split("?")[0]
    out = _server.psql(db, sql)
    return [tuple(line.split("|")) for line in out.splitlines() if line]


def stop_test_server():
    global _server
    if _server is not None:
        _server.stop()
        _server = None
    _databases.clear()


def main(argv):
    if len(argv) < 3 or argv[1] != "run" or "--" not in argv:
        print("usage: sbxpg.py run -- COMMAND...", file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    if not pg_bindir():
        print("SKIP: PostgreSQL server binaries not installed (apt-get install postgresql)")
        return 77
    pg = PgServer()
    try:
        pg.start()
        db = pg.database()
        env = dict(os.environ, SBX_TEST_PG_APP_URL=pg.app_url(db),
                   SBX_TEST_PG_OWNER_URL=pg.owner_url(db), SBX_TEST_PG_SUPER_URL=pg.super_url(db),
                   SBX_TEST_PG_SOCKET_DIR=pg.dir, SBX_TEST_PG_PORT=str(pg.port))
        return subprocess.run(cmd, env=env).returncode
    finally:
        pg.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
