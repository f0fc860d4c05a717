/* proto.c — encoding, decoding and fd passing for init/proto.h.
 * libc only: linked into the static sbx-init and into the daemon. */
#include "init/proto.h"

#include "common/fdpass.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void sbx_wbuf_init(struct sbx_wbuf *w, size_t max)
{
  *w = (struct sbx_wbuf){.b = SBX_BUF_INIT(max)};
}

void sbx_wbuf_free(struct sbx_wbuf *w)
{
  sbx_buf_free(&w->b);
  memset(w, 0, sizeof *w);
}

void sbx_wbuf_put(struct sbx_wbuf *w, const void *p, size_t n)
{
  if (!w->bad && sbx_buf_append(&w->b, p, n) < 0)
    w->bad = true;
}

void sbx_wbuf_u8(struct sbx_wbuf *w, uint8_t v) { sbx_wbuf_put(w, &v, 1); }
void sbx_wbuf_u16(struct sbx_wbuf *w, uint16_t v) { sbx_wbuf_put(w, &v, 2); }
void sbx_wbuf_u32(struct sbx_wbuf *w, uint32_t v) { sbx_wbuf_put(w, &v, 4); }
void sbx_wbuf_u64(struct sbx_wbuf *w, uint64_t v) { sbx_wbuf_put(w, &v, 8); }

void sbx_wbuf_str(struct sbx_wbuf *w, const char *s)
{
  size_t n = strlen(s);
  if (n > UINT32_MAX) {
    w->bad = true;
    return;
  }
  sbx_wbuf_u32(w, (uint32_t)n);
  sbx_wbuf_put(w, s, n + 1);
}

void sbx_wbuf_strv(struct sbx_wbuf *w, char *const *v)
{
  uint32_t n = 0;
  while (v && v[n])
    n++;
  sbx_wbuf_u32(w, n);
  for (uint32_t i = 0; i < n; i++)
    sbx_wbuf_str(w, v[i]);
}

void sbx_rbuf_init(struct sbx_rbuf *r, const void *p, size_t len)
{
  r->p = p;
  r->len = len;
  r->off = 0;
  r->bad = false;
}

static const char *take(struct sbx_rbuf *r, size_t n)
{
  if (r->bad || n > r->len - r->off) {
    r->bad = true;
    return NULL;
  }
  const char *p = r->p + r->off;
  r->off += n;
  return p;
}

uint32_t sbx_rbuf_u32(struct sbx_rbuf *r)
{
  uint32_t v = 0;
  const char *p = take(r, 4);
  if (p)
    memcpy(&v, p, 4);
  return v;
}

uint64_t sbx_rbuf_u64(struct sbx_rbuf *r)
{
  uint64_t v = 0;
  const char *p = take(r, 8);
  if (p)
    memcpy(&v, p, 8);
  return v;
}

const char *sbx_rbuf_str(struct sbx_rbuf *r, size_t maxlen)
{
  uint32_t n = sbx_rbuf_u32(r);
  if (r->bad || n > maxlen) {
    r->bad = true;
    return NULL;
  }
  const char *p = take(r, (size_t)n + 1);
  /* The terminator must be where the length says and nowhere earlier. */
  if (!p || p[n] != '\0' || memchr(p, '\0', n)) {
    r->bad = true;
    return NULL;
  }
  return p;
}

char **sbx_rbuf_strv(struct sbx_rbuf *r, size_t maxcount)
{
  uint32_t n = sbx_rbuf_u32(r);
  /* Each string needs at least 5 bytes, so n is bounded by what is left. */
  if (r->bad || n > maxcount || n > (r->len - r->off) / 5) {
    r->bad = true;
    return NULL;
  }
  char **v = calloc((size_t)n + 1, sizeof *v);
  if (!v) {
    r->bad = true;
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) {
    v[i] = (char *)sbx_rbuf_str(r, SIZE_MAX);
    if (!v[i]) {
      free(v);
      return NULL;
    }
  }
  return v;
}

int sbx_proto_send(int sock, uint32_t type, uint32_t id, uint32_t flags, const void *payload,
                   size_t len, const int *fds, size_t nfds)
{
  struct sbx_proto_hdr h = {.type = type, .id = id, .flags = flags, .len = (uint32_t)len};
  size_t inline_len = (flags & SBX_PROTO_F_MEMFD) ? 0 : len;
  if (inline_len > SBX_PROTO_MAX_INLINE || nfds > SBX_PROTO_MAX_FDS || len > UINT32_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  struct iovec iov[2] = {{&h, sizeof h}, {(void *)payload, inline_len}};
  ssize_t n = sbx_sendmsg_fds(sock, iov, inline_len ? 2 : 1, fds, nfds, 0);
  return n < 0 ? -1 : 0;
}

/* Moves the fds of every SCM_RIGHTS cmsg to fds[], closing what does not fit. */
static void collect_fds(struct msghdr *m, int *fds, size_t *nfds, bool *overflow)
{
  size_t cap = *nfds, got = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (got < cap)
        fds[got++] = fd;
      else {
        close(fd);
        *overflow = true;
      }
    }
  }
  *nfds = got;
}

static void close_fds(int *fds, size_t *nfds)
{
  for (size_t i = 0; i < *nfds; i++)
    close(fds[i]);
  *nfds = 0;
}

ssize_t sbx_proto_recv(int sock, void *buf, size_t cap, int *fds, size_t *nfds)
{
  union {
    char buf[CMSG_SPACE(sizeof(int) * SBX_PROTO_MAX_FDS)];
    struct cmsghdr align;
  } u;
  struct iovec iov = {buf, cap};
  struct msghdr m = {.msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = u.buf,
                     .msg_controllen = sizeof u.buf};
  ssize_t n;
  do
    n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  size_t dummy = 0;
  if (!nfds)
    nfds = &dummy;
  if (n < 0) {
    *nfds = 0;
    return -1;
  }
  bool overflow = false;
  collect_fds(&m, fds, nfds, &overflow);
  if (n == 0 && *nfds == 0)
    return 0;
  int e = 0;
  if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || overflow)
    e = EMSGSIZE;
  else if ((size_t)n < sizeof(struct sbx_proto_hdr))
    e = EBADMSG;
  else {
    struct sbx_proto_hdr h;
    memcpy(&h, buf, sizeof h);
    if (!(h.flags & SBX_PROTO_F_MEMFD) && h.len != (size_t)n - sizeof h)
      e = EBADMSG;
  }
  if (e) {
    close_fds(fds, nfds);
    errno = e;
    return -1;
  }
  return n;
}

bool sbx_proto_path_ok(const char *path)
{
  size_t n = strnlen(path, SBX_PROTO_MAX_PATH);
  if (n == 0 || n >= SBX_PROTO_MAX_PATH)
    return false;
  for (const char *p = path; *p;) {
    while (*p == '/')
      p++;
    const char *e = strchrnul(p, '/');
    if (e - p == 2 && p[0] == '.' && p[1] == '.')
      return false;
    p = e;
  }
  return true;
}
