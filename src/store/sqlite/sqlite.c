/* sqlite.c — the SQLite storage backend: opening <dir>/sandboxd.db with the
 * settings the daemon depends on (WAL, busy timeout, foreign keys,
 * synchronous=NORMAL), migrating it, closing it, the /readyz ping, and the
 * ops table.  The queries live in tenants.c, sessions.c, executions.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "store/sqlite/sqlite_int.h"

/* synchronous=NORMAL in WAL mode: a power cut may lose the last commits but
 * never corrupts the database; the daemon reconciles at start anyway. */
static const char PRAGMAS[] = "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;";

static int set_wal(struct sbx_store *st, struct sbx_error *err)
{
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
  if (rc == SQLITE_OK)
    rc = sq_step(s);
  const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
  int wal = mode && strcmp(mode, "wal") == 0;
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "set journal_mode=WAL", err);
  if (!wal)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "store: the database refused WAL journal mode");
  return 0;
}

/* Create the file ourselves so it is 0600 whatever the umask: it holds key
 * hashes and every tenant's output.  SQLite gives -wal/-shm the same mode. */
static int create_private(const char *path, struct sbx_error *err)
{
  _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "store: create %s", path);
  return 0;
}

static int configure(struct sbx_store *st, struct sbx_error *err)
{
  sqlite3_extended_result_codes(st->db, 1);
  sqlite3_busy_timeout(st->db, SQ_BUSY_TIMEOUT_MS);
  if (set_wal(st, err) < 0 || sq_exec_sql(st, PRAGMAS, "pragmas", err) < 0)
    return -1;
  return sq_migrate(st, err);
}

static void sqlite_close(struct sbx_store *st)
{
  if (!st)
    return;
  for (int i = 0; i < SQ_NSLOTS; i++)
    sqlite3_finalize(st->stmt[i]);
  sqlite3_close(st->db);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

static int sqlite_open(const char *dir, struct sbx_store **out, struct sbx_error *err)
{
  char path[PATH_MAX];
  if (!dir || !*dir)
    return sbx_err_set(err, SBX_E_INVALID, 0, "store: no state directory given");
  if ((size_t)snprintf(path, sizeof path, "%s/sandboxd.db", dir) >= sizeof path)
    return sbx_err_set(err, SBX_E_INVALID, 0, "store: state directory path too long");
  if (sbx_mkdir_p(dir, 0700) < 0)
    return sbx_err_sys(err, errno, "store: create state directory %s", dir);
  if (create_private(path, err) < 0)
    return -1;
  struct sbx_store *st = calloc(1, sizeof *st);
  if (!st)
    return sbx_err_sys(err, ENOMEM, "store: open");
  pthread_mutex_init(&st->lock, NULL);
  /* NOMUTEX: st->lock already serialises every use of the connection. */
  int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    sq_fail(st, rc, "open database", err);
  } else if (configure(st, err) == 0) {
    *out = st;
    return 0;
  }
  sbx_err_prefix(err, "%s", path);
  sqlite_close(st);
  return -1;
}

static int sqlite_ping(struct sbx_store *st, struct sbx_error *err)
{
  _cleanup_sq_unlock_ struct sbx_store *locked = sq_lock(st);
  _cleanup_sq_reset_ sqlite3_stmt *s = NULL;
  if (sq_stmt(st, SQ_PING, "SELECT MAX(version) FROM schema_migrations", &s, err) < 0)
    return -1;
  int rc = sq_step(s);
  if (rc != SQLITE_ROW)
    return sq_fail(st, rc, "ping", err);
  return 0;
}

/* clang-format off */
const struct sbx_store_ops sbx_store_sqlite = {
  .name = "sqlite",
  .open = sqlite_open,
  .close = sqlite_close,
  .ping = sqlite_ping,
  .fleet = NULL, /* one daemon per database file */
#define SQ_OP(op) .op = sq_##op,
  SBX_STORE_TABLE_OPS(SQ_OP)
#undef SQ_OP
};
/* clang-format on */
