/* pool.c — the PostgreSQL backend's connections: a small pool guarded by a
 * mutex, lazy connect and reset after the server went away, tenant-scoped
 * transactions, prepared statements, parameters, result decoding and error
 * mapping.  See pg_int.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "store/postgres/pg_int.h"

/* ---- connections ---- */

/* Server notices ("relation … already exists, skipping") are not errors
 * and must not land on the daemon's stderr, which is its log. */
static void ignore_notice(void *arg, const char *message) {}

PGconn *pg_connect(const char *url, struct sbx_error *err)
{
  /* Defaults first, the URL last: later keywords win, so the URL's own
   * connect_timeout (etc.) overrides ours. */
  const char *keys[] = {"connect_timeout", "application_name", "client_encoding", "dbname",
                        NULL};
  const char *vals[] = {"5", "sandboxd", "UTF8", url, NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (!c) {
    sbx_err_sys(err, ENOMEM, "store: PostgreSQL connection");
    return NULL;
  }
  if (PQstatus(c) != CONNECTION_OK) {
    /* libpq's message names host/port/user, never the password. */
    pg_fail(c, NULL, "connect to PostgreSQL", err);
    PQfinish(c);
    return NULL;
  }
  PQsetNoticeProcessor(c, ignore_notice, NULL);
  return c;
}

static struct pg_conn *acquire(struct sbx_store *st)
{
  pthread_mutex_lock(&st->lock);
  for (;;) {
    for (int i = 0; i < PG_POOL_MAX; i++) {
      if (!st->conns[i].in_use) {
        st->conns[i].in_use = true;
        pthread_mutex_unlock(&st->lock);
        return &st->conns[i];
      }
    }
    pthread_cond_wait(&st->cond, &st->lock);
  }
}

static void release(struct sbx_store *st, struct pg_conn *pc)
{
  pthread_mutex_lock(&st->lock);
  pc->in_use = false;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

/* A usable connection in pc (connecting or resetting it as needed);
 * NOT_READY when the server cannot be reached.  Called without the pool
 * lock: pc is ours. */
static int ensure_connected(struct sbx_store *st, struct pg_conn *pc, struct sbx_error *err)
{
  if (pc->c && PQstatus(pc->c) == CONNECTION_OK)
    return 0;
  memset(pc->prepared, 0, sizeof pc->prepared);
  if (pc->c) {
    PQreset(pc->c);
    if (PQstatus(pc->c) == CONNECTION_OK)
      return 0;
    pg_fail(pc->c, NULL, "reconnect to PostgreSQL", err);
    PQfinish(pc->c);
    pc->c = NULL;
    return -1;
  }
  pc->c = pg_connect(st->url, err);
  return pc->c ? 0 : -1;
}

static int begin_on(struct pg_conn *pc, int64_t tenant_id, struct sbx_error *err)
{
  char sql[128];
  if (tenant_id == PG_NO_TENANT)
    snprintf(sql, sizeof sql, "BEGIN");
  else /* an integer: nothing to quote */
    snprintf(sql, sizeof sql, "BEGIN; SELECT set_config('app.tenant_id', '%lld', true)",
             (long long)tenant_id);
  PGresult *r = PQexec(pc->c, sql);
  ExecStatusType s = PQresultStatus(r);
  int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  if (!ok) {
    pg_fail(pc->c, r, "begin transaction", err);
    if (PQstatus(pc->c) == CONNECTION_OK)
      PQclear(PQexec(pc->c, "ROLLBACK"));
  }
  PQclear(r);
  return ok ? 0 : -1;
}

int pg_begin(struct sbx_store *st, struct pg_tx *tx, int64_t tenant_id, struct sbx_error *err)
{
  tx->st = st;
  tx->pc = acquire(st);
  for (int attempt = 0;; attempt++) {
    if (ensure_connected(st, tx->pc, err) == 0 && begin_on(tx->pc, tenant_id, err) == 0)
      return 0;
    /* A pooled connection whose server restarted fails on first use:
     * nothing was applied, so one retry on a fresh connection is safe. */
    bool dead = tx->pc->c && PQstatus(tx->pc->c) != CONNECTION_OK;
    if (attempt > 0 || !dead)
      break;
    sbx_err_clear(err);
  }
  release(st, tx->pc);
  tx->pc = NULL;
  return -1;
}

PGresult *pg_end_keep(struct pg_tx *tx, PGresult *r, struct sbx_error *err)
{
  if (pg_end(tx, r ? 0 : -1, err) < 0) {
    if (r)
      PQclear(r);
    return NULL;
  }
  return r;
}

int pg_end(struct pg_tx *tx, int ret, struct sbx_error *err)
{
  if (!tx->pc)
    return ret < 0 ? -1 : ret;
  PGconn *c = tx->pc->c;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult *r = PQexec(c, ret < 0 ? "ROLLBACK" : "COMMIT");
    /* COMMIT of a transaction that had failed answers ROLLBACK. */
    bool committed = PQresultStatus(r) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT");
    if (ret >= 0 && !committed)
      ret = pg_fail(c, r, "commit", err);
    PQclear(r);
  } else if (ret >= 0) {
    ret = pg_fail(c, NULL, "commit", err);
  }
  release(tx->st, tx->pc);
  tx->pc = NULL;
  return ret;
}

static bool pg_is_write(PGresult *r)
{
  const char *cmd = PQcmdStatus(r);
  return cmd && (!strncmp(cmd, "INSERT", 6) || !strncmp(cmd, "UPDATE", 6) ||
                 !strncmp(cmd, "DELETE", 6));
}

PGresult *pg_q(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
               bool binary_result, struct sbx_error *err)
{
  static const struct pg_params none = {0};
  if (!p)
    p = &none;
  PGconn *c = tx->pc->c;
  char name[16];
  snprintf(name, sizeof name, "sbx%d", (int)slot);
  if (!tx->pc->prepared[slot]) {
    PGresult *r = PQprepare(c, name, sql, p->n, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      pg_fail(c, r, "prepare", err);
      PQclear(r);
      return NULL;
    }
    PQclear(r);
    tx->pc->prepared[slot] = true;
  }
  PGresult *r = PQexecPrepared(c, name, p->n, p->v, p->len, p->fmt, binary_result ? 1 : 0);
  ExecStatusType s = PQresultStatus(r);
  if (pg_is_write(r) && sbx_fault(SBX_FAULT_STORE_WRITE)) {
    PQclear(r); /* the transaction is rolled back by pg_end */
    sbx_err_sys(err, errno, "store: query");
    return NULL;
  }
  if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
    pg_fail(c, r, "query", err);
    PQclear(r);
    return NULL;
  }
  return r;
}

