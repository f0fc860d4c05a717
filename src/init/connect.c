/* connect.c — CONNECT (ports): a TCP socket made inside the
 * sandbox's network namespace (sbx-init lives in it), connecting to the
 * sandbox's own loopback.  The daemon speaks HTTP over it, so it reaches a
 * server inside the sandbox without the sandbox ever reaching out.
 *
 * The destination is fixed here: 127.0.0.1 or ::1, the port from the
 * request.  sbx-init is single-threaded, so the connect is non-blocking and
 * the socket goes back at once (a full listen backlog would otherwise stall
 * every other request for the SYN retry time); the daemon finishes it.
 *
 * fd-in (gVisor: the socket cannot leave the sandbox): the daemon
 * sends a stream socket along; the TCP socket stays here and xfer.c
 * finishes the connect, reports it on the daemon's socket and relays. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

/* Returns the socket (connected or connecting) with *state set, or -errno. */
static int loopback_connect(uint32_t port, uint32_t family, uint64_t *state)
{
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  if (family == 4) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&ss, len) == 0) {
    *state = SBX_PROTO_CONN_DONE;
    return fd;
  }
  int e = errno;
  if (e == EINPROGRESS) {
    *state = SBX_PROTO_CONN_IN_PROGRESS;
    return fd;
  }
  close(fd);
  return -e;
}

void sbxi_connect(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                  int *fds, size_t nfds)
{
  uint32_t port = sbx_rbuf_u32(r);
  uint32_t family = sbx_rbuf_u32(r);
  int sock = nfds ? sbxi_take_fd(fds, nfds, S_IFSOCK) : -1;
  if (r->bad || r->off != r->len || port == 0 || port > 65535 || (family != 4 && family != 6) ||
      (nfds && sock < 0)) {
    if (sock >= 0)
      close(sock);
    sbxi_reply_err(in->chan, h->id, EINVAL);
    return;
  }
  uint64_t state = 0;
  int fd = !nfds || sbxi_xfer_room() ? loopback_connect(port, family, &state) : -EBUSY;
  if (fd < 0) {
    if (sock >= 0)
      close(sock);
    sbxi_reply_err(in->chan, h->id, -fd);
  } else if (sock < 0) {
    sbxi_reply_ok(in->chan, h->id, state, fd); /* closes our copy */
  } else {
    sbxi_reply_ok(in->chan, h->id, state, -1);
    sbxi_xfer_connect(sock, fd, state == SBX_PROTO_CONN_DONE);
  }
}
