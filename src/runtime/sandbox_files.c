/* sandbox_files.c — operations on one path in a live sandbox
 * (runtime/sandbox.h): reading and writing a file, stat, mkdir, move,
 * remove, symlinks.  sbx-init resolves the path inside the sandbox; for
 * content it hands back an fd the daemon checks (a hostile init could send
 * a pipe or a socket instead of a file) and moves the bytes itself.  Where
 * no fd can leave the sandbox (sb->fd_in) the bytes go through sbx-init
 * instead (runtime/sandbox_fdin.c).  Records (stat, readlink) come in a
 * sealed memfd the daemon passes in and are validated here like everything
 * else sbx-init sends. */
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
#include "runtime/sandbox_req.h"

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
    return sbx_req_norm(path, "path", p, sizeof p, err) < 0
               ? -1
               : sbx_fdin_read_to(sb, p, fd_out, size_out, err);
  }
  struct sbx_chan_reply rep;
  if (sbx_req_path(sb, SBX_MSG_OPEN_READ, path, 0, 0, 0, -1, &rep, err) < 0)
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
    return sbx_req_norm(path, "path", p, sizeof p, err) < 0
               ? -1
               : sbx_fdin_open_write(sb, p, mode ? mode : 0644, fd_out, err);
  }
  struct sbx_chan_reply rep;
  if (sbx_req_path(sb, SBX_MSG_OPEN_WRITE, path, 2, mode ? mode : 0644, SBX_PROTO_W_MKDIR, -1,
                   &rep, err) < 0)
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
    return sbx_req_norm(path, "path", p, sizeof p, err) < 0
               ? -1
               : sbx_fdin_write_from(sb, p, 0644, SBX_PROTO_W_MKDIR, 0, data ? data : "", len,
                                     -1, err);
  }
  _cleanup_close_ int fd = -1;
  if (sbx_sandbox_file_open_write(sb, path, 0644, &fd, err) < 0)
    return -1;
  if (sbx_write_all(fd, data, len) != (ssize_t)len) {
    int e = errno;
    return sbx_err_set(err,
                       e == ENOSPC || e == EFBIG || e == EDQUOT ? SBX_E_TOO_LARGE
                                                                : SBX_E_INTERNAL,
                       e, "write %s: %s", path, strerror(e));
  }
  return 0;
}

int sbx_sandbox_remove(struct sbx_sandbox *sb, const char *path, struct sbx_error *err)
{
  struct sbx_chan_reply rep;
  if (sbx_req_path(sb, SBX_MSG_REMOVE, path, 0, 0, 0, -1, &rep, err) < 0)
    return -1;
  if (rep.fd >= 0)
    close(rep.fd);
  return 0;
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
  snprintf(out->type, sizeof out->type, "%s", sbx_req_type_name(t));
  out->mode = mode & 07777;
  out->size = size;
  out->mtime = (int64_t)mtime;
  memcpy(out->link_target, buf + SBX_PROTO_STAT_REC, ll);
  out->link_target[ll] = '\0';
  return 0;
}

/* A request whose answer sbx-init writes into our memfd (STAT, STATFS,
 * READLINK): path normalised into p, up to len bytes of it read into buf;
 * how many (the record says how many count), or -1 with err. */
static ssize_t record_call(struct sbx_sandbox *sb, uint32_t type, const char *path,
                           char p[SBX_PROTO_MAX_PATH], char *buf, size_t len,
                           struct sbx_chan_reply *rep, struct sbx_error *err)
{
  if (sbx_req_norm_dir(path, "path", p, SBX_PROTO_MAX_PATH, err) < 0)
    return -1;
  _cleanup_close_ int fd = sbx_fdin_memfd(len, err);
  if (fd < 0 || sbx_req_record(sb, type, p, fd, rep, err) < 0)
    return -1;
  ssize_t n = sbx_req_read_memfd(fd, buf, len);
  if (n < 0)
    sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad record", p);
  return n;
}

int sbx_sandbox_stat(struct sbx_sandbox *sb, const char *path, struct sbx_stat *out,
                     struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH], buf[SBX_PROTO_STAT_REC + SBX_PROTO_MAX_PATH];
  struct sbx_chan_reply rep;
  ssize_t n = record_call(sb, SBX_MSG_STAT, path, p, buf, sizeof buf, &rep, err);
  if (n < 0)
    return -1;
  memset(out, 0, sizeof *out);
  if (parse_stat(buf, (size_t)n, out) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad stat", p);
  return 0;
}

int sbx_sandbox_statfs(struct sbx_sandbox *sb, const char *path, struct sbx_statfs *out,
                       struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH], buf[SBX_PROTO_STATFS_REC];
  struct sbx_chan_reply rep;
  ssize_t n = record_call(sb, SBX_MSG_STATFS, path, p, buf, sizeof buf, &rep, err);
  uint32_t flags;
  memset(out, 0, sizeof *out);
  if (n < 0)
    return -1;
  if (n != (ssize_t)sizeof buf)
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad statfs", p);
  memcpy(&out->dev, buf, 8);
  memcpy(&out->total_bytes, buf + 8, 8);
  memcpy(&out->free_bytes, buf + 16, 8);
  memcpy(&flags, buf + 24, 4);
  if (out->free_bytes > out->total_bytes || (flags & ~SBX_PROTO_FS_RDONLY))
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent a bad statfs", p);
  out->read_only = flags & SBX_PROTO_FS_RDONLY;
  return 0;
}

int sbx_sandbox_mkdir(struct sbx_sandbox *sb, const char *path, unsigned mode, unsigned flags,
                      struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (sbx_req_norm_dir(path, "path", p, sizeof p, err) < 0)
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
  return sbx_req_call(sb, SBX_MSG_MKDIR, &w, -1, p, &rep, err);
}

int sbx_sandbox_move(struct sbx_sandbox *sb, const char *from, const char *to, bool overwrite,
                     struct sbx_error *err)
{
  char a[SBX_PROTO_MAX_PATH], b[SBX_PROTO_MAX_PATH];
  if (sbx_req_norm_dir(from, "from", a, sizeof a, err) < 0 ||
      sbx_req_norm_dir(to, "to", b, sizeof b, err) < 0)
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
  return sbx_req_call(sb, SBX_MSG_MOVE, &w, -1, what, &rep, err);
}

int sbx_sandbox_readlink(struct sbx_sandbox *sb, const char *path, char *buf, size_t len,
                         struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH], t[SBX_PROTO_MAX_PATH];
  struct sbx_chan_reply rep;
  ssize_t n = record_call(sb, SBX_MSG_READLINK, path, p, t, sizeof t - 1, &rep, err);
  if (n < 0)
    return -1;
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
  if (sbx_req_norm_dir(path, "path", p, sizeof p, err) < 0)
    return -1;
  if (!target || !*target || strlen(target) >= SBX_PROTO_MAX_PATH)
    return sbx_err_field(err, "target", "a symlink target is 1 to 4095 bytes");
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  sbx_wbuf_str(&w, target);
  struct sbx_chan_reply rep;
  return sbx_req_call(sb, SBX_MSG_SYMLINK, &w, -1, p, &rep, err);
}
