/* store.c — backend choice for the storage seam, and the row destructors
 * every backend shares.  See store.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/backend.h"

static int has_prefix(const char *s, const char *prefix)
{
  return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

static int open_postgres(const char *url, struct sbx_store_handle *out, struct sbx_error *err)
{
  struct sbx_store *st = NULL;
  if (sbx_store_postgres.open(url, &st, err) < 0)
    return -1; /* the backend's messages never quote the URL */
  out->ops = &sbx_store_postgres;
  out->st = st;
  return 0;
}

int sbx_store_open(const char *database_url, const char *state_dir, struct sbx_store_handle *out,
                   struct sbx_error *err)
{
  const char *dir = state_dir;
  out->ops = NULL;
  out->st = NULL;
  if (database_url && *database_url) {
    /* The URL is never echoed: it may carry a password. */
    if (has_prefix(database_url, "postgres://") || has_prefix(database_url, "postgresql://"))
      return open_postgres(database_url, out, err);
    if (!has_prefix(database_url, "sqlite://"))
      return sbx_err_set(
          err, SBX_E_INVALID, 0,
          "store: unsupported database URL (expected postgres://… or sqlite://DIR)");
    if (database_url[strlen("sqlite://")])
      dir = database_url + strlen("sqlite://");
  }
  if (!dir || !*dir)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "store: no state directory for the SQLite database");
  struct sbx_store *st = NULL;
  if (sbx_store_sqlite.open(dir, &st, err) < 0)
    return -1;
  out->ops = &sbx_store_sqlite;
  out->st = st;
  return 0;
}

void sbx_store_close(struct sbx_store_handle *h)
{
  if (h && h->ops && h->st)
    h->ops->close(h->st);
  if (h) {
    h->ops = NULL;
    h->st = NULL;
  }
}

void sbx_session_row_free(struct sbx_session_row *r)
{
  if (!r)
    return;
  free(r->limits_json);
  free(r->network_json);
  free(r->metadata_json);
  free(r->env_json);
  r->limits_json = r->network_json = r->metadata_json = r->env_json = NULL;
}

void sbx_execution_row_free(struct sbx_execution_row *r)
{
  if (!r)
    return;
  free(r->request_json);
  free(r->metadata_json);
  free(r->std_out.buf);
  free(r->std_err.buf);
  free(r->error_json);
  free(r->files);
  r->request_json = r->metadata_json = r->error_json = NULL;
  r->std_out.buf = r->std_err.buf = NULL;
  r->std_out.len = r->std_err.len = 0;
  r->files = NULL;
  r->nfiles = 0;
}

void sbx_node_row_free(struct sbx_node_row *r)
{
  free(r->info_json);
  r->info_json = NULL;
}

void sbx_tool_row_free(struct sbx_tool_row *r)
{
  if (!r)
    return;
  free(r->manifest_json);
  r->manifest_json = NULL;
}

const char *sbx_store_table_name(enum sbx_store_table t)
{
  static const char *const names[] = {"sessions", "executions", "tools"};
  return names[t];
}

size_t sbx_store_row_size(enum sbx_store_table t)
{
  static const size_t sizes[] = {sizeof(struct sbx_session_row),
                                 sizeof(struct sbx_execution_row), sizeof(struct sbx_tool_row)};
  return sizes[t];
}

int sbx_store_row_call(enum sbx_store_table t, union sbx_store_cb cb, void *ctx, const void *row)
{
  switch (t) {
  case SBX_STORE_SESSIONS:
    return cb.session(ctx, row);
  case SBX_STORE_EXECUTIONS:
    return cb.execution(ctx, row);
  default:
    return cb.tool(ctx, row);
  }
}

void sbx_store_row_free(enum sbx_store_table t, void *row)
{
  switch (t) {
  case SBX_STORE_SESSIONS:
    sbx_session_row_free(row);
    break;
  case SBX_STORE_EXECUTIONS:
    sbx_execution_row_free(row);
    break;
  default:
    sbx_tool_row_free(row);
  }
}

int sbx_store_explain_no_change(int found, const char *status, const char *wanted,
                                struct sbx_error *err)
{
  if (found < 0)
    return -1;
  if (!found)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "execution not found");
  return sbx_err_set(err, SBX_E_CONFLICT, 0, "execution is %s, not %s", status, wanted);
}
