/* sandbox_fs.c — stat, mkdir, move, symlinks, recursive listing and watch
 * on a live sandbox (runtime/sandbox.h, issue 4 block).  Each is one
 * message to sbx-init (types 60–79, init/proto.h); what comes back is
 * validated here like everything else sbx-init sends.  The daemon passes
 * in what sbx-init fills (issue 6, fd-in, every driver): a sealed memfd
 * for STAT/READLINK records, the write end of the WATCH event pipe. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "init/proto.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"

/* Absolute path inside the sandbox; relative paths are under /work. */
static int norm(const char *path, const char *field, char *out, size_t len,
                struct sbx_error *err)
{
  if (!path || !*path)
    return sbx_err_field(err, field, "empty path");
  int n = path[0] == '/' ? snprintf(out, len, "%s", path) : snprintf(out, len, "/work/%s", path);
  if (n < 0 || (size_t)n >= len || !sbx_proto_path_ok(out))
    return sbx_err_field(err, field, "invalid path (too long or contains '..')");
  while (n > 1 && out[n - 1] == '/')
    out[--n] = '\0';
  return 0;
}

/* EEXIST is a conflict (409), not a bad request. */
static int remap(struct sbx_error *err)
{
  if (err && err->errnum == EEXIST)
    err->code = SBX_E_CONFLICT;
  if (err && (err->errnum == EXDEV || err->errnum == EBUSY))
    err->code = SBX_E_INVALID;
  return -1;
}

/* Sends the request (+ fd when >= 0: ours, kept) and waits for its reply. */
static int call_fd(struct sbx_sandbox *sb, uint32_t type, struct sbx_wbuf *w, int fd,
                   const char *what, struct sbx_chan_reply *rep, struct sbx_error *err)
{
  int r = w->bad ? sbx_err_field(err, "path", "path too long")
                 : sbx_chan_call_fds(sb, type, w->buf, w->len, &fd, fd >= 0, what, rep, err);
  sbx_wbuf_free(w);
  if (r == 0 && rep->fd >= 0) { /* none of these replies carries an fd */
    close(rep->fd);
    rep->fd = -1;
  }
  return r < 0 ? remap(err) : 0;
}

static int call(struct sbx_sandbox *sb, uint32_t type, struct sbx_wbuf *w, const char *what,
                struct sbx_chan_reply *rep, struct sbx_error *err)
{
  return call_fd(sb, type, w, -1, what, rep, err);
}

/* What sbx-init wrote into our memfd (sized max, sealed against growth):
 * max bytes from 0; the record says how many count. */
static ssize_t read_memfd(int fd, char *buf, size_t max)
{
  ssize_t n = pread(fd, buf, max, 0);
  return n == (ssize_t)max ? n : -1;
}

static const char *type_name(uint8_t t)
{
  switch (t) {
  case SBX_PROTO_DT_FILE: return "file";
  case SBX_PROTO_DT_DIR: return "dir";
  case SBX_PROTO_DT_LINK: return "symlink";
  default: return "other";
  }
}

static int parse_stat(const char *buf, size_t n, struct sbx_stat *out)
{
  if (n < SBX_PROTO_STAT_REC)
    return -1;
  uint16_t rl;
  memcpy(&rl, buf + 21, 2);
  if ((size_t)SBX_PROTO_STAT_REC + rl <= n)
    n = SBX_PROTO_STAT_REC + rl; /* the rest of the memfd is zeros */
  uint8_t t = (uint8_t)buf[0];
  uint32_t mode;
  uint64_t size, mtime;
  uint16_t ll;
  memcpy(&mode, buf + 1, 4);
  memcpy(&size, buf + 5, 8);
  memcpy(&mtime, buf + 13, 8);
  memcpy(&ll, buf + 21, 2);
  if (n != SBX_PROTO_STAT_REC + ll || ll >= sizeof out->link_target ||
      (ll && t != SBX_PROTO_DT_LINK) || memchr(buf + SBX_PROTO_STAT_REC, '\0', ll))
    return -1;
  snprintf(out->type, sizeof out->type, "%s", type_name(t));
  out->mode = mode & 07777;
  out->size = size;
  out->mtime = (int64_t)mtime;
  memcpy(out->link_target, buf + SBX_PROTO_STAT_REC, ll);
  out->link_target[ll] = '\0';
  return 0;
}

