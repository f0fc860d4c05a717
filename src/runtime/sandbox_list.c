/* sandbox_list.c — listings of a live sandbox (runtime/sandbox.h): one
 * directory, a glob, a tree walked one directory at a time.  sbx-init
 * writes the records into a memfd the daemon passes in and sizes (so a
 * hostile init cannot make it hold more than the caller's maximum); every
 * record is validated here: names without '/', paths inside the sandbox. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "init/proto.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"
#include "runtime/sandbox_req.h"

/* Reads exactly n bytes from f; false on a short read. */
static bool take(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static int read_dirent(FILE *f, const char *dir, struct sbx_dirent *d)
{
  uint8_t t;
  uint32_t mode;
  uint64_t size, mtime;
  uint16_t nl;
  if (!take(f, &t, 1) || !take(f, &mode, 4) || !take(f, &size, 8) || !take(f, &mtime, 8) ||
      !take(f, &nl, 2) || nl == 0 || nl >= sizeof d->name || !take(f, d->name, nl))
    return -1;
  d->name[nl] = '\0';
  if (memchr(d->name, '/', nl) || strlen(d->name) != nl)
    return -1;
  snprintf(d->type, sizeof d->type, "%s", sbx_req_type_name(t));
  d->size = size;
  d->mode = mode & 07777;
  d->mtime = (int64_t)mtime;
  int n = snprintf(d->path, sizeof d->path, "%s%s%s", dir,
                   dir[strlen(dir) - 1] == '/' ? "" : "/", d->name);
  return n < 0 || (size_t)n >= sizeof d->path ? -1 : 0;
}

static int cmp_dirent(const void *a, const void *b)
{
  return strcmp(((const struct sbx_dirent *)a)->name, ((const struct sbx_dirent *)b)->name);
}

/* The memfd LIST/GLOB records go into: bounded by what max entries take. */
static size_t records_cap(size_t max, size_t per)
{
  size_t cap = 1u << 28; /* 256 MiB */
  return max + 1 < cap / per ? (max + 1) * per : cap;
}

/* Opens the memfd of a LIST/GLOB reply for reading from its start. */
static FILE *open_records(int *fd, struct sbx_error *err)
{
  struct stat st;
  if (*fd < 0 || fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || lseek(*fd, 0, SEEK_SET) < 0) {
    sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "sbx-init sent a bad listing");
    return NULL;
  }
  FILE *f = fdopen(*fd, "r");
  if (!f)
    sbx_err_sys(err, errno, "fdopen");
  else
    *fd = -1;
  return f;
}

/* A LIST/GLOB of path for at most max records of up to per bytes each:
 * the records, read from the first, and how many (*n); NULL on error,
 * SBX_E_TOO_LARGE ("<path> has more than <max> entries") past max. */
static FILE *records_call(struct sbx_sandbox *sb, uint32_t type, const char *path, size_t max,
                          size_t per, const char *what, uint64_t *n, struct sbx_error *err)
{
  struct sbx_chan_reply rep;
  if (max > UINT32_MAX - 1)
    max = UINT32_MAX - 1;
  _cleanup_close_ int fd = sbx_fdin_memfd(records_cap(max, per), err);
  if (fd < 0 || sbx_req_path(sb, type, path, 1, (uint32_t)max, 0, fd, &rep, err) < 0)
    return NULL;
  if (rep.value > max) {
    sbx_err_set(err, SBX_E_TOO_LARGE, 0, "%s %s more than %zu %s", path,
                type == SBX_MSG_LIST ? "has" : "matches", max, what);
    return NULL;
  }
  *n = rep.value;
  return open_records(&fd, err);
}

int sbx_sandbox_list(struct sbx_sandbox *sb, const char *dir, struct sbx_dirent **out,
                     size_t *count, size_t max, struct sbx_error *err)
{
  char d[SBX_PROTO_MAX_PATH];
  uint64_t n = 0;
  if (sbx_req_norm(dir, "path", d, sizeof d, err) < 0)
    return -1;
  _cleanup_fclose_ FILE *f =
      records_call(sb, SBX_MSG_LIST, d, max, SBX_PROTO_LIST_REC + 256, "entries", &n, err);
  if (!f)
    return -1;
  _cleanup_free_ struct sbx_dirent *v = calloc(n ? n : 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "list");
  for (size_t i = 0; i < n; i++)
    if (read_dirent(f, d, &v[i]) < 0)
      return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad listing", d);
  qsort(v, n, sizeof *v, cmp_dirent);
  *count = n;
  *out = steal_pointer(&v);
  return 0;
}

