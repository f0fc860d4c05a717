/* sandbox_req.c — the request helpers of runtime/sandbox_req.h, and
 * whether a sandbox's sbx-init is still there (runtime/sandbox.h). */
#include "runtime/sandbox_req.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/sandbox.h"

int sbx_req_norm(const char *path, const char *field, char *out, size_t len,
                 struct sbx_error *err)
{
  if (!path || !*path)
    return sbx_err_field(err, field, "empty path");
  int n = path[0] == '/' ? snprintf(out, len, "%s", path) : snprintf(out, len, "/work/%s", path);
  if (n < 0 || (size_t)n >= len || !sbx_proto_path_ok(out))
    return sbx_err_field(err, field, "invalid path (too long or contains '..')");
  return 0;
}

int sbx_req_norm_dir(const char *path, const char *field, char *out, size_t len,
                     struct sbx_error *err)
{
  if (sbx_req_norm(path, field, out, len, err) < 0)
    return -1;
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/')
    out[--n] = '\0';
  return 0;
}

int sbx_req_path(struct sbx_sandbox *sb, uint32_t type, const char *path, int nargs, uint32_t a,
                 uint32_t b, int fd, struct sbx_chan_reply *rep, struct sbx_error *err)
{
  char p[SBX_PROTO_MAX_PATH];
  if (sbx_req_norm(path, "path", p, sizeof p, err) < 0)
    return -1;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  if (nargs > 0)
    sbx_wbuf_u32(&w, a);
  if (nargs > 1)
    sbx_wbuf_u32(&w, b);
  int r = w.bad ? sbx_err_field(err, "path", "path too long")
                : sbx_sandbox_call_fds(sb, type, w.buf, w.len, &fd, fd >= 0, p, rep, err);
  sbx_wbuf_free(&w);
  return r;
}

static int remap(struct sbx_error *err)
{
  if (err && err->errnum == EEXIST)
    err->code = SBX_E_CONFLICT;
  if (err && (err->errnum == EXDEV || err->errnum == EBUSY))
    err->code = SBX_E_INVALID;
  return -1;
}

int sbx_req_call(struct sbx_sandbox *sb, uint32_t type, struct sbx_wbuf *w, int fd,
                 const char *what, struct sbx_chan_reply *rep, struct sbx_error *err)
{
  int r = w->bad ? sbx_err_field(err, "path", "path too long")
                 : sbx_sandbox_call_fds(sb, type, w->buf, w->len, &fd, fd >= 0, what, rep, err);
  sbx_wbuf_free(w);
  if (r == 0 && rep->fd >= 0) {
    close(rep->fd);
    rep->fd = -1;
  }
  return r < 0 ? remap(err) : 0;
}

int sbx_req_record(struct sbx_sandbox *sb, uint32_t type, const char *p, int memfd,
                   struct sbx_chan_reply *rep, struct sbx_error *err)
{
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, p);
  return sbx_req_call(sb, type, &w, memfd, p, rep, err);
}

ssize_t sbx_req_read_memfd(int fd, char *buf, size_t max)
{
  ssize_t n = pread(fd, buf, max, 0);
  return n == (ssize_t)max ? n : -1;
}

const char *sbx_req_type_name(uint8_t t)
{
  switch (t) {
  case SBX_PROTO_DT_FILE:
    return "file";
  case SBX_PROTO_DT_DIR:
    return "dir";
  case SBX_PROTO_DT_LINK:
    return "symlink";
  default:
    return "other";
  }
}

bool sbx_sandbox_alive(struct sbx_sandbox *sb)
{
  if (!sb || sb->init_fd < 0)
    return false;
  /* No round trip: the reaper asks this of every session every second,
   * and a PING would queue behind a slow file operation.  Only sbx-init
   * holds the other end (its shepherds drop it), so the
   * channel hangs up exactly when sbx-init is gone. */
  struct pollfd p = {.fd = sb->init_fd, .events = 0};
  if (poll(&p, 1, 0) < 0)
    return true; /* cannot tell: assume alive; a real call will find out */
  return !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

void sbx_sandbox_herd(struct sbx_sandbox *sb)
{
  /* one-way: sbx-init answers nothing, so no reply can be mistaken for
   * another request's; a failure only means the first exec forks */
  if (sb && sb->init_fd >= 0)
    sbx_proto_send(sb->init_fd, SBX_MSG_HERD, 0, 0, NULL, 0, NULL, 0);
}
