/* pg.c — the PostgreSQL storage backend: open (a first connection that
 * checks the schema version and that the role is one row-level security
 * confines), close, the /readyz ping, and the ops table.  The queries live
 * in tenants.c, sessions.c, executions.c, audit_usage.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_int.h"

static void pg_close(struct sbx_store *st)
{
  if (!st)
    return;
  for (int i = 0; i < PG_POOL_MAX; i++)
    if (st->conns[i].c)
      PQfinish(st->conns[i].c);
  pthread_mutex_destroy(&st->lock);
  pthread_cond_destroy(&st->cond);
  if (st->url) {
    explicit_bzero(st->url, strlen(st->url)); /* it may hold a password */
    free(st->url);
  }
  free(st);
}

static int pg_open(const char *url, struct sbx_store **out, struct sbx_error *err)
{
  struct sbx_store *st = calloc(1, sizeof *st);
  if (!st || !(st->url = strdup(url))) {
    free(st);
    return sbx_err_sys(err, ENOMEM, "store: open");
  }
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->cond, NULL);
  /* The first connection stays in the pool; the others open on demand. */
  st->conns[0].c = pg_connect(url, err);
  if (!st->conns[0].c || pg_check_schema(st->conns[0].c, err) < 0 ||
      pg_check_role(st->conns[0].c, err) < 0) {
    pg_close(st);
    return -1;
  }
  *out = st;
  return 0;
}

static int pg_ping(struct sbx_store *st, struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  PGresult *r = pg_q(&tx, PGQ_PING, "SELECT 1", NULL, false, err);
  int ret = r ? 0 : -1;
  if (r)
    PQclear(r);
  return pg_end(&tx, ret, err);
}

/* clang-format off */
const struct sbx_store_ops sbx_store_postgres = {
  .name = "postgres",
  .open = pg_open,
  .close = pg_close,
  .ping = pg_ping,
  .fleet = &pg_fleet_ops,
#define PG_OP(op) .op = pg_##op,
  SBX_STORE_TABLE_OPS(PG_OP)
#undef PG_OP
};
/* clang-format on */
