/* sandbox_watch.c — watching a directory of a live sandbox
 * (runtime/sandbox.h): the daemon makes the event pipe and passes its
 * write end in (so it works alike where no fd can leave the sandbox), and
 * reads sbx-init's event records from the read end as hostile input:
 * kinds, lengths and relative paths checked before anything is used. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "init/proto.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"
#include "runtime/sandbox_req.h"

int sbx_sandbox_watch(struct sbx_sandbox *sb, const char *dir, bool recursive,
                      unsigned max_watches, int *fd_out, struct sbx_error *err)
{
  char d[SBX_PROTO_MAX_PATH];
  if (sbx_req_norm_dir(dir, "path", d, sizeof d, err) < 0)
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
  if (sbx_req_call(sb, SBX_MSG_WATCH, &w, wr, d, &rep, err) < 0 || sbx_set_nonblock(fd, 1) < 0)
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
      l1 >= SBX_PROTO_MAX_PATH || l2 >= SBX_PROTO_MAX_PATH || (l2 && kind != SBX_PROTO_WEV_MOVE))
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
