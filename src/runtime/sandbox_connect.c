/* sandbox_connect.c — sbx_sandbox_connect: a TCP connection into the
 * sandbox's network namespace (the ports proxy).  sbx-init makes the socket
 * and starts the connect (init/connect.c); the daemon finishes it here and
 * checks what it got, since sbx-init may be hostile: the fd must be a TCP
 * socket of the family asked for whose peer is that family's loopback
 * address and the requested port.
 *
 * fd-in sandboxes (gVisor: the TCP socket cannot leave it): the
 * daemon passes in one end of a stream socketpair; sbx-init connects,
 * writes the connect's u32 errno on it and then relays both ways.  The
 * caller gets the other end: bytes and half-closes behave as on the TCP
 * socket (it is an AF_UNIX stream socket, not TCP). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "init/proto.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"

#define DEFAULT_TIMEOUT_MS 10000

/* Is fd a TCP socket of this family, connected to loopback:port? */
static bool fd_is_loopback_tcp(int fd, unsigned port, int family)
{
  struct stat st;
  int type = 0, dom = 0, proto = 0;
  socklen_t l = sizeof type, ld = sizeof dom, lp = sizeof proto;
  if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM ||
      getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &ld) < 0 || dom != family ||
      getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &lp) < 0 || proto != IPPROTO_TCP)
    return false;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0 || ss.ss_family != family)
    return false;
  if (family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    return a->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(a->sin_port) == port;
  }
  const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
  return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) && ntohs(a->sin6_port) == port;
}

/* Waits until fd has `events` or deadline (ms) passes: 0, ETIMEDOUT, or
 * poll's errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
  for (;;) {
    uint64_t now = sbx_now_ms();
    if (now >= deadline)
      return ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)(deadline - now));
    if (r < 0 && errno != EINTR)
      return errno;
    if (r > 0)
      return 0;
  }
}

/* Waits for a non-blocking connect; 0, or the errno it failed with. */
static int finish_connect(int fd, unsigned timeout_ms)
{
  int w = wait_fd(fd, POLLOUT, sbx_now_ms() + timeout_ms);
  if (w)
    return w;
  int soerr = 0;
  socklen_t l = sizeof soerr;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) < 0)
    return errno;
  return soerr;
}

/* fd-in: the u32 errno of the connect, read from the relay socket within
 * timeout_ms; 0, an errno, or ETIMEDOUT. */
static int relay_status(int fd, unsigned timeout_ms)
{
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  uint32_t st;
  size_t got = 0;
  while (got < sizeof st) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w)
      return w;
    ssize_t n = recv(fd, (char *)&st + got, sizeof st - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n <= 0)
      return EPROTO; /* sbx-init dropped it without a word */
    got += (size_t)n;
  }
  return st < 4096 ? (int)st : EPROTO;
}

static int try_family_fdin(struct sbx_sandbox *sb, unsigned port, uint32_t family,
                           unsigned timeout_ms, struct sbx_error *err)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return -errno;
  _cleanup_close_ int mine = sv[0], far = sv[1];
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, 64);
  sbx_wbuf_u32(&w, port);
  sbx_wbuf_u32(&w, family);
  struct sbx_chan_reply rep;
  struct sbx_error cerr = {0};
  int r = w.bad ? -1
                : sbx_sandbox_call_fds(sb, SBX_MSG_CONNECT, w.buf, w.len, &far, 1, "connect",
                                       &rep, &cerr);
  sbx_wbuf_free(&w);
  if (r < 0) {
    if (cerr.code == SBX_E_INTERNAL && cerr.errnum != ECONNREFUSED) {
      *err = cerr;
      return -EIO;
    }
    return -(cerr.errnum ? cerr.errnum : EIO);
  }
  close(steal_fd(&far));
  if (rep.value > SBX_PROTO_CONN_IN_PROGRESS)
    return -EPROTO;
  int e = relay_status(mine, timeout_ms);
  if (e)
    return -e;
  if (sbx_set_nonblock(mine, 1) < 0)
    return -errno;
  return steal_fd(&mine);
}

/* One attempt on one family: the connected fd, or -errno (EPROTO for a
 * reply we refuse). */
static int try_family(struct sbx_sandbox *sb, unsigned port, uint32_t family,
                      unsigned timeout_ms, struct sbx_error *err)
{
  if (sb->fd_in)
    return try_family_fdin(sb, port, family, timeout_ms, err);
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, 64);
  sbx_wbuf_u32(&w, port);
  sbx_wbuf_u32(&w, family);
  struct sbx_chan_reply rep;
  struct sbx_error cerr = {0};
  int r =
      w.bad ? -1 : sbx_sandbox_call(sb, SBX_MSG_CONNECT, w.buf, w.len, "connect", &rep, &cerr);
  sbx_wbuf_free(&w);
  if (r < 0) {
    if (cerr.code == SBX_E_INTERNAL && cerr.errnum != ECONNREFUSED) {
      *err = cerr; /* the sandbox is gone, or sbx-init misbehaves */
      return -EIO;
    }
    return -(cerr.errnum ? cerr.errnum : EIO);
  }
  _cleanup_close_ int fd = rep.fd;
  int af = family == 4 ? AF_INET : AF_INET6;
  if (fd < 0 || rep.value > SBX_PROTO_CONN_IN_PROGRESS)
    return -EPROTO;
  int e = finish_connect(fd, timeout_ms);
  if (e)
    return -e;
  if (!fd_is_loopback_tcp(fd, port, af))
    return -EPROTO;
  return steal_fd(&fd);
}

int sbx_sandbox_connect(struct sbx_sandbox *sb, unsigned port, unsigned timeout_ms, int *fd_out,
                        struct sbx_error *err)
{
  if (port == 0 || port > 65535)
    return sbx_err_field(err, "port", "port must be 1..65535");
  if (!timeout_ms)
    timeout_ms = DEFAULT_TIMEOUT_MS;
  struct sbx_error lost = {0};
  int fd = try_family(sb, port, 4, timeout_ms, &lost);
  /* Only a refusal (nothing on 127.0.0.1:port) is worth trying ::1 for:
   * servers that bind "localhost" may have picked the v6 address. */
  if (fd == -ECONNREFUSED) {
    int fd6 = try_family(sb, port, 6, timeout_ms, &lost);
    /* A sandbox without IPv6 answers EADDRNOTAVAIL/EAFNOSUPPORT: the
     * refusal on v4 is the news. */
    fd = fd6 >= 0 || fd6 == -EPROTO || fd6 == -ETIMEDOUT ? fd6 : -ECONNREFUSED;
  }
  if (fd >= 0) {
    *fd_out = fd;
    return 0;
  }
  if (lost.code != SBX_E_NONE) {
    *err = lost;
    return -1;
  }
  if (fd == -EPROTO)
    return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "connect: sbx-init sent a bad socket");
  if (fd == -ETIMEDOUT) {
    sbx_err_set(err, SBX_E_BAD_GATEWAY, ETIMEDOUT,
                "port %u inside the sandbox did not accept "
                "the connection within %u ms",
                port, timeout_ms);
    return sbx_err_fr(err,
                      "Le port %u dans le bac à sable n'a pas accepté la connexion en "
                      "%u ms",
                      port, timeout_ms);
  }
  sbx_err_set(err, SBX_E_BAD_GATEWAY, -fd,
              "nothing listens on port %u inside the sandbox "
              "(%s)",
              port, strerror(-fd));
  return sbx_err_fr(err, "Rien n'écoute sur le port %u dans le bac à sable (%s)", port,
                    strerror(-fd));
}
