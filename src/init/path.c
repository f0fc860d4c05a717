/* path.c — paths from the daemon, resolved inside the sandbox root: the
 * one openat2 (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, so ".." and
 * absolute symlinks the sandbox planted stay inside it), splitting a path
 * into its parent and last component, and the regular-file opens every
 * file operation shares.  Final components are never followed
 * (O_NOFOLLOW); special files are refused and opened O_NONBLOCK first so a
 * planted FIFO cannot hang sbx-init. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/init.h"

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
  if (fstat(rootfd, &r) < 0 || stat("/", &s) < 0 || r.st_dev != s.st_dev ||
      r.st_ino != s.st_ino) {
    errno = ENOSYS;
    return -1;
  }
  return openat(rootfd, path, flags | O_CLOEXEC, (flags & O_CREAT) ? mode : 0);
}

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
int sbxi_open_parent(int rootfd, const char *path, int flags, char *buf, size_t len,
                     const char **name)
{
  int r = sbxi_split_path(path, buf, len, name);
  if (r)
    return r;
  int fd = sbxi_open_in_root(rootfd, buf, flags | O_DIRECTORY, 0);
  return fd < 0 ? -errno : fd;
}

uint8_t sbxi_dtype(mode_t m)
{
  if (S_ISREG(m))
    return SBX_PROTO_DT_FILE;
  if (S_ISDIR(m))
    return SBX_PROTO_DT_DIR;
  if (S_ISLNK(m))
    return SBX_PROTO_DT_LINK;
  return SBX_PROTO_DT_OTHER;
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
      int pfd = sbxi_open_parent(rootfd, buf, O_PATH, parent, sizeof parent, &name);
      if (pfd < 0)
        return pfd;
      int r = mkdirat(pfd, name, 0755) < 0 && errno != EEXIST ? -errno : 0;
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
  int r = sbxi_split_path(path, parent, sizeof parent, &name);
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
