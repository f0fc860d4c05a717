/* fileops.c — OPEN_READ, OPEN_WRITE, LIST, REMOVE (and GLOB's dispatch);
 * READ_TO and WRITE_FROM (fd-in: the bytes then move in xfer.c).
 *
 * Every path is resolved from the sandbox root with openat2
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, so ".." and absolute symlinks the
 * sandbox planted stay inside it.  Final components are never followed
 * (O_NOFOLLOW), special files are refused and opened O_NONBLOCK first so a
 * planted FIFO cannot hang sbx-init.  Removal is fd-based and never follows
 * a symlink or crosses a mount. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/init.h"

#define REMOVE_MAX_DEPTH 256

int sbxi_open_in_root(int rootfd, const char *path, int flags, unsigned mode)
{
  struct open_how how = {
      .flags = (uint64_t)(flags | O_CLOEXEC),
      .mode = (flags & O_CREAT) ? mode : 0,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS)
    return fd;
  /* No openat2 (gVisor's 2022 kernel).  Plain resolution is the same as
   * RESOLVE_IN_ROOT only when the root is the real "/" (the gvisor driver;
   * gVisor itself is the wall there); anywhere else, fail closed. */
  struct stat r, s;
  if (fstat(rootfd, &r) < 0 || stat("/", &s) < 0 || r.st_dev != s.st_dev || r.st_ino != s.st_ino) {
    errno = ENOSYS;
    return -1;
  }
  return openat(rootfd, path, flags | O_CLOEXEC, (flags & O_CREAT) ? mode : 0);
}

void sbxi_reply_ok(int chan, uint32_t id, uint64_t v, int fd)
{
  int rc = sbx_proto_send(chan, SBX_MSG_OK, id, 0, &v, sizeof v, fd >= 0 ? &fd : NULL, fd >= 0);
  int e = errno;
  if (fd >= 0)
    close(fd);
  /* gVisor refuses to pass an fd out to the host (EINVAL): answer ERR at
   * once instead of leaving the daemon to time out on the request. */
  if (rc < 0 && fd >= 0)
    sbxi_reply_err(chan, id, e);
}

void sbxi_reply_ok2(int chan, uint32_t id, uint64_t v, uint64_t aux)
{
  uint64_t p[2] = {v, aux};
  sbx_proto_send(chan, SBX_MSG_OK, id, 0, p, sizeof p, NULL, 0);
}

