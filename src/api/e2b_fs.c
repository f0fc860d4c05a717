/* e2b_fs.c — envd's Connect service filesystem.Filesystem over the
 * sandbox's file operations (runtime/sandbox.h, through sbx-init, paths
 * resolved inside the sandbox): Stat, ListDir (with depth), MakeDir
 * (parents made; an existing one is already_exists, as envd says), Move,
 * Remove, and WatchDir, a server stream of FilesystemEvent fed by
 * core/watch.c.  The polling watchers (CreateWatcher & co.) answer
 * unimplemented: the JS SDK streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "api/sse.h"
#include "common/util.h"
#include "core/core.h"
#include "core/schema.h"

#define LIST_MAX 10000
#define WATCH_QUEUE_BYTES (256 * 1024)
#define KEEPALIVE_MS 15000

static const char *file_type(const char *ours)
{
  return !strcmp(ours, "file")      ? "FILE_TYPE_FILE"
         : !strcmp(ours, "dir")     ? "FILE_TYPE_DIRECTORY"
         : !strcmp(ours, "symlink") ? "FILE_TYPE_SYMLINK"
                                    : "FILE_TYPE_UNSPECIFIED";
}

/* "-rwxr-xr-x" / "drwx------" as Go's FileMode.String() writes it. */
static void permissions(const char *type, unsigned mode, char out[11])
{
  static const char rwx[] = "rwxrwxrwx";
  out[0] = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'L' : '-';
  for (int i = 0; i < 9; i++)
    out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
  out[10] = '\0';
}

static json_t *entry_json(const char *name, const char *path, const char *type, uint64_t size,
                          unsigned mode, int64_t mtime, const char *link)
{
  char perm[11], t[40], sz[24];
  permissions(type, mode, perm);
  sbx_format_time(mtime, t, sizeof t);
  snprintf(sz, sizeof sz, "%llu", (unsigned long long)size); /* int64 is a JSON string */
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "name", name, "type",
                file_type(type), "path", path, "size", sz, "mode", (json_int_t)(mode & 07777),
                "permissions", perm, "owner", "user", "group", "user", "modifiedTime", t);
  if (link && *link)
    json_object_set_new(o, "symlinkTarget", json_string(link));
  return o;
}

/* The absolute form of a request path (relative ones are under /work). */
static void absolute(const char *path, char *buf, size_t len)
{
  snprintf(buf, len, "%s%s", path[0] == '/' ? "" : "/work/", path);
  size_t n = strlen(buf);
  while (n > 1 && buf[n - 1] == '/')
    buf[--n] = '\0';
}

static int stat_entry(struct sbx_live_session *ls, const char *path, json_t **out,
                      struct sbx_error *err)
{
  struct sbx_stat st;
  if (sbx_files_stat(ls, path, &st, err) < 0)
    return -1;
  char abs[4200];
  absolute(path, abs, sizeof abs);
  const char *base = strrchr(abs, '/');
  *out = entry_json(base && base[1] ? base + 1 : "/", abs, st.type, st.size, st.mode, st.mtime,
                    st.link_target);
  return 0;
}

/* The message's path field, checked like our own routes check ?path=. */
static const char *msg_path(json_t *msg, const char *field, struct sbx_error *err)
{
  const char *p = json_string_value(json_object_get(msg, field));
  return sbx_schema_path(p, field, err) < 0 ? NULL : p;
}

/* Runs op with the session's sandbox held; the message is consumed. */
typedef int (*fs_op)(struct sbx_live_session *ls, json_t *msg, json_t **res,
                     struct sbx_error *err);

static int with_sandbox(struct sbx_req *r, struct sbx_resp *out, fs_op op, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *res = NULL;
  if (!msg)
    return -1;
  struct sbx_live_session *ls =
      sbx_session_acquire_cap(r->core, &r->who, sbx_e2b_sid(r), SBX_CAP_FILES, err);
  int rc = ls ? op(ls, msg, &res, err) : -1;
  sbx_session_release(r->core, ls);
  json_decref(msg);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}

