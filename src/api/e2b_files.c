/* e2b_files.c — envd's plain HTTP routes: GET /files?path=P (the bytes),
 * POST /files (multipart/form-data, one part per file named by its
 * filename, or one application/octet-stream body for ?path=P) answering
 * [{name, type, path}], and GET /health (204 while the sandbox lives, 502
 * once it is gone — what the SDK reads as "not running").  Multipart is
 * parsed by libmicrohttpd's post processor over the already bounded body. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "core/core.h"
#include "core/schema.h"

#define MAX_FILES 256

int sbx_h_e2b_health(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  struct sbx_error gone = {0};
  struct sbx_live_session *ls = sbx_session_acquire(r->core, &r->who, sbx_e2b_sid(r), &gone);
  if (!ls) {
    (void)err;
    sbx_resp_json(out, 502, json_pack("{s:i, s:s}", "code", 502, "message", gone.msg));
    return 0;
  }
  sbx_session_release(r->core, ls);
  sbx_resp_empty(out, 204);
  return 0;
}

int sbx_h_e2b_files_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path = sbx_req_query(r, "path");
  if (sbx_schema_path(path, "path", err) < 0)
    return -1;
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, sbx_e2b_sid(r), SBX_CAP_FILES, err);
  if (!ls)
    return -1;
  int fd;
  uint64_t size;
  int rc = sbx_files_open_read(ls, path, &fd, &size, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return -1;
  sbx_resp_fd(out, 200, fd, size, "application/octet-stream");
  return 0;
}

/* ---- upload ---- */

struct part {
  char *path;
  char *data;
  size_t len, cap;
};

struct upload {
  struct part parts[MAX_FILES];
  size_t n;
  const char *default_path;
  bool too_many, nomem;
};

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *ctype, const char *enc,
                               const char *data, uint64_t off, size_t size)
{
  (void)kind, (void)ctype, (void)enc, (void)key;
  struct upload *u = cls;
  if (off == 0) { /* a new part begins */
    if (u->n >= MAX_FILES) {
      u->too_many = true;
      return MHD_NO;
    }
    const char *name = u->default_path && u->n == 0 ? u->default_path : filename;
    u->parts[u->n++] = (struct part){.path = strdup(name ? name : "")};
  }
  struct part *p = &u->parts[u->n - 1];
  if (p->len + size > p->cap) {
    size_t cap = (p->len + size) * 2 + 4096;
    char *nd = realloc(p->data, cap);
    if (!nd) {
      u->nomem = true;
      return MHD_NO;
    }
    p->data = nd;
    p->cap = cap;
  }
  if (size)
    memcpy(p->data + p->len, data, size);
  p->len += size;
  return MHD_YES;
}

static void upload_free(struct upload *u)
{
  for (size_t i = 0; i < u->n; i++) {
    free(u->parts[i].path);
    free(u->parts[i].data);
  }
}

static int parse_multipart(struct sbx_req *r, struct upload *u, struct sbx_error *err)
{
  struct MHD_PostProcessor *pp = MHD_create_post_processor(r->conn, 64 * 1024, on_part, u);
  if (!pp) {
    sbx_err_field(err, "body", "a multipart/form-data body with a boundary is required");
    return sbx_err_fr(err, "Un corps multipart/form-data avec sa frontière est requis");
  }
  enum MHD_Result ok = MHD_post_process(pp, r->body ? r->body : "", r->body_len);
  MHD_destroy_post_processor(pp);
  if (u->nomem)
    return sbx_err_sys(err, ENOMEM, "upload");
  if (u->too_many)
    return sbx_err_field(err, "file", "%d files per upload at most", MAX_FILES);
  if (ok != MHD_YES || u->n == 0) {
    sbx_err_field(err, "file", "the multipart body holds no readable file part");
    return sbx_err_fr(err, "Le corps multipart ne contient aucun fichier lisible");
  }
  return 0;
}

/* Every path is checked before anything is written: a bad one writes nothing. */
static int write_all(struct sbx_req *r, struct upload *u, json_t **res, struct sbx_error *err)
{
  for (size_t i = 0; i < u->n; i++)
    if (sbx_schema_path(u->parts[i].path, "path", err) < 0)
      return -1;
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, sbx_e2b_sid(r), SBX_CAP_FILES, err);
  if (!ls)
    return -1;
  json_t *arr = json_array();
  int rc = 0;
  for (size_t i = 0; i < u->n && rc == 0; i++) {
    struct part *p = &u->parts[i];
    rc = sbx_files_write(ls, p->path, p->data ? p->data : "", p->len, err);
    char abs[4200];
    snprintf(abs, sizeof abs, "%s%s", p->path[0] == '/' ? "" : "/work/", p->path);
    const char *base = strrchr(abs, '/');
    if (rc == 0)
      json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "name", base ? base + 1 : abs,
                                           "type", "file", "path", abs));
  }
  sbx_session_release(r->core, ls);
  if (rc < 0) {
    json_decref(arr);
    return -1;
  }
  *res = arr;
  return 0;
}

int sbx_h_e2b_files_post(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  struct upload u = {.default_path = sbx_req_query(r, "path")};
  const char *ct = sbx_req_header(r, "Content-Type");
  int rc;
  if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
    rc = parse_multipart(r, &u, err);
  } else if (!u.default_path) {
    rc = sbx_err_field(err, "path", "an octet-stream upload needs ?path=");
  } else { /* the raw body is the one file's bytes */
    u.parts[0] =
        (struct part){.path = strdup(u.default_path), .data = r->body, .len = r->body_len};
    u.n = 1;
    r->body = NULL; /* the part owns it now */
    r->body_len = 0;
    rc = u.parts[0].path ? 0 : sbx_err_sys(err, ENOMEM, "upload");
  }
  json_t *res = NULL;
  if (rc == 0)
    rc = write_all(r, &u, &res, err);
  upload_free(&u);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
