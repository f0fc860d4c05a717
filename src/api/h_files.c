/* h_files.c — /v1/sandbox/sessions/{id}/files?path=P: raw bytes in and
 * out, directory listings (flat or recursive), stat, removal, and
 * …/files/mkdir and …/files/move.  Paths resolve inside the sandbox (its
 * sbx-init opens them), never on the host; a final symlink is never
 * followed by stat, move or the listings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The checked ?path= and the session it names, acquired for file access
 * (released by the caller), for the handlers that need nothing else first. */
static struct sbx_live_session *path_session(struct sbx_req *r, const char **path,
                                             struct sbx_error *err)
{
  *path = path_arg(r, err);
  if (!*path)
    return NULL;
  return sbx_session_acquire_cap(r->core, &r->who, r->params[0], SBX_CAP_FILES, err);
}

int sbx_h_files_put(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path;
  struct sbx_live_session *ls = path_session(r, &path, err);
  if (!ls)
    return -1;
  int rc = sbx_files_write(ls, path, r->body, r->body_len, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 201,
                json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)r->body_len));
  return 0;
}

#define LIST_MAX 10000 /* entries of a listing, flat or recursive (→ 413) */

static void put_mode(json_t *o, unsigned mode)
{
  char m[8];
  snprintf(m, sizeof m, "%04o", mode & 07777); /* the familiar octal string */
  json_object_set_new(o, "mode", json_string(m));
}

static json_t *listing_json(const struct sbx_dirent *ents, size_t n)
{
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", ents[i].name, "path",
                          ents[i].path, "type", ents[i].type, "size", (json_int_t)ents[i].size,
                          "mtime", (json_int_t)ents[i].mtime);
    put_mode(o, ents[i].mode);
    json_array_append_new(arr, o);
  }
  return json_pack("{s:o}", "entries", arr);
}

/* The last component of a normalised path ("/" for the root). */
static const char *base_of(const char *path)
{
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/')
    n--;
  const char *b = path + n;
  while (b > path && b[-1] != '/')
    b--;
  return *b ? b : "/";
}

/* {name, path, type, size, mode, mtime, link_target?} of an lstat. */
static json_t *stat_json(const char *path, const struct sbx_stat *st)
{
  char abs[4200];
  snprintf(abs, sizeof abs, "%s%s", path[0] == '/' ? "" : "/work/", path);
  size_t n = strlen(abs);
  while (n > 1 && abs[n - 1] == '/')
    abs[--n] = '\0';
  char name[256];
  snprintf(name, sizeof name, "%s", base_of(abs));
  json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", name, "path", abs, "type", st->type,
                        "size", (json_int_t)st->size, "mtime", (json_int_t)st->mtime);
  put_mode(o, st->mode);
  if (!strcmp(st->type, "symlink"))
    json_object_set_new(o, "link_target", json_string(st->link_target));
  return o;
}

/* ?max_depth=N (1..64), absent → 0 (the ceiling). */
static int depth_arg(struct sbx_req *r, unsigned *out, struct sbx_error *err)
{
  const char *v = sbx_req_query(r, "max_depth");
  *out = 0;
  if (!v)
    return 0;
  char *end;
  long d = strtol(v, &end, 10);
  if (!*v || *end || d < 1 || d > (long)SBX_TREE_MAX_DEPTH)
    return sbx_err_field(err, "max_depth", "an integer from 1 to %u", SBX_TREE_MAX_DEPTH);
  *out = (unsigned)d;
  return 0;
}

static int get_listing(struct sbx_req *r, struct sbx_live_session *ls, const char *path,
                       struct sbx_resp *out, struct sbx_error *err)
{
  struct sbx_dirent *ents = NULL;
  size_t n = 0;
  int rc;
  if (sbx_req_flag(r, "recursive")) {
    unsigned depth;
    rc = depth_arg(r, &depth, err) < 0
             ? -1
             : sbx_files_list_tree(ls, path, depth, &ents, &n, LIST_MAX, err);
  } else {
    rc = sbx_files_list(ls, path, &ents, &n, LIST_MAX, err);
  }
  if (rc == 0)
    sbx_resp_json(out, 200, listing_json(ents, n));
  free(ents);
  return rc;
}