int sbx_sandbox_stat(struct sbx_sandbox *sb, const char *path, struct sbx_stat *out,
                     struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (norm(path, "path", p, sizeof p, err) < 0)
    return -1;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  struct sbx_chan_reply rep;
  char buf[SBX_PROTO_STAT_REC + SBX_PROTO_MAX_PATH];
  _cleanup_close_ int fd = sbx_fdin_memfd(sizeof buf, err);
  if (fd < 0) {
    sbx_wbuf_free(&w);
    return -1;
  }
  if (call_fd(sb, SBX_MSG_STAT, &w, fd, p, &rep, err) < 0)
    return -1;
  ssize_t n = read_memfd(fd, buf, sizeof buf);
  memset(out, 0, sizeof *out);
  if (n < 0 || parse_stat(buf, (size_t)n, out) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad stat", p);
  return 0;
}

int sbx_sandbox_mkdir(struct sbx_sandbox *sb, const char *path, unsigned mode, unsigned flags,
                      struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (norm(path, "path", p, sizeof p, err) < 0)
    return -1;
  uint32_t f = 0;
  if (flags & SBX_MKDIR_PARENTS)
    f |= SBX_PROTO_MK_PARENTS | SBX_PROTO_MK_EXIST_OK;
  if (flags & SBX_MKDIR_MODE)
    f |= SBX_PROTO_MK_MODE;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  sbx_wbuf_u32(&w, mode & 0777);
  sbx_wbuf_u32(&w, f);
  struct sbx_chan_reply rep;
  if (call(sb, SBX_MSG_MKDIR, &w, p, &rep, err) < 0)
    return -1;
  if (rep.fd >= 0)
    close(rep.fd);
  return 0;
}

int sbx_sandbox_move(struct sbx_sandbox *sb, const char *from, const char *to, bool overwrite,
                     struct sbx_error *err)
{
  char a[SBX_PROTO_MAX_PATH], b[SBX_PROTO_MAX_PATH];
  if (norm(from, "from", a, sizeof a, err) < 0 || norm(to, "to", b, sizeof b, err) < 0)
    return -1;
  if (!strcmp(a, "/") || !strcmp(b, "/"))
    return sbx_err_field(err, !strcmp(a, "/") ? "from" : "to", "the root cannot be moved");
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, a);
  sbx_wbuf_str(&w, b);
  sbx_wbuf_u32(&w, overwrite ? SBX_PROTO_MV_OVERWRITE : 0);
  char what[128];
  snprintf(what, sizeof what, "move %.50s → %.50s", a, b);
  struct sbx_chan_reply rep;
  if (call(sb, SBX_MSG_MOVE, &w, what, &rep, err) < 0)
    return -1;
  if (rep.fd >= 0)
    close(rep.fd);
  return 0;
}

int sbx_sandbox_readlink(struct sbx_sandbox *sb, const char *path, char *buf, size_t len,
                         struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (norm(path, "path", p, sizeof p, err) < 0)
    return -1;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  struct sbx_chan_reply rep;
  char t[SBX_PROTO_MAX_PATH];
  _cleanup_close_ int fd = sbx_fdin_memfd(sizeof t - 1, err);
  if (fd < 0) {
    sbx_wbuf_free(&w);
    return -1;
  }
  if (call_fd(sb, SBX_MSG_READLINK, &w, fd, p, &rep, err) < 0)
    return -1;
  ssize_t n = read_memfd(fd, t, sizeof t - 1);
  if (n > 0 && rep.value < (uint64_t)n)
    n = (ssize_t)rep.value;
  if (n <= 0 || memchr(t, '\0', (size_t)n) || (size_t)n >= len)
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad link", p);
  memcpy(buf, t, (size_t)n);
  buf[n] = '\0';
  return 0;
}