static void free_strv(char **v, size_t n)
{
  for (size_t i = 0; v && i < n; i++)
    free(v[i]);
  free(v);
}

static int read_paths(FILE *f, char **v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint16_t l;
    if (!take(f, &l, 2) || l == 0 || l >= SBX_PROTO_MAX_PATH || !(v[i] = malloc(l + 1u)) ||
        !take(f, v[i], l))
      return -1;
    v[i][l] = '\0';
    if (strlen(v[i]) != l || !sbx_proto_path_ok(v[i]) || v[i][0] != '/')
      return -1;
  }
  return 0;
}

int sbx_sandbox_glob(struct sbx_sandbox *sb, const char *pattern, char ***out, size_t *count,
                     size_t max, struct sbx_error *err)
{
  uint64_t n = 0;
  _cleanup_fclose_ FILE *f =
      records_call(sb, SBX_MSG_GLOB, pattern, max, 2 + SBX_PROTO_MAX_PATH, "files", &n, err);
  if (!f)
    return -1;
  char **v = calloc(n + 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "glob");
  if (read_paths(f, v, n) < 0) {
    free_strv(v, n);
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "sbx-init sent a bad glob result");
  }
  *out = v;
  *count = n;
  return 0;
}

/* ---- recursive listing ---- */

struct tree {
  struct sbx_dirent *v;
  size_t n, cap, max;
};

static int tree_add(struct tree *t, const struct sbx_dirent *d, struct sbx_error *err)
{
  if (t->n >= t->max)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "more than %zu entries", t->max);
  if (sbx_array_grow(&t->v, &t->cap, t->n + 1, sizeof *t->v, t->max) < 0)
    return sbx_err_sys(err, ENOMEM, "list");
  t->v[t->n++] = *d;
  return 0;
}

static int walk(struct sbx_sandbox *sb, const char *dir, unsigned depth, unsigned max_depth,
                struct tree *t, struct sbx_error *err)
{
  struct sbx_dirent *ents = NULL;
  size_t n = 0;
  /* One more than the budget left, so "too many" is ours to report. */
  if (sbx_sandbox_list(sb, dir, &ents, &n, t->max - t->n + 1, err) < 0) {
    if (err->code == SBX_E_TOO_LARGE)
      sbx_err_set(err, SBX_E_TOO_LARGE, 0, "more than %zu entries", t->max);
    return -1;
  }
  int r = 0;
  for (size_t i = 0; r == 0 && i < n; i++) {
    r = tree_add(t, &ents[i], err);
    if (r == 0 && !strcmp(ents[i].type, "dir") && depth < max_depth) {
      r = walk(sb, ents[i].path, depth + 1, max_depth, t, err);
      /* A directory that vanished (or became something else) between the
       * two listings is skipped: the tree was changing under us. */
      if (r < 0 && (err->code == SBX_E_NOT_FOUND || err->code == SBX_E_INVALID)) {
        sbx_err_clear(err);
        r = 0;
      }
    }
  }
  free(ents);
  return r;
}

int sbx_sandbox_list_tree(struct sbx_sandbox *sb, const char *dir, unsigned max_depth,
                          struct sbx_dirent **out, size_t *count, size_t max,
                          struct sbx_error *err)
{
  char d[SBX_PROTO_MAX_PATH];
  if (sbx_req_norm_dir(dir, "path", d, sizeof d, err) < 0)
    return -1;
  if (max_depth == 0 || max_depth > SBX_TREE_MAX_DEPTH)
    max_depth = SBX_TREE_MAX_DEPTH;
  struct tree t = {.max = max};
  if (walk(sb, d, 1, max_depth, &t, err) < 0) {
    free(t.v);
    return -1;
  }
  *out = t.v ? t.v : calloc(1, sizeof **out);
  *count = t.n;
  return *out ? 0 : sbx_err_sys(err, ENOMEM, "list");
}