static int get_stat(struct sbx_live_session *ls, const char *path, struct sbx_resp *out,
                    struct sbx_error *err)
{
  struct sbx_stat st;
  if (sbx_files_stat(ls, path, &st, err) < 0)
    return -1;
  sbx_resp_json(out, 200, stat_json(path, &st));
  return 0;
}

static int get_bytes(struct sbx_live_session *ls, const char *path, struct sbx_resp *out,
                     struct sbx_error *err)
{
  int fd;
  uint64_t size;
  if (sbx_files_open_read(ls, path, &fd, &size, err) < 0)
    return -1;
  sbx_resp_fd(out, 200, fd, size, "application/octet-stream");
  return 0;
}

int sbx_h_files_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path = path_arg(r, err);
  if (!path)
    return -1;
  if (sbx_req_flag(r, "list") && sbx_req_flag(r, "stat"))
    return sbx_err_field(err, "stat", "list and stat cannot be combined");
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, r->params[0], SBX_CAP_FILES, err);
  if (!ls)
    return -1;
  int rc = sbx_req_flag(r, "list")   ? get_listing(r, ls, path, out, err)
           : sbx_req_flag(r, "stat") ? get_stat(ls, path, out, err)
                                     : get_bytes(ls, path, out, err);
  sbx_session_release(r->core, ls);
  return rc;
}

/* POST …/files/mkdir?path=D[&parents=true][&mode=0750] → 201 stat of D. */
int sbx_h_files_mkdir(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path = path_arg(r, err);
  if (!path)
    return -1;
  const char *m = sbx_req_query(r, "mode");
  unsigned mode = 0, flags = sbx_req_flag(r, "parents") ? SBX_MKDIR_PARENTS : 0;
  if (m) {
    char *end;
    long v = strtol(m, &end, 8);
    if (!*m || *end || v < 0 || v > 0777)
      return sbx_err_field(err, "mode", "an octal mode from 0 to 0777, e.g. 0755");
    mode = (unsigned)v;
    flags |= SBX_MKDIR_MODE;
  }
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, r->params[0], SBX_CAP_FILES, err);
  if (!ls)
    return -1;
  struct sbx_stat st;
  int rc = sbx_files_mkdir(ls, path, mode, flags, err);
  if (rc == 0 && (rc = sbx_files_stat(ls, path, &st, err)) == 0)
    sbx_resp_json(out, 201, stat_json(path, &st));
  sbx_session_release(r->core, ls);
  return rc;
}

/* POST …/files/move {from, to, overwrite?} → 200 stat of `to`. */
int sbx_h_files_move(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  static const char *const allowed[] = {"from", "to", "overwrite", NULL};
  json_t *body = sbx_req_json(r, false, err);
  if (!body)
    return -1;
  const char *from = json_string_value(json_object_get(body, "from"));
  const char *to = json_string_value(json_object_get(body, "to"));
  json_t *ov = json_object_get(body, "overwrite");
  int rc = -1;
  if (sbx_schema_only(body, "", allowed, err) < 0 || sbx_schema_path(from, "from", err) < 0 ||
      sbx_schema_path(to, "to", err) < 0)
    goto out;
  if (ov && !json_is_boolean(ov) && !json_is_null(ov)) {
    sbx_err_field(err, "overwrite", "a boolean");
    goto out;
  }
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, r->params[0], SBX_CAP_FILES, err);
  if (!ls)
    goto out;
  struct sbx_stat st;
  rc = sbx_files_move(ls, from, to, json_is_true(ov), err);
  if (rc == 0 && (rc = sbx_files_stat(ls, to, &st, err)) == 0)
    sbx_resp_json(out, 200, stat_json(to, &st));
  sbx_session_release(r->core, ls);
out:
  json_decref(body);
  return rc;
}

int sbx_h_files_delete(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *path;
  struct sbx_live_session *ls = path_session(r, &path, err);
  if (!ls)
    return -1;
  int rc = sbx_files_remove(ls, path, err);
  sbx_session_release(r->core, ls);
  if (rc < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}
