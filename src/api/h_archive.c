/* h_archive.c — GET|PUT /v1/sandbox/sessions/{id}/archive?path=D: a
 * directory as a tar, out (streamed) and in (extracted with path safety).
 * The work is core/archive.c and core/archive_extract.c; this file reads
 * the query (limits may be lowered with ?max_entries=&max_bytes=, never
 * raised) and shapes the responses. */
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "core/core.h"
#include "core/schema.h"

static int limit_arg(struct sbx_req *r, const char *name, uint64_t max, uint64_t *out,
                     struct sbx_error *err)
{
  const char *v = sbx_req_query(r, name);
  *out = max;
  if (!v)
    return 0;
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-' || n == 0 || n > max)
    return sbx_err_field(err, name, "an integer from 1 to %llu", (unsigned long long)max);
  *out = n;
  return 0;
}

static int limits(struct sbx_req *r, struct sbx_archive_limits *lim, struct sbx_error *err)
{
  uint64_t entries;
  if (limit_arg(r, "max_entries", SBX_ARCHIVE_MAX_ENTRIES, &entries, err) < 0 ||
      limit_arg(r, "max_bytes", SBX_ARCHIVE_MAX_BYTES, &lim->max_bytes, err) < 0)
    return -1;
  lim->max_entries = (size_t)entries;
  return 0;
}

static const char *dir_arg(struct sbx_req *r, struct sbx_error *err)
{
  const char *p = sbx_req_query(r, "path");
  return sbx_schema_path(p, "path", err) < 0 ? NULL : p;
}

int sbx_h_archive_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  struct sbx_archive_limits lim;
  const char *dir = dir_arg(r, err);
  if (!dir || limits(r, &lim, err) < 0)
    return -1;
  struct sbx_archive_out *a;
  if (sbx_archive_open(r->core, &r->who, r->params[0], dir, &lim, &a, err) < 0)
    return -1;
  out->status = 200;
  out->kind = SBX_RESP_STREAM;
  out->content_type = "application/x-tar";
  out->stream = sbx_archive_read;
  out->stream_ctx = a;
  out->stream_free = sbx_archive_close;
  return 0;
}

int sbx_h_archive_put(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  struct sbx_archive_limits lim;
  const char *dir = dir_arg(r, err);
  if (!dir || limits(r, &lim, err) < 0)
    return -1;
  json_t *res = NULL;
  if (sbx_archive_extract(r->core, &r->who, r->params[0], dir, r->body, r->body_len, &lim, &res,
                          err) < 0)
    return -1;
  sbx_resp_json(out, 201, res);
  return 0;
}
