/* sandbox_files.c — file operations and liveness on a live sandbox
 * (runtime/sandbox.h).  sbx-init resolves the path inside the sandbox and
 * hands back an fd; the daemon checks what it got (a hostile init could send
 * a pipe or a socket instead of a file) and moves the bytes itself.  Where
 * no fd can leave the sandbox (sb->fd_in, issue 6) the bytes go through
 * sbx-init instead (runtime/sandbox_fdin.c); listings always come in a
 * memfd the daemon passes in. */
#include <errno.h>
#include <poll.h>
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
static int norm_path(const char *path, char *out, size_t len, struct sbx_error *err)
{
  if (!path || !*path)
    return sbx_err_field(err, "path", "empty path");
  int n = path[0] == '/' ? snprintf(out, len, "%s", path) : snprintf(out, len, "/work/%s", path);
  if (n < 0 || (size_t)n >= len || !sbx_proto_path_ok(out))
    return sbx_err_field(err, "path", "invalid path (too long or contains '..')");
  return 0;
}

/* The path request: str path [, u32 a [, u32 b]] [+ fd]. */
static int path_call_fd(struct sbx_sandbox *sb, uint32_t type, const char *path, int nargs,
                        uint32_t a, uint32_t b, int fd, struct sbx_chan_reply *rep,
                        struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (norm_path(path, p, sizeof p, err) < 0)
    return -1;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  if (nargs > 0)
    sbx_wbuf_u32(&w, a);
  if (nargs > 1)
    sbx_wbuf_u32(&w, b);
  int r = w.bad ? sbx_err_field(err, "path", "path too long")
                : sbx_chan_call_fds(sb, type, w.buf, w.len, &fd, fd >= 0, p, rep, err);
  sbx_wbuf_free(&w);
  return r;
}

static int path_call(struct sbx_sandbox *sb, uint32_t type, const char *path, int nargs,
                     uint32_t a, uint32_t b, struct sbx_chan_reply *rep, struct sbx_error *err)
{
  return path_call_fd(sb, type, path, nargs, a, b, -1, rep, err);
}

/* The fd must be a regular file opened with the access we asked for. */
static int check_file_fd(int fd, int acc, uint64_t *size, const char *path,
                         struct sbx_error *err)
{
  struct stat st;
  int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
  if (fd < 0 || fstat(fd, &st) < 0 || fl < 0 || !S_ISREG(st.st_mode) ||
      ((fl & O_ACCMODE) != acc && (fl & O_ACCMODE) != O_RDWR))
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad fd", path);
  if (size)
    *size = (uint64_t)st.st_size;
  return 0;
}

int sbx_sandbox_file_open_read(struct sbx_sandbox *sb, const char *path, int *fd_out,
                               uint64_t *size_out, struct sbx_error *err)
{
  if (sb->fd_in) {
    char p[SBX_PROTO_MAX_PATH];
    return norm_path(path, p, sizeof p, err) < 0 ? -1
                                                 : sbx_fdin_read_to(sb, p, fd_out, size_out, err);
  }
  struct sbx_chan_reply rep;
  if (path_call(sb, SBX_MSG_OPEN_READ, path, 0, 0, 0, &rep, err) < 0)
    return -1;
  _cleanup_close_ int fd = rep.fd;
  uint64_t size = 0;
  if (check_file_fd(fd, O_RDONLY, &size, path, err) < 0)
    return -1;
  *fd_out = steal_fd(&fd);
  if (size_out)
    *size_out = size;
  return 0;
}

int sbx_sandbox_file_open_write(struct sbx_sandbox *sb, const char *path, unsigned mode,
                                int *fd_out, struct sbx_error *err)
{
  if (sb->fd_in) {
    char p[SBX_PROTO_MAX_PATH];
    return norm_path(path, p, sizeof p, err) < 0
               ? -1
               : sbx_fdin_open_write(sb, p, mode ? mode : 0644, fd_out, err);
  }
  struct sbx_chan_reply rep;
  if (path_call(sb, SBX_MSG_OPEN_WRITE, path, 2, mode ? mode : 0644, SBX_PROTO_W_MKDIR, &rep,
                err) < 0)
    return -1;
  _cleanup_close_ int fd = rep.fd;
  if (check_file_fd(fd, O_WRONLY, NULL, path, err) < 0)
    return -1;
  *fd_out = steal_fd(&fd);
  return 0;
}

int sbx_sandbox_file_flush(struct sbx_sandbox *sb, struct sbx_error *err)
{
  return sbx_fdin_flush(sb, err);
}