int pg_run(struct sbx_store *st, int64_t tenant_id, enum pg_slot slot, const char *sql,
           const struct pg_params *p, const char *not_found, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return -1;
  _cleanup_pg_res_ PGresult *r = pg_q(&tx, slot, sql, p, false, err);
  int ret = r ? 0 : -1;
  if (r && not_found && pg_changes(r) == 0)
    ret = sbx_err_set(err, SBX_E_NOT_FOUND, 0, "%s", not_found);
  return pg_end(&tx, ret, err);
}

int pg_exec(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
            struct sbx_error *err)
{
  _cleanup_pg_res_ PGresult *r = pg_q(tx, slot, sql, p, false, err);
  return r ? 0 : -1;
}

PGresult *pg_run_keep(struct sbx_store *st, int64_t tenant_id, enum pg_slot slot,
                      const char *sql, const struct pg_params *p, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, tenant_id, err) < 0)
    return NULL;
  return pg_end_keep(&tx, pg_q(&tx, slot, sql, p, false, err), err);
}

PGresult *pg_q1(struct pg_tx *tx, enum pg_slot slot, const char *sql, const struct pg_params *p,
                const char *not_found, struct sbx_error *err)
{
  PGresult *r = pg_q(tx, slot, sql, p, false, err);
  if (r && PQntuples(r) != 1) {
    PQclear(r);
    sbx_err_set(err, SBX_E_NOT_FOUND, 0, "%s", not_found);
    return NULL;
  }
  return r;
}

long pg_changes(PGresult *r) { return strtol(PQcmdTuples(r), NULL, 10); }

/* ---- errors ---- */

static enum sbx_errcode code_of(PGconn *c, PGresult *res)
{
  if (!c || PQstatus(c) != CONNECTION_OK)
    return SBX_E_NOT_READY;
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  if (!state)
    return res ? SBX_E_INTERNAL : SBX_E_NOT_READY;
  if (!strncmp(state, "23", 2))
    return SBX_E_CONFLICT; /* unique, foreign key, check */
  /* 08 connection, 53 out of resources, 57P01-03 shutdown/starting,
   * 40001/40P01 serialization failure/deadlock: try again later. */
  if (!strncmp(state, "08", 2) || !strncmp(state, "53", 2) || !strncmp(state, "57P", 3) ||
      !strcmp(state, "40001") || !strcmp(state, "40P01"))
    return SBX_E_NOT_READY;
  return SBX_E_INTERNAL;
}

