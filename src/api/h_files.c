/* h_files.c — /v1/sandbox/sessions/{id}/files?path=P: raw bytes in and
 * out, directory listings, removal.  Paths resolve inside the sandbox (its
 * sbx-init opens them), never on the host. */
#include <stdlib.h>
#include <unistd.h>

#include <string.h>

#include "api/handlers.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "core/core.h"
#include "core/schema.h"

static const char *path_arg(struct sbx_req *r, struct sbx_error *err)
{
  const char *p = sbx_req_query(r, "path");
  if (sbx_schema_path(p, "path", err) < 0)
    return NULL;
  return p;
}

SBX_HANDLER(sbx_h_files_put)
{
  const char *path = path_arg(r, err);
  if (!path)
    return -1;
  struct sbx_live_session *ls = sbx_session_acquire(r->core, &r->who, r->params[0], err);
  if (!ls)
    return -1;
  int rc = sbx_sandbox_file_write(sbx_live_sandbox(ls), path, r->body, r->body_len, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 201, json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)r->body_len));
  return 0;
}

static json_t *listing_json(const struct sbx_dirent *ents, size_t n)
{
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:I, s:s, s:I}", "name", ents[i].name,
                                         "path", ents[i].path, "type", ents[i].type, "size",
                                         (json_int_t)ents[i].size, "mode", "", "mtime",
                                         (json_int_t)ents[i].mtime));
  /* mode as the familiar octal string, e.g. "0644" */
  for (size_t i = 0; i < n; i++) {
    char m[8];
    snprintf(m, sizeof m, "%04o", ents[i].mode & 07777);
    json_object_set_new(json_array_get(arr, i), "mode", json_string(m));
  }
  return json_pack("{s:o}", "entries", arr);
}

SBX_HANDLER(sbx_h_files_get)
{
  const char *path = path_arg(r, err);
  if (!path)
    return -1;
  const char *list = sbx_req_query(r, "list");
  struct sbx_live_session *ls = sbx_session_acquire(r->core, &r->who, r->params[0], err);
  if (!ls)
    return -1;
  int rc;
  if (list && (strcmp(list, "true") == 0 || strcmp(list, "1") == 0)) {
    struct sbx_dirent *ents = NULL;
    size_t n = 0;
    rc = sbx_sandbox_list(sbx_live_sandbox(ls), path, &ents, &n, 10000, err);
    if (rc == 0)
      sbx_resp_json(out, 200, listing_json(ents, n));
    free(ents);
  } else {
    int fd;
    uint64_t size;
    rc = sbx_sandbox_file_open_read(sbx_live_sandbox(ls), path, &fd, &size, err);
    if (rc == 0) {
      out->status = 200;
      out->kind = SBX_RESP_FD;
      out->fd = fd;
      out->len = size;
      out->content_type = "application/octet-stream";
    }
  }
  sbx_session_release(r->core, ls);
  return rc;
}

SBX_HANDLER(sbx_h_files_delete)
{
  const char *path = path_arg(r, err);
  if (!path)
    return -1;
  struct sbx_live_session *ls = sbx_session_acquire(r->core, &r->who, r->params[0], err);
  if (!ls)
    return -1;
  int rc = sbx_sandbox_remove(sbx_live_sandbox(ls), path, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}
