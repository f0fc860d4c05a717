/* chan.c — request/response on the main sbx-init channel: framing, ids,
 * the reply deadline.  It knows nothing of fd-in: the sandbox client's
 * requests reach it through sandbox_fdin.c's sbx_sandbox_call*, which
 * commit pending fd-in writes first. */
#include "runtime/chan.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static uint32_t next_id(void)
{
  static uint32_t id;
  return __atomic_add_fetch(&id, 1, __ATOMIC_RELAXED);
}

static int lost(struct sbx_error *err, int e, const char *why)
{
  return sbx_err_set(err, SBX_E_INTERNAL, e, "sandbox lost: %s", why);
}

int sbx_chan_errno(int e, const char *what, struct sbx_error *err)
{
  enum sbx_errcode code;
  switch (e) {
  case ENOENT:
  case ENOTDIR:
    code = SBX_E_NOT_FOUND;
    break;
  case ENOSPC:
  case EFBIG:
  case EDQUOT:
    code = SBX_E_TOO_LARGE;
    break;
  case EPROTO:
  case ENOMEM:
  case EMFILE:
  case ENFILE:
  case EIO:
    code = SBX_E_INTERNAL;
    break;
  default:
    code = SBX_E_INVALID;
  }
  if (e <= 0 || e > 4095)
    e = EIO;
  return sbx_err_set(err, code, e, "%s: %s", what, strerror(e));
}

int sbx_chan_send(struct sbx_sandbox *sb, uint32_t type, uint32_t flags, const void *payload,
                  size_t len, const int *fds, size_t nfds, struct sbx_error *err)
{
  pthread_mutex_lock(&sb->client->chan_lock);
  int r = sbx_proto_send(sb->init_fd, type, next_id(), flags, payload, len, fds, nfds);
  int e = errno;
  pthread_mutex_unlock(&sb->client->chan_lock);
  if (r < 0)
    return e == EMSGSIZE ? sbx_err_set(err, SBX_E_TOO_LARGE, e, "request too large")
                         : lost(err, e, "sbx-init is gone");
  return 0;
}

/* Parses one reply datagram; -1 if it is not ours (or junk), 0 if it is. */
static int parse_reply(const char *buf, ssize_t n, uint32_t id, uint32_t type, int *fds,
                       size_t nfds, struct sbx_chan_reply *rep, int *remote_errno)
{
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  if (h.id != id || (h.flags & SBX_PROTO_F_MEMFD))
    return -1;
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, buf + sizeof h, (size_t)n - sizeof h);
  *remote_errno = 0;
  if (type == SBX_MSG_PING && h.type == SBX_MSG_PONG && nfds == 0)
    return 0;
  if (h.type == SBX_MSG_ERR && nfds == 0) {
    *remote_errno = (int)sbx_rbuf_u32(&r);
    if (!r.bad)
      return 0;
  }
  if (h.type == SBX_MSG_OK && nfds <= 1) {
    rep->value = sbx_rbuf_u64(&r);
    rep->aux = r.len - r.off == 8 ? sbx_rbuf_u64(&r) : 0;
    if (!r.bad && r.off == r.len) {
      rep->fd = nfds ? fds[0] : -1;
      return 0;
    }
  }
  *remote_errno = EPROTO;
  return 0;
}

static int wait_reply(struct sbx_sandbox *sb, uint32_t id, uint32_t type,
                      struct sbx_chan_reply *rep, int *remote_errno, struct sbx_error *err)
{
  uint64_t deadline = sbx_now_ms() + SBX_CHAN_REPLY_TIMEOUT_MS;
  char buf[sizeof(struct sbx_proto_hdr) + 256];
  for (;;) {
    uint64_t now = sbx_now_ms();
    if (now >= deadline)
      return lost(err, ETIMEDOUT, "sbx-init did not answer");
    struct pollfd p = {.fd = sb->init_fd, .events = POLLIN};
    int pr = poll(&p, 1, (int)(deadline - now));
    if (pr < 0 && errno != EINTR)
      return lost(err, errno, "poll");
    if (pr <= 0)
      continue;
    int fds[SBX_PROTO_MAX_FDS];
    size_t nfds = SBX_PROTO_MAX_FDS;
    ssize_t n = sbx_proto_recv(sb->init_fd, buf, sizeof buf, fds, &nfds);
    if (n < 0 && (errno == EMSGSIZE || errno == EBADMSG))
      continue; /* junk from a hostile init: dropped, fds closed */
    if (n <= 0)
      return lost(err, n < 0 ? errno : 0, "sbx-init is gone");
    *remote_errno = 0;
    if (parse_reply(buf, n, id, type, fds, nfds, rep, remote_errno) == 0) {
      if (*remote_errno == 0)
        return 0;
    }
    /* Not ours (a stale reply to an earlier request) or malformed. */
    for (size_t i = 0; i < nfds; i++)
      close(fds[i]);
    if (*remote_errno)
      return 1;
  }
}

int sbx_chan_call_fds(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                      const int *fds, size_t nfds, const char *what, struct sbx_chan_reply *rep,
                      struct sbx_error *err)
{
  rep->fd = -1;
  rep->value = rep->aux = 0;
  uint32_t id = next_id();
  int remote_errno = 0;
  pthread_mutex_lock(&sb->client->chan_lock);
  int r = sbx_proto_send(sb->init_fd, type, id, 0, payload, len, fds, nfds);
  if (r < 0)
    r = errno == EMSGSIZE ? sbx_err_set(err, SBX_E_TOO_LARGE, EMSGSIZE, "request too large")
                          : lost(err, errno, "sbx-init is gone");
  else
    r = wait_reply(sb, id, type, rep, &remote_errno, err);
  pthread_mutex_unlock(&sb->client->chan_lock);
  if (r > 0)
    return sbx_chan_errno(remote_errno, what, err);
  /* fd-in: nothing comes out, nor in reply to a request that carried fds. */
  if (r == 0 && (sb->fd_in || nfds) && rep->fd >= 0) {
    close(rep->fd);
    rep->fd = -1;
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent an fd", what);
  }
  return r;
}