int pg_fail(PGconn *c, PGresult *res, const char *what, struct sbx_error *err)
{
  const char *msg = res ? PQresultErrorMessage(res) : "";
  if (!msg || !*msg)
    msg = c ? PQerrorMessage(c) : "no connection";
  char clean[384];
  snprintf(clean, sizeof clean, "%s", msg && *msg ? msg : "unknown error");
  size_t n = strlen(clean);
  while (n && (clean[n - 1] == '\n' || clean[n - 1] == ' '))
    clean[--n] = '\0';
  for (char *q = clean; *q; q++)
    if (*q == '\n')
      *q = ' ';
  enum sbx_errcode code = code_of(c, res);
  if (code == SBX_E_NOT_READY)
    return sbx_err_set(err, code, 0, "store: PostgreSQL unavailable: %s: %s", what, clean);
  return sbx_err_set(err, code, 0, "store: %s: %s", what, clean);
}

/* ---- parameters ---- */

static int slot_of(struct pg_params *p)
{
  if (p->n >= PG_MAXP)
    abort(); /* a query with more parameters than PG_MAXP: a programming error */
  return p->n++;
}

void pp_head(struct pg_params *p, const char *id, int64_t tenant_id, const char *status,
             const char *reason, const char *profile)
{
  pp_text(p, id);
  pp_i64(p, tenant_id);
  pp_text(p, status);
  pp_text(p, reason);
  pp_text(p, profile);
}

void pp_text(struct pg_params *p, const char *s)
{
  int i = slot_of(p);
  p->v[i] = s;
  p->len[i] = 0;
  p->fmt[i] = 0;
}

void pp_i64(struct pg_params *p, int64_t v)
{
  int i = slot_of(p);
  snprintf(p->num[i], sizeof p->num[i], "%lld", (long long)v);
  p->v[i] = p->num[i];
  p->fmt[i] = 0;
}

void pp_f64(struct pg_params *p, double v)
{
  int i = slot_of(p);
  snprintf(p->num[i], sizeof p->num[i], "%.17g", v); /* round-trips exactly */
  p->v[i] = p->num[i];
  p->fmt[i] = 0;
}

void pp_bool(struct pg_params *p, bool v) { pp_text(p, v ? "true" : "false"); }

void pp_bytes(struct pg_params *p, const void *data, size_t n)
{
  int i = slot_of(p);
  /* A non-NULL pointer even when empty: an empty bytea, not SQL NULL. */
  p->v[i] = data && n ? data : "";
  p->len[i] = (int)n;
  p->fmt[i] = 1;
}

/* ---- results ---- */

int64_t pr_i64(const PGresult *r, int row, int col)
{
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

double pr_f64(const PGresult *r, int row, int col)
{
  return PQgetisnull(r, row, col) ? 0 : strtod(PQgetvalue(r, row, col), NULL);
}

void pr_copy(const PGresult *r, int row, int col, char *buf, size_t size)
{
  snprintf(buf, size, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

int pr_strdup(const PGresult *r, int row, int col, char **out, struct sbx_error *err)
{
  *out = NULL;
  if (PQgetisnull(r, row, col))
    return 0;
  *out = strdup(PQgetvalue(r, row, col));
  return *out ? 0 : sbx_err_sys(err, ENOMEM, "store: copy column");
}

int pr_bytea(const PGresult *r, int row, int col, char **out, size_t *len, struct sbx_error *err)
{
  *out = NULL;
  *len = 0;
  if (PQgetisnull(r, row, col))
    return 0;
  size_t n = 0;
  unsigned char *raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r, row, col), &n);
  if (!raw)
    return sbx_err_sys(err, ENOMEM, "store: decode bytea");
  *out = malloc(n + 1);
  if (!*out) {
    PQfreemem(raw);
    return sbx_err_sys(err, ENOMEM, "store: copy bytea");
  }
  if (n)
    memcpy(*out, raw, n);
  (*out)[n] = '\0';
  *len = n;
  PQfreemem(raw);
  return 0;
}

int pg_cursor_time(struct pg_tx *tx, enum pg_slot slot, const char *sql, int64_t tenant_id,
                   const char *after, int64_t *t, struct sbx_error *err)
{
  struct pg_params c = {0};
  pp_i64(&c, tenant_id);
  pp_text(&c, after);
  PGresult *r = pg_q(tx, slot, sql, &c, false, err);
  if (!r)
    return -1;
  int found = PQntuples(r) == 1;
  if (found)
    *t = pr_i64(r, 0, 0);
  PQclear(r);
  return found ? 0 : sbx_err_field(err, "after", "unknown pagination cursor");
}
