/* fsops.c — STAT, MKDIR, MOVE, READLINK, SYMLINK and WATCH's dispatch
 * (message types 60–79).
 *
 * Like fileops.c, every path is resolved from the sandbox root with openat2
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS and a final component is never
 * followed: STAT is lstat, MOVE renames the link itself, MKDIR/SYMLINK
 * create in a parent resolved in the root.  A symlink's target is stored
 * verbatim: it can only ever be followed by a later RESOLVE_IN_ROOT lookup
 * (or by the workload, which is inside the sandbox anyway). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

int sbxi_split_path(const char *path, char *buf, size_t len, const char **name)
{
  size_t n = strlen(path);
  if (n + 3 > len)
    return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/')
    buf[--n] = '\0';
  char *slash = strrchr(buf, '/');
  *name = slash ? slash + 1 : buf;
  if (!**name || !strcmp(*name, ".") || !strcmp(*name, ".."))
    return -EINVAL;
  if (!slash) {
    memmove(buf + 2, buf, n + 1);
    buf[0] = '.';
    buf[1] = '\0';
    *name = buf + 2;
  } else if (slash == buf) {
    memmove(buf + 2, slash + 1, strlen(slash + 1) + 1);
    buf[0] = '/';
    buf[1] = '\0';
    *name = buf + 2;
  } else {
    *slash = '\0';
  }
  return 0;
}

/* The parent directory of path, resolved in the root; *name points into buf. */
static int open_parent(int rootfd, const char *path, char *buf, size_t len, const char **name)
{
  int r = sbxi_split_path(path, buf, len, name);
  if (r)
    return r;
  int fd = sbxi_open_in_root(rootfd, buf, O_PATH | O_DIRECTORY, 0);
  return fd < 0 ? -errno : fd;
}

static uint8_t dtype(mode_t m)
{
  if (S_ISREG(m))
    return SBX_PROTO_DT_FILE;
  if (S_ISDIR(m))
    return SBX_PROTO_DT_DIR;
  if (S_ISLNK(m))
    return SBX_PROTO_DT_LINK;
  return SBX_PROTO_DT_OTHER;
}

/* O_PATH|O_NOFOLLOW: an fd on the entry itself, symlink or not. */
static int open_nofollow(int rootfd, const char *path)
{
  int fd = sbxi_open_in_root(rootfd, path, O_PATH | O_NOFOLLOW, 0);
  return fd < 0 ? -errno : fd;
}

static int read_link(int fd, char *buf, size_t len)
{
  ssize_t n = readlinkat(fd, "", buf, len);
  if (n < 0)
    return -errno;
  if ((size_t)n >= len)
    return -ENAMETOOLONG;
  buf[n] = '\0';
  return (int)n;
}

static int stat_path(int rootfd, const char *path, int memfd)
{
  int fd = open_nofollow(rootfd, path);
  if (fd < 0)
    return fd;
  struct stat st;
  char link[SBX_PROTO_MAX_PATH];
  int ll = 0;
  if (fstat(fd, &st) < 0)
    ll = -errno;
  else if (S_ISLNK(st.st_mode))
    ll = read_link(fd, link, sizeof link);
  close(fd);
  if (ll < 0)
    return ll;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_STAT_REC + sizeof link);
  sbx_wbuf_u8(&w, dtype(st.st_mode));
  sbx_wbuf_u32(&w, st.st_mode & 07777);
  sbx_wbuf_u64(&w, (uint64_t)st.st_size);
  sbx_wbuf_u64(&w, (uint64_t)st.st_mtim.tv_sec);
  sbx_wbuf_u16(&w, (uint16_t)ll);
  sbx_wbuf_put(&w, link, (size_t)ll);
  int r = w.bad ? -ENOMEM : write(memfd, w.buf, w.len) == (ssize_t)w.len ? 0 : -EIO;
  sbx_wbuf_free(&w);
  return r;
}

static int readlink_path(int rootfd, const char *path, int memfd, uint64_t *len)
{
  int fd = open_nofollow(rootfd, path);
  if (fd < 0)
    return fd;
  char link[SBX_PROTO_MAX_PATH];
  int n = read_link(fd, link, sizeof link);
  close(fd);
  if (n < 0)
    return n == -ENOENT ? -EINVAL : n; /* readlinkat("") on a non-link: ENOENT */
  if (write(memfd, link, (size_t)n) != n)
    return -EIO;
  *len = (uint64_t)n;
  return 0;
}

/* Sets the mode of dir name in pfd exactly (the umask applied at mkdir). */
static int chmod_dir(int pfd, const char *name, unsigned mode)
{
  int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int r = fchmod(fd, mode & 0777) < 0 ? -errno : 0;
  close(fd);
  return r;
}