static int op_stat(struct sbx_live_session *ls, json_t *msg, json_t **res, struct sbx_error *err)
{
  const char *path = msg_path(msg, "path", err);
  json_t *e;
  if (!path || stat_entry(ls, path, &e, err) < 0)
    return -1;
  *res = json_pack("{s:o}", "entry", e);
  return 0;
}

static int op_list(struct sbx_live_session *ls, json_t *msg, json_t **res, struct sbx_error *err)
{
  const char *path = msg_path(msg, "path", err);
  json_t *dv = json_object_get(msg, "depth");
  json_int_t depth = json_is_integer(dv) ? json_integer_value(dv) : 1;
  if (!path)
    return -1;
  if (depth < 1 || depth > SBX_TREE_MAX_DEPTH)
    return sbx_err_field(err, "depth", "depth must be from 1 to %u", SBX_TREE_MAX_DEPTH);
  struct sbx_dirent *ents = NULL;
  size_t n = 0;
  int rc = depth == 1 ? sbx_files_list(ls, path, &ents, &n, LIST_MAX, err)
                      : sbx_files_list_tree(ls, path, (unsigned)depth, &ents, &n, LIST_MAX, err);
  if (rc == 0) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
      json_array_append_new(arr, entry_json(ents[i].name, ents[i].path, ents[i].type,
                                            ents[i].size, ents[i].mode, ents[i].mtime, NULL));
    *res = json_pack("{s:o}", "entries", arr);
  }
  free(ents);
  return rc;
}

static int op_mkdir(struct sbx_live_session *ls, json_t *msg, json_t **res,
                    struct sbx_error *err)
{
  const char *path = msg_path(msg, "path", err);
  struct sbx_stat st;
  struct sbx_error ignore = {0};
  if (!path)
    return -1;
  if (sbx_files_stat(ls, path, &st, &ignore) == 0) {
    sbx_err_set(err, SBX_E_CONFLICT, 0, "%s already exists", path);
    snprintf(err->field, sizeof err->field, "already_exists"); /* Connect's own code */
    return sbx_err_fr(err, "%s existe déjà", path);
  }
  json_t *e;
  if (sbx_files_mkdir(ls, path, 0, SBX_MKDIR_PARENTS, err) < 0 ||
      stat_entry(ls, path, &e, err) < 0)
    return -1;
  *res = json_pack("{s:o}", "entry", e);
  return 0;
}

static int op_move(struct sbx_live_session *ls, json_t *msg, json_t **res, struct sbx_error *err)
{
  const char *from = msg_path(msg, "source", err),
             *to = from ? msg_path(msg, "destination", err) : NULL;
  json_t *e;
  if (!to || sbx_files_move(ls, from, to, true, err) < 0 || stat_entry(ls, to, &e, err) < 0)
    return -1;
  *res = json_pack("{s:o}", "entry", e);
  return 0;
}

static int op_remove(struct sbx_live_session *ls, json_t *msg, json_t **res,
                     struct sbx_error *err)
{
  const char *path = msg_path(msg, "path", err);
  if (!path || sbx_files_remove(ls, path, err) < 0)
    return -1;
  *res = json_object();
  return 0;
}

int sbx_h_e2b_fs_stat(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return with_sandbox(r, out, op_stat, err);
}

int sbx_h_e2b_fs_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return with_sandbox(r, out, op_list, err);
}

int sbx_h_e2b_fs_mkdir(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return with_sandbox(r, out, op_mkdir, err);
}

int sbx_h_e2b_fs_move(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return with_sandbox(r, out, op_move, err);
}

int sbx_h_e2b_fs_remove(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  return with_sandbox(r, out, op_remove, err);
}

int sbx_h_e2b_fs_watchers(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out, (void)r;
  sbx_err_set(err, SBX_E_METHOD, 0,
              "polling watchers are not supported: use WatchDir, as the "
              "JS SDK does");
  return sbx_err_fr(err, "Les observateurs par scrutation ne sont pas pris en charge");
}

/* ---- WatchDir ---- */

struct watch_ctx {
  struct sbx_sse *sse;
  char dir[4200];
  uint64_t last_ms;
};