void sbxi_close_fds(int *fds, size_t nfds)
{
  for (size_t i = 0; i < nfds; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

int sbxi_take_fd(int *fds, size_t nfds, unsigned kind)
{
  struct stat st;
  int fd = nfds == 1 ? fds[0] : -1;
  if (fd >= 0 && (fstat(fd, &st) < 0 || (kind && (st.st_mode & S_IFMT) != kind))) {
    close(fd);
    fd = -1;
  }
  if (nfds != 1)
    sbxi_close_fds(fds, nfds);
  return fd;
}

void sbxi_reply_err(int chan, uint32_t id, int e)
{
  int32_t v = e ? e : EIO;
  sbx_proto_send(chan, SBX_MSG_ERR, id, 0, &v, sizeof v, NULL, 0);
}

/* Splits path into its parent (into buf) and last component; "/" alone,
 * "." and ".." have no removable/creatable last component. */
static int split_path(const char *path, char *buf, size_t len, const char **name)
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

static int check_regular(int fd)
{
  struct stat st;
  if (fstat(fd, &st) < 0)
    return -errno;
  if (S_ISDIR(st.st_mode))
    return -EISDIR;
  if (!S_ISREG(st.st_mode))
    return -EINVAL;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
    return -errno;
  return 0;
}

/* An open that failed on something that is not a regular file (gVisor
 * answers EIO for /dev/tty without a controlling terminal, Linux ENXIO)
 * fails as any non-regular file does: the caller asked for the wrong kind
 * of thing, the service did not break.  Looked at only after a failure,
 * so the usual open costs nothing more. */
static int open_failed(int rootfd, const char *path, int e)
{
  int pfd = sbxi_open_in_root(rootfd, path, O_PATH | O_NOFOLLOW, 0);
  struct stat st;
  if (pfd < 0)
    return -e;
  int r = -e;
  if (fstat(pfd, &st) == 0 && !S_ISREG(st.st_mode))
    r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
  close(pfd);
  return r;
}

int sbxi_open_read(int rootfd, const char *path, uint64_t *size, uint32_t *mode)
{
  int fd = sbxi_open_in_root(rootfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0)
    return open_failed(rootfd, path, errno);
  int r = check_regular(fd);
  struct stat st;
  if (!r && fstat(fd, &st) < 0)
    r = -errno;
  if (r) {
    close(fd);
    return r;
  }
  *size = (uint64_t)st.st_size;
  if (mode)
    *mode = st.st_mode & 07777;
  return fd;
}

/* mkdir -p of dir inside the root: each prefix is resolved from the root
 * afresh, and each missing component is made with mkdirat in its parent. */
static int mkdir_parents(int rootfd, const char *dir)
{
  char buf[SBX_PROTO_MAX_PATH];
  size_t n = strlen(dir);
  if (n >= sizeof buf)
    return -ENAMETOOLONG;
  memcpy(buf, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0')
      continue;
    if (buf[i - 1] == '/')
      continue;
    char saved = buf[i];
    buf[i] = '\0';
    int fd = sbxi_open_in_root(rootfd, buf, O_PATH | O_DIRECTORY, 0);
    if (fd < 0 && errno == ENOENT) {
      char parent[SBX_PROTO_MAX_PATH];
      const char *name;
      int r = split_path(buf, parent, sizeof parent, &name);
      if (r)
        return r;
      int pfd = sbxi_open_in_root(rootfd, parent, O_PATH | O_DIRECTORY, 0);
      if (pfd < 0)
        return -errno;
      r = mkdirat(pfd, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
      close(pfd);
      if (r)
        return r;
      fd = sbxi_open_in_root(rootfd, buf, O_PATH | O_DIRECTORY, 0);
    }
    if (fd < 0)
      return -errno;
    close(fd);
    buf[i] = saved;
  }
  return 0;
}

int sbxi_open_write(int rootfd, const char *path, unsigned mode, uint32_t flags)
{
  char parent[SBX_PROTO_MAX_PATH];
  const char *name;
  int r = split_path(path, parent, sizeof parent, &name);
  if (r)
    return r;
  if ((flags & SBX_PROTO_W_MKDIR) && (r = mkdir_parents(rootfd, parent)) < 0)
    return r;
  mode &= 0777; /* never setuid/setgid/sticky from the API */
  int fd = sbxi_open_in_root(rootfd, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK,
                             mode ? mode : 0644);
  if (fd < 0)
    return open_failed(rootfd, path, errno);
  /* Truncate only once we know it is a regular file. */
  if ((r = check_regular(fd)) < 0 || (ftruncate(fd, 0) < 0 && (r = -errno))) {
    close(fd);
    return r;
  }
  return fd;
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
    sbx_wbuf_u8(&w, dtype(st.st_mode));
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
  int r = split_path(path, parent, sizeof parent, &name);
  if (r)
    return r;
  int pfd = sbxi_open_in_root(rootfd, parent, O_RDONLY | O_DIRECTORY, 0);
  if (pfd < 0)
    return -errno;
  struct stat pst;
  r = fstat(pfd, &pst) < 0 ? -errno : remove_at(pfd, name, pst.st_dev, 0);
  close(pfd);
  return r;
}

/* LIST / GLOB: the records go into the daemon's memfd (fd-in, always). */
static void reply_list(const struct sbxi *in, uint32_t id, const char *p, uint32_t max,
                       bool glob, int mfd)
{
  uint64_t count = 0;
  int r = glob ? sbxi_glob(in->rootfd, p, max, mfd, &count)
               : list_dir(in->rootfd, p, max, mfd, &count);
  close(mfd);
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, count, -1);
}

/* READ_TO: OK{size, mode} now, the bytes through xfer.c. */
static void read_to(const struct sbxi *in, uint32_t id, const char *path, int pipe_w)
{
  uint64_t size = 0;
  uint32_t mode = 0;
  int fd = sbxi_xfer_room() ? sbxi_open_read(in->rootfd, path, &size, &mode) : -EBUSY;
  if (fd < 0) {
    close(pipe_w);
    sbxi_reply_err(in->chan, id, -fd);
    return;
  }
  sbxi_reply_ok2(in->chan, id, size, mode);
  sbxi_xfer_read_to(fd, size, pipe_w); /* room was checked: cannot fail but ENOMEM */
}

/* WRITE_FROM: the open (and truncation) answers now; the bytes, mode and
 * mtime follow through xfer.c, which reports on the socket. */
static void write_from(const struct sbxi *in, uint32_t id, const char *path, uint32_t mode,
                       uint32_t flags, uint64_t mtime, int sock)
{
  int fd = sbxi_xfer_room() ? sbxi_open_write(in->rootfd, path, mode, flags) : -EBUSY;
  if (fd < 0) {
    close(sock);
    sbxi_reply_err(in->chan, id, -fd);
    return;
  }
  sbxi_reply_ok(in->chan, id, 0, -1);
  sbxi_xfer_write_from(sock, fd, flags, mode, mtime);
}

/* The fd each request type carries (fd-in), as a file type; -1: none. */
static int wanted_fd(uint32_t type)
{
  switch (type) {
  case SBX_MSG_LIST:
  case SBX_MSG_GLOB:
    return S_IFREG;
  case SBX_MSG_READ_TO:
    return S_IFIFO;
  case SBX_MSG_WRITE_FROM:
    return S_IFSOCK;
  default:
    return -1;
  }
}

void sbxi_fileop(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                 int *fds, size_t nfds)
{
  const char *path = sbx_rbuf_str(r, SBX_PROTO_MAX_PATH);
  uint32_t a = 0, b = 0;
  uint64_t c = 0;
  if (h->type == SBX_MSG_OPEN_WRITE || h->type == SBX_MSG_LIST || h->type == SBX_MSG_GLOB ||
      h->type == SBX_MSG_WRITE_FROM)
    a = sbx_rbuf_u32(r);
  if (h->type == SBX_MSG_OPEN_WRITE || h->type == SBX_MSG_WRITE_FROM)
    b = sbx_rbuf_u32(r);
  if (h->type == SBX_MSG_WRITE_FROM)
    c = sbx_rbuf_u64(r);
  int kind = wanted_fd(h->type);
  int fd_in = kind >= 0 ? sbxi_take_fd(fds, nfds, (unsigned)kind) : -1;
  if (kind < 0)
    sbxi_close_fds(fds, nfds);
  if (r->bad || r->off != r->len || !path || !sbx_proto_path_ok(path) ||
      (kind >= 0 && fd_in < 0) ||
      (h->type == SBX_MSG_WRITE_FROM &&
       (b & ~(SBX_PROTO_W_MKDIR | SBX_PROTO_W_MODE | SBX_PROTO_W_MTIME)))) {
    if (fd_in >= 0)
      close(fd_in);
    sbxi_reply_err(in->chan, h->id, EINVAL);
    return;
  }
  int fd;
  uint64_t size = 0;
  switch (h->type) {
  case SBX_MSG_OPEN_READ:
    fd = sbxi_open_read(in->rootfd, path, &size, NULL);
    break;
  case SBX_MSG_OPEN_WRITE:
    fd = sbxi_open_write(in->rootfd, path, a, b);
    break;
  case SBX_MSG_READ_TO:
    read_to(in, h->id, path, fd_in);
    return;
  case SBX_MSG_WRITE_FROM:
    write_from(in, h->id, path, a, b, c, fd_in);
    return;
  case SBX_MSG_REMOVE:
    fd = remove_path(in->rootfd, path);
    if (fd == 0) {
      sbxi_reply_ok(in->chan, h->id, 0, -1);
      return;
    }
    break;
  case SBX_MSG_LIST:
  case SBX_MSG_GLOB:
    reply_list(in, h->id, path, a, h->type == SBX_MSG_GLOB, fd_in);
    return;
  default:
    sbxi_reply_err(in->chan, h->id, ENOSYS);
    return;
  }
  if (fd < 0)
    sbxi_reply_err(in->chan, h->id, -fd);
  else
    sbxi_reply_ok(in->chan, h->id, size, fd);
}
