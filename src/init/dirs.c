/* dirs.c — the operations on the tree rather than a file's bytes: LIST,
 * GLOB's reply, REMOVE, STAT, STATFS, READLINK, MKDIR, MOVE, SYMLINK.
 *
 * Every path is resolved from the sandbox root (path.c) and a final
 * component is never followed: STAT is lstat, MOVE renames the link
 * itself, MKDIR/SYMLINK create in a parent resolved in the root, removal is
 * fd-based and never follows a symlink or crosses a mount.  A symlink's
 * target is stored verbatim: it can only ever be followed by a later
 * RESOLVE_IN_ROOT lookup (or by the workload, which is inside the sandbox
 * anyway). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "init/init.h"

#define REMOVE_MAX_DEPTH 256

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
  sbx_wbuf_u8(&w, sbxi_dtype(st.st_mode));
  sbx_wbuf_u32(&w, st.st_mode & 07777);
  sbx_wbuf_u64(&w, (uint64_t)st.st_size);
  sbx_wbuf_u64(&w, (uint64_t)st.st_mtim.tv_sec);
  sbx_wbuf_u16(&w, (uint16_t)ll);
  sbx_wbuf_put(&w, link, (size_t)ll);
  int r = w.bad ? -ENOMEM : write(memfd, w.buf, w.len) == (ssize_t)w.len ? 0 : -EIO;
  sbx_wbuf_free(&w);
  return r;
}

/* The filesystem holding path: a mount point such as /work is followed
 * into, since it is what the daemon asks about. */
static int statfs_path(int rootfd, const char *path, int memfd)
{
  int fd = sbxi_open_in_root(rootfd, path, O_PATH, 0);
  if (fd < 0)
    return -errno;
  struct stat st;
  struct statvfs fs;
  int r = fstat(fd, &st) < 0 || fstatvfs(fd, &fs) < 0 ? -errno : 0;
  close(fd);
  if (r < 0)
    return r;
  uint64_t unit = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_STATFS_REC);
  sbx_wbuf_u64(&w, (uint64_t)st.st_dev);
  sbx_wbuf_u64(&w, (uint64_t)fs.f_blocks * unit);
  sbx_wbuf_u64(&w, (uint64_t)fs.f_bfree * unit);
  sbx_wbuf_u32(&w, fs.f_flag & ST_RDONLY ? SBX_PROTO_FS_RDONLY : 0);
  r = w.bad ? -ENOMEM : write(memfd, w.buf, w.len) == (ssize_t)w.len ? 0 : -EIO;
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
  int pfd = sbxi_open_parent(rootfd, path, O_PATH, parent, sizeof parent, &name);
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
  int fa = sbxi_open_parent(rootfd, from, O_PATH, pa, sizeof pa, &na);
  if (fa < 0)
    return fa;
  int fb = sbxi_open_parent(rootfd, to, O_PATH, pb, sizeof pb, &nb);
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
  int pfd = sbxi_open_parent(rootfd, path, O_PATH, parent, sizeof parent, &name);
  if (pfd < 0)
    return pfd;
  int r = symlinkat(target, pfd, name) < 0 ? -errno : 0;
  close(pfd);
  return r;
}

static int list_dir(int rootfd, const char *dir, uint32_t max, int memfd, uint64_t *count)
{
  int dfd = sbxi_open_in_root(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
  if (dfd < 0 && errno == ENOTDIR) {
    /* It exists but is not a directory: that is "invalid", not "absent". */
    int e = sbxi_open_in_root(rootfd, dir, O_PATH | O_NOFOLLOW, 0);
    if (e >= 0) {
      close(e);
      return -EINVAL;
    }
    errno = ENOTDIR;
  }
  if (dfd < 0)
    return -errno;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return -errno;
  }
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, ((size_t)max + 1) * (SBX_PROTO_LIST_REC + 256));
  struct dirent *e;
  *count = 0;
  while (*count <= max && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue; /* raced with a removal */
    size_t nl = strlen(e->d_name);
    sbx_wbuf_u8(&w, sbxi_dtype(st.st_mode));
    sbx_wbuf_u32(&w, st.st_mode & 07777);
    sbx_wbuf_u64(&w, (uint64_t)st.st_size);
    sbx_wbuf_u64(&w, (uint64_t)st.st_mtim.tv_sec);
    sbx_wbuf_u16(&w, (uint16_t)nl);
    sbx_wbuf_put(&w, e->d_name, nl);
    (*count)++;
  }
  closedir(d);
  int r = w.bad ? -ENOMEM : 0;
  if (!r && w.len && write(memfd, w.buf, w.len) != (ssize_t)w.len)
    r = -EIO;
  sbx_wbuf_free(&w);
  return r;
}

