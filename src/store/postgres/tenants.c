/* tenants.c — PostgreSQL queries for tenants and API keys.  Creating a
 * tenant and looking a key up happen before any tenant is known: both go
 * through SECURITY DEFINER functions (0003_rls.postgres.sql); inserting a
 * key is scoped to its tenant like any other write. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/postgres/pg_int.h"

int pg_tenant_ensure(struct sbx_store *st, const char *name, int64_t *id_out,
                     struct sbx_error *err)
{
  if (!name || !*name || strlen(name) >= sizeof((struct sbx_tenant_row *)0)->name)
    return sbx_err_field(err, "tenant", "tenant name must be 1 to 127 bytes");
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_text(&p, name);
  pp_i64(&p, sbx_wall_s());
  _cleanup_pg_res_ PGresult *r =
      pg_q1(&tx, PGQ_TENANT_ENSURE, "SELECT sbx_tenant_ensure($1, $2)", &p, "tenant not found",
            err);
  if (r)
    *id_out = pr_i64(r, 0, 0);
  return pg_end(&tx, r ? 0 : -1, err);
}

int pg_key_insert(struct sbx_store *st, const struct sbx_key_row *key, struct sbx_error *err)
{
  struct pg_params p = {0};
  pp_text(&p, key->key_id);
  pp_i64(&p, key->tenant_id);
  pp_bytes(&p, key->hash, sizeof key->hash);
  pp_i64(&p, key->admin ? 1 : 0);
  pp_i64(&p, key->created_at ? key->created_at : sbx_wall_s());
  return pg_run(st, key->tenant_id, PGQ_KEY_INSERT,
                "INSERT INTO api_keys (key_id, tenant_id, hash, admin, created_at)"
                " VALUES ($1, $2, $3, $4, $5)",
                &p, NULL, err);
}

int pg_key_get(struct sbx_store *st, const char *key_id, struct sbx_key_row *out,
               struct sbx_error *err)
{
  struct pg_tx tx;
  if (pg_begin(st, &tx, PG_NO_TENANT, err) < 0)
    return -1;
  struct pg_params p = {0};
  pp_text(&p, key_id);
  _cleanup_pg_res_ PGresult *r =
      pg_q1(&tx, PGQ_KEY_GET,
            "SELECT key_id, tenant_id, tenant_name, hash, admin, created_at"
            " FROM sbx_key_lookup($1)",
            &p, "key not found", err);
  if (r) {
    memset(out, 0, sizeof *out);
    pr_copy(r, 0, 0, out->key_id, sizeof out->key_id);
    out->tenant_id = pr_i64(r, 0, 1);
    pr_copy(r, 0, 2, out->tenant_name, sizeof out->tenant_name);
    char *hash = NULL;
    size_t n = 0;
    if (pr_bytea(r, 0, 3, &hash, &n, err) == 0 && hash && n == sizeof out->hash)
      memcpy(out->hash, hash, n);
    free(hash);
    out->admin = pr_i64(r, 0, 4) != 0;
    out->created_at = pr_i64(r, 0, 5);
  }
  return pg_end(&tx, r ? 0 : -1, err);
}