static int mkdir_one(int rootfd, const char *path, unsigned mode, uint32_t flags)
{
  char parent[SBX_PROTO_MAX_PATH];
  const char *name;
  int pfd = open_parent(rootfd, path, parent, sizeof parent, &name);
  if (pfd < 0)
    return pfd;
  int r = 0;
  if (mkdirat(pfd, name, (flags & SBX_PROTO_MK_MODE) ? 0700 : 0755) < 0) {
    r = -errno;
    struct stat st;
    if (r == -EEXIST && (flags & SBX_PROTO_MK_EXIST_OK) &&
        fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
      r = 0;
  }
  if (r == 0 && (flags & SBX_PROTO_MK_MODE)) /* new or existing: the mode asked */
    r = chmod_dir(pfd, name, mode);
  close(pfd);
  return r;
}

/* mkdir -p: each prefix is created in its parent resolved from the root. */
static int mkdir_path(int rootfd, const char *path, unsigned mode, uint32_t flags)
{
  if (!(flags & SBX_PROTO_MK_PARENTS))
    return mkdir_one(rootfd, path, mode, flags);
  char buf[SBX_PROTO_MAX_PATH];
  size_t n = strlen(path);
  if (n >= sizeof buf)
    return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/')
    buf[--n] = '\0';
  for (size_t i = 1; i < n; i++) {
    if (buf[i] != '/' || buf[i - 1] == '/')
      continue;
    buf[i] = '\0';
    int r = mkdir_one(rootfd, buf, 0755, SBX_PROTO_MK_EXIST_OK);
    buf[i] = '/';
    if (r < 0 && r != -EINVAL)
      return r;
  }
  return mkdir_one(rootfd, buf, mode, flags | SBX_PROTO_MK_EXIST_OK);
}

static int move_path(int rootfd, const char *from, const char *to, uint32_t flags)
{
  char pa[SBX_PROTO_MAX_PATH], pb[SBX_PROTO_MAX_PATH];
  const char *na, *nb;
  int fa = open_parent(rootfd, from, pa, sizeof pa, &na);
  if (fa < 0)
    return fa;
  int fb = open_parent(rootfd, to, pb, sizeof pb, &nb);
  if (fb < 0) {
    close(fa);
    return fb;
  }
  unsigned rf = (flags & SBX_PROTO_MV_OVERWRITE) ? 0 : RENAME_NOREPLACE;
  int r = renameat2(fa, na, fb, nb, rf) < 0 ? -errno : 0;
  close(fa);
  close(fb);
  return r;
}

static int symlink_path(int rootfd, const char *path, const char *target)
{
  char parent[SBX_PROTO_MAX_PATH];
  const char *name;
  int pfd = open_parent(rootfd, path, parent, sizeof parent, &name);
  if (pfd < 0)
    return pfd;
  int r = symlinkat(target, pfd, name) < 0 ? -errno : 0;
  close(pfd);
  return r;
}

/* WATCH: the watcher writes to the daemon's pipe (out, consumed). */
static void watch_path(const struct sbxi *in, uint32_t id, const char *dir, uint32_t flags,
                       uint32_t max, int out)
{
  int r = 0;
  int dfd = max == 0 || max > SBX_PROTO_WATCH_MAX
                ? (errno = EINVAL, -1)
                : sbxi_open_in_root(in->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
  if (dfd < 0) {
    r = -errno;
    close(out);
  } else
    r = sbxi_watch(in, dfd, dir, flags, max, out); /* consumes dfd and out */
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, 0, -1);
}

/* STAT, READLINK: the record goes into the daemon's memfd (consumed). */
static void reply_memfd(const struct sbxi *in, uint32_t id, int type, const char *path, int mfd)
{
  uint64_t v = 1;
  int r = type == SBX_MSG_STAT ? stat_path(in->rootfd, path, mfd)
                               : readlink_path(in->rootfd, path, mfd, &v);
  close(mfd);
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, v, -1);
}

static bool target_ok(const char *t)
{
  return t && *t && strlen(t) < SBX_PROTO_MAX_PATH;
}

void sbxi_fsop(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
               int *fds, size_t nfds)
{
  const char *path = sbx_rbuf_str(r, SBX_PROTO_MAX_PATH);
  const char *second = NULL;
  uint32_t a = 0, b = 0;
  if (h->type == SBX_MSG_MOVE || h->type == SBX_MSG_SYMLINK)
    second = sbx_rbuf_str(r, SBX_PROTO_MAX_PATH);
  if (h->type == SBX_MSG_MKDIR || h->type == SBX_MSG_WATCH)
    a = sbx_rbuf_u32(r);
  if (h->type == SBX_MSG_MKDIR || h->type == SBX_MSG_MOVE || h->type == SBX_MSG_WATCH)
    b = sbx_rbuf_u32(r);
  /* fd-in: STAT/READLINK carry the memfd for the record, WATCH
   * the write end of the event pipe; nothing else carries an fd. */
  int kind = h->type == SBX_MSG_STAT || h->type == SBX_MSG_READLINK ? S_IFREG
             : h->type == SBX_MSG_WATCH                              ? S_IFIFO
                                                                     : -1;
  int fd = kind >= 0 ? sbxi_take_fd(fds, nfds, (unsigned)kind) : -1;
  if (kind < 0)
    sbxi_close_fds(fds, nfds);
  bool bad = r->bad || r->off != r->len || !path || !sbx_proto_path_ok(path) ||
             (h->type == SBX_MSG_MOVE && (!second || !sbx_proto_path_ok(second))) ||
             (h->type == SBX_MSG_SYMLINK && !target_ok(second)) || (kind >= 0 && fd < 0);
  if (bad) {
    if (fd >= 0)
      close(fd);
    sbxi_reply_err(in->chan, h->id, EINVAL);
    return;
  }
  int rc;
  switch (h->type) {
  case SBX_MSG_STAT:
  case SBX_MSG_READLINK:
    reply_memfd(in, h->id, (int)h->type, path, fd);
    return;
  case SBX_MSG_MKDIR:
    rc = mkdir_path(in->rootfd, path, a, b);
    break;
  case SBX_MSG_MOVE:
    rc = move_path(in->rootfd, path, second, b);
    break;
  case SBX_MSG_SYMLINK:
    rc = symlink_path(in->rootfd, path, second);
    break;
  case SBX_MSG_WATCH:
    watch_path(in, h->id, path, a, b, fd);
    return;
  default:
    rc = -ENOSYS;
  }
  if (rc < 0)
    sbxi_reply_err(in->chan, h->id, -rc);
  else
    sbxi_reply_ok(in->chan, h->id, 0, -1);
}
