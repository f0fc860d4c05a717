/* fdpass.c — sending file descriptors over a unix socket (fdpass.h). */
#include "common/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

ssize_t sbx_sendmsg_fds(int sock, const struct iovec *iov, size_t niov, const int *fds,
                        size_t nfds, int flags)
{
  union {
    char buf[CMSG_SPACE(sizeof(int) * SBX_FDPASS_MAX)];
    struct cmsghdr align;
  } u;
  if (nfds > SBX_FDPASS_MAX) {
    errno = EINVAL;
    return -1;
  }
  struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = niov};
  if (nfds) {
    memset(&u, 0, sizeof u);
    m.msg_control = u.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do
    n = sendmsg(sock, &m, flags | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}