int sbx_sandbox_symlink(struct sbx_sandbox *sb, const char *path, const char *target,
                        struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (norm(path, "path", p, sizeof p, err) < 0)
    return -1;
  if (!target || !*target || strlen(target) >= SBX_PROTO_MAX_PATH)
    return sbx_err_field(err, "target", "a symlink target is 1 to 4095 bytes");
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  sbx_wbuf_str(&w, target);
  struct sbx_chan_reply rep;
  if (call(sb, SBX_MSG_SYMLINK, &w, p, &rep, err) < 0)
    return -1;
  if (rep.fd >= 0)
    close(rep.fd);
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
  if (t->n == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    struct sbx_dirent *nv = realloc(t->v, nc * sizeof *nv);
    if (!nv)
      return sbx_err_sys(err, ENOMEM, "list");
    t->v = nv;
    t->cap = nc;
  }
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
  if (norm(dir, "path", d, sizeof d, err) < 0)
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

/* ---- watch ---- */

int sbx_sandbox_watch(struct sbx_sandbox *sb, const char *dir, bool recursive,
                      unsigned max_watches, int *fd_out, struct sbx_error *err)
{
  char d[SBX_PROTO_MAX_PATH];
  if (norm(dir, "path", d, sizeof d, err) < 0)
    return -1;
  if (max_watches == 0 || max_watches > SBX_PROTO_WATCH_MAX)
    max_watches = SBX_PROTO_WATCH_MAX;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, d);
  sbx_wbuf_u32(&w, recursive ? SBX_PROTO_WATCH_RECURSIVE : 0);
  sbx_wbuf_u32(&w, max_watches);
  struct sbx_chan_reply rep;
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) {
    sbx_wbuf_free(&w);
    return sbx_err_sys(err, errno, "watch pipe");
  }
  /* Our pipe: the watcher gets the write end, we keep the read end. */
  _cleanup_close_ int fd = p[0], wr = p[1];
  if (call_fd(sb, SBX_MSG_WATCH, &w, wr, d, &rep, err) < 0 || sbx_set_nonblock(fd, 1) < 0)
    return -1;
  *fd_out = steal_fd(&fd);
  return 0;
}

int sbx_watch_reader_fill(struct sbx_watch_reader *r, int fd)
{
  if (r->len == sizeof r->buf)
    return 0;
  ssize_t n = read(fd, r->buf + r->len, sizeof r->buf - r->len);
  if (n > 0) {
    r->len += (size_t)n;
    return 0;
  }
  if (n == 0)
    return 1;
  return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

static bool rel_ok(const char *p, size_t n)
{
  if (memchr(p, '\0', n) || (n && (p[0] == '/' || p[n - 1] == '/')))
    return false;
  char tmp[SBX_PROTO_MAX_PATH];
  memcpy(tmp, p, n);
  tmp[n] = '\0';
  return n == 0 || sbx_proto_path_ok(tmp);
}

int sbx_watch_reader_next(struct sbx_watch_reader *r, struct sbx_watch_event *ev)
{
  if (r->len < SBX_PROTO_WEV_HDR)
    return 0;
  uint8_t kind = (uint8_t)r->buf[0], dir = (uint8_t)r->buf[1];
  uint16_t l1, l2;
  uint32_t count;
  memcpy(&l1, r->buf + 2, 2);
  memcpy(&l2, r->buf + 4, 2);
  memcpy(&count, r->buf + 6, 4);
  if (kind < SBX_PROTO_WEV_CREATE || kind > SBX_PROTO_WEV_READY || dir > 1 ||
      l1 >= SBX_PROTO_MAX_PATH || l2 >= SBX_PROTO_MAX_PATH ||
      (l2 && kind != SBX_PROTO_WEV_MOVE))
    return -1;
  size_t need = SBX_PROTO_WEV_HDR + l1 + l2;
  if (r->len < need)
    return 0;
  const char *a = r->buf + SBX_PROTO_WEV_HDR, *b = a + l1;
  if (!rel_ok(a, l1) || !rel_ok(b, l2))
    return -1;
  ev->kind = (enum sbx_watch_kind)kind;
  ev->dir = dir;
  memcpy(ev->path, a, l1);
  ev->path[l1] = '\0';
  memcpy(ev->to, b, l2);
  ev->to[l2] = '\0';
  ev->dropped = kind == SBX_PROTO_WEV_OVERFLOW ? count : 0;
  memmove(r->buf, r->buf + need, r->len - need);
  r->len -= need;
  return 1;
}