static int push(struct watch_ctx *w, const char *kind, json_t *value)
{
  size_t len = 0;
  char *f = sbx_e2b_frame(0, json_pack("{s:o}", kind, value), &len);
  w->last_ms = sbx_now_ms();
  return f ? sbx_sse_push_raw(w->sse, f, len, 0) : 1;
}

static const char *rel(const struct watch_ctx *w, const char *abs)
{
  size_t n = strlen(w->dir);
  if (!strcmp(w->dir, "/"))
    return abs + 1;
  return !strncmp(abs, w->dir, n) && abs[n] == '/' ? abs + n + 1 : abs;
}

static int fs_event(struct watch_ctx *w, const char *type, const char *abs)
{
  return push(w, "filesystem", json_pack("{s:s, s:s}", "name", rel(w, abs), "type", type));
}

static int sink_event(void *ctx, const char *type, json_t *ev)
{
  struct watch_ctx *w = ctx;
  int rc = 0;
  const char *path = json_string_value(json_object_get(ev, "path"));
  if (!strcmp(type, "ready"))
    rc = push(w, "start", json_object());
  else if (!strcmp(type, "create"))
    rc = fs_event(w, "EVENT_TYPE_CREATE", path);
  else if (!strcmp(type, "modify"))
    rc = fs_event(w, "EVENT_TYPE_WRITE", path);
  else if (!strcmp(type, "delete"))
    rc = fs_event(w, "EVENT_TYPE_REMOVE", path);
  else if (!strcmp(type, "move") &&
           (rc = fs_event(w, "EVENT_TYPE_RENAME",
                          json_string_value(json_object_get(ev, "from")) ?: path)) == 0)
    rc = fs_event(w, "EVENT_TYPE_CREATE", json_string_value(json_object_get(ev, "to")) ?: path);
  json_decref(ev);
  return rc;
}

static bool sink_gone(void *ctx)
{
  struct watch_ctx *w = ctx;
  if (sbx_sse_gone(w->sse))
    return true;
  if (sbx_now_ms() - w->last_ms >= KEEPALIVE_MS) /* a frame a proxy can see */
    push(w, "keepalive", json_object());
  return false;
}

static void sink_end(void *ctx, const char *why)
{
  struct watch_ctx *w = ctx;
  struct sbx_error e = {.code = SBX_E_NOT_FOUND};
  snprintf(e.msg, sizeof e.msg, "the watch ended: %s", why);
  size_t len = 0;
  char *f = sbx_e2b_end_frame(strcmp(why, "client gone") ? &e : NULL, &len);
  if (f)
    sbx_sse_push_raw(w->sse, f, len, 1000);
  sbx_sse_finish(w->sse);
  sbx_sse_unref(w->sse);
  free(w);
}

int sbx_h_e2b_fs_watch(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err);
  if (!msg)
    return -1;
  const char *dir = msg_path(msg, "path", err);
  bool recursive = json_is_true(json_object_get(msg, "recursive"));
  struct watch_ctx *w = dir ? calloc(1, sizeof *w) : NULL;
  if (!w || !(w->sse = sbx_sse_new(WATCH_QUEUE_BYTES))) {
    json_decref(msg);
    free(w);
    return dir ? sbx_err_sys(err, ENOMEM, "watch") : -1;
  }
  absolute(dir, w->dir, sizeof w->dir);
  w->last_ms = sbx_now_ms();
  json_decref(msg);
  struct sbx_resp tmp = {.fd = -1};
  sbx_sse_respond_raw(&tmp, w->sse, "application/connect+json", NULL, NULL);
  struct sbx_watch_sink sink = {.event = sink_event,
                                .gone = sink_gone,
                                .end = sink_end,
                                .ctx = w};
  struct sbx_sse *sse = w->sse;
  if (sbx_session_watch(r->core, &r->who, sbx_e2b_sid(r), w->dir, recursive, &sink, err) < 0) {
    tmp.stream_free(tmp.stream_ctx);
    sbx_sse_unref(sse);
    free(w);
    return -1;
  }
  *out = tmp;
  return 0;
}