static bool is_mount_root(int dirfd, const char *name, dev_t parent_dev, dev_t dev)
{
  if (dev != parent_dev)
    return true;
  struct statx sx;
  if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) == 0 &&
      (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
    return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  return false;
}

static int remove_at(int pfd, const char *name, dev_t pdev, int depth);

static int empty_dir(int dfd, dev_t dev, int depth)
{
  int dup_fd = dup(dfd);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0)
      close(dup_fd);
    return -errno;
  }
  int r = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int rr = remove_at(dfd, e->d_name, dev, depth + 1);
    if (rr && !r)
      r = rr;
  }
  closedir(d);
  return r;
}

static int remove_at(int pfd, const char *name, dev_t pdev, int depth)
{
  struct stat st;
  if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return unlinkat(pfd, name, 0) < 0 ? -errno : 0;
  if (depth > REMOVE_MAX_DEPTH)
    return -ELOOP;
  if (is_mount_root(pfd, name, pdev, st.st_dev))
    return -EBUSY;
  int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0)
    return -errno;
  int r = empty_dir(dfd, st.st_dev, depth);
  close(dfd);
  if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && !r)
    r = -errno;
  return r;
}

static int remove_path(int rootfd, const char *path)
{
  char parent[SBX_PROTO_MAX_PATH];
  const char *name;
  int pfd = sbxi_open_parent(rootfd, path, O_RDONLY, parent, sizeof parent, &name);
  if (pfd < 0)
    return pfd;
  struct stat pst;
  int r = fstat(pfd, &pst) < 0 ? -errno : remove_at(pfd, name, pst.st_dev, 0);
  close(pfd);
  return r;
}

/* ---- the requests (ops.c's table) ---- */

static void reply_rc(const struct sbxi *in, uint32_t id, int rc)
{
  if (rc < 0)
    sbxi_reply_err(in->chan, id, -rc);
  else
    sbxi_reply_ok(in->chan, id, 0, -1);
}

/* LIST, GLOB, STAT, STATFS: the records went into the daemon's memfd
 * (fd-in, always; consumed); OK carries their count. */
static void reply_records(const struct sbxi *in, uint32_t id, int r, uint64_t count, int mfd)
{
  close(mfd);
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, count, -1);
}

void sbxi_op_list(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint64_t count = 0;
  int r = list_dir(in->rootfd, q->path, q->a, q->fd, &count);
  reply_records(in, id, r, count, q->fd);
}

void sbxi_op_glob(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint64_t count = 0;
  int r = sbxi_glob(in->rootfd, q->path, q->a, q->fd, &count);
  reply_records(in, id, r, count, q->fd);
}

void sbxi_op_remove(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_rc(in, id, remove_path(in->rootfd, q->path));
}

void sbxi_op_stat(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_records(in, id, stat_path(in->rootfd, q->path, q->fd), 1, q->fd);
}

void sbxi_op_statfs(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_records(in, id, statfs_path(in->rootfd, q->path, q->fd), 1, q->fd);
}

/* READLINK: the target goes into the daemon's memfd (consumed). */

void sbxi_op_readlink(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint64_t len = 0;
  int r = readlink_path(in->rootfd, q->path, q->fd, &len);
  close(q->fd);
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, len, -1);
}

void sbxi_op_mkdir(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_rc(in, id, mkdir_path(in->rootfd, q->path, q->a, q->b));
}

void sbxi_op_move(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_rc(in, id, move_path(in->rootfd, q->path, q->second, q->a));
}

void sbxi_op_symlink(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  reply_rc(in, id, symlink_path(in->rootfd, q->path, q->second));
}