int sbx_sandbox_file_write(struct sbx_sandbox *sb, const char *path, const void *data,
                           size_t len, struct sbx_error *err)
{
  if (sb->fd_in) { /* one WRITE_FROM: the errno at the end is the write's */
    char p[SBX_PROTO_MAX_PATH];
    return norm_path(path, p, sizeof p, err) < 0
               ? -1
               : sbx_fdin_write_from(sb, p, 0644, SBX_PROTO_W_MKDIR, 0, data ? data : "", len,
                                     -1, err);
  }
  _cleanup_close_ int fd = -1;
  if (sbx_sandbox_file_open_write(sb, path, 0644, &fd, err) < 0)
    return -1;
  if (sbx_write_all(fd, data, len) != (ssize_t)len) {
    int e = errno;
    return sbx_err_set(err, e == ENOSPC || e == EFBIG || e == EDQUOT ? SBX_E_TOO_LARGE
                                                                   : SBX_E_INTERNAL,
                       e, "write %s: %s", path, strerror(e));
  }
  return 0;
}

int sbx_sandbox_remove(struct sbx_sandbox *sb, const char *path, struct sbx_error *err)
{
  struct sbx_chan_reply rep;
  if (path_call(sb, SBX_MSG_REMOVE, path, 0, 0, 0, &rep, err) < 0)
    return -1;
  if (rep.fd >= 0)
    close(rep.fd);
  return 0;
}

/* Reads exactly n bytes from f; false on a short read. */
static bool take(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static const char *type_name(uint8_t t)
{
  switch (t) {
  case SBX_PROTO_DT_FILE: return "file";
  case SBX_PROTO_DT_DIR: return "dir";
  case SBX_PROTO_DT_LINK: return "symlink";
  default: return "other";
  }
}

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
  snprintf(d->type, sizeof d->type, "%s", type_name(t));
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

int sbx_sandbox_list(struct sbx_sandbox *sb, const char *dir, struct sbx_dirent **out,
                     size_t *count, size_t max, struct sbx_error *err)
{
  char d[SBX_PROTO_MAX_PATH];
  struct sbx_chan_reply rep;
  if (max > UINT32_MAX - 1)
    max = UINT32_MAX - 1;
  if (norm_path(dir, d, sizeof d, err) < 0)
    return -1;
  _cleanup_close_ int fd = sbx_fdin_memfd(records_cap(max, SBX_PROTO_LIST_REC + 256), err);
  if (fd < 0 || path_call_fd(sb, SBX_MSG_LIST, d, 1, (uint32_t)max, 0, fd, &rep, err) < 0)
    return -1;
  if (rep.value > max)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "%s has more than %zu entries", d, max);
  _cleanup_fclose_ FILE *f = open_records(&fd, err);
  if (!f)
    return -1;
  _cleanup_free_ struct sbx_dirent *v = calloc(rep.value ? rep.value : 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "list");
  for (size_t i = 0; i < rep.value; i++)
    if (read_dirent(f, d, &v[i]) < 0)
      return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad listing", d);
  qsort(v, rep.value, sizeof *v, cmp_dirent);
  *count = rep.value;
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
  struct sbx_chan_reply rep;
  if (max > UINT32_MAX - 1)
    max = UINT32_MAX - 1;
  _cleanup_close_ int fd = sbx_fdin_memfd(records_cap(max, 2 + SBX_PROTO_MAX_PATH), err);
  if (fd < 0 || path_call_fd(sb, SBX_MSG_GLOB, pattern, 1, (uint32_t)max, 0, fd, &rep, err) < 0)
    return -1;
  if (rep.value > max)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "%s matches more than %zu files", pattern, max);
  _cleanup_fclose_ FILE *f = open_records(&fd, err);
  if (!f)
    return -1;
  char **v = calloc(rep.value + 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "glob");
  if (read_paths(f, v, rep.value) < 0) {
    free_strv(v, rep.value);
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "sbx-init sent a bad glob result");
  }
  *out = v;
  *count = rep.value;
  return 0;
}

bool sbx_sandbox_alive(struct sbx_sandbox *sb)
{
  if (!sb || sb->init_fd < 0)
    return false;
  /* No round trip: the reaper asks this of every session every second,
   * and a PING would queue behind a slow file operation.  Only sbx-init
   * holds the other end (its shepherds and spares drop it), so the
   * channel hangs up exactly when sbx-init is gone. */
  struct pollfd p = {.fd = sb->init_fd, .events = 0};
  if (poll(&p, 1, 0) < 0)
    return true; /* cannot tell: assume alive; a real call will find out */
  return !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
}
