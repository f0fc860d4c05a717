/* fuzz_init_msg.c — sbx-init's reader of what the daemon sends (and what
 * anything holding the channel could send): one datagram on the
 * SOCK_SEQPACKET channel, received by sbx_proto_recv (size, header and
 * fd checks; init/proto.c) and dispatched as sbx-init's serve_one() does
 * to the real operations (init/ops.c and its table: files.c, dirs.c, connect.c, exec.c,
 * xfer.c), which decode the payload (sbx_rbuf_*, sbx_proto_path_ok) and
 * act inside a scratch root, through openat2(RESOLVE_IN_ROOT) as in a
 * sandbox.  The harness runs in a network namespace of its own (as root),
 * so CONNECT reaches only an empty loopback.
 *
 * Input: byte 0 picks the fd the datagram carries (none, a sealed memfd,
 * a pipe's write end, a socket; the kinds the fd-in forms take), the rest
 * is the datagram (struct sbx_proto_hdr + payload).  Not reached: WATCH
 * (its watcher child lives until the pipe's reader writes) and EXEC with
 * its four fds (it runs the command). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"
#include "init/init.h"

static struct sbxi in;
static int peer = -1; /* the daemon's end */
static char root[] = "/tmp/sbx-fuzz-init.XXXXXX";
static bool own_netns;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f);

static void remove_root(void)
{
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  own_netns = unshare(CLONE_NEWNET) == 0;
  int sv[2];
  if (!mkdtemp(root) || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  peer = sv[0];
  fcntl(peer, F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  in = (struct sbxi){.chan = sv[1], .root = root, .self = getpid()};
  in.rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (in.rootfd < 0)
    abort();
  atexit(remove_root);
  return 0;
}

static int make_fd(unsigned kind, int *keep)
{
  int p[2];
  *keep = -1;
  switch (kind) {
  case 1: {
    int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && (ftruncate(fd, 65536) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) < 0))
      abort();
    return fd;
  }
  case 2:
    if (pipe2(p, O_CLOEXEC) < 0)
      abort();
    *keep = p[0];
    return p[1];
  case 3:
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
      abort();
    *keep = p[0];
    shutdown(p[0], SHUT_WR); /* WRITE_FROM reads EOF at once */
    return p[1];
  default:
    return -1;
  }
}

static void send_raw(const uint8_t *dg, size_t len, int fd)
{
  struct iovec iov = {(void *)dg, len};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&u, 0, sizeof u);
    m.msg_control = u.buf;
    m.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  if (sendmsg(peer, &m, MSG_NOSIGNAL) < 0 && errno != EMSGSIZE)
    abort();
  if (fd >= 0)
    close(fd);
}

/* sbx-init's serve_one() minus shutdown-on-EOF and the memfd EXEC form. */
static void serve_one(void)
{
  static char buf[sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
  int fds[SBX_PROTO_MAX_FDS];
  size_t nfds = SBX_PROTO_MAX_FDS;
  ssize_t n = sbx_proto_recv(in.chan, buf, sizeof buf, fds, &nfds);
  if (n <= 0)
    return;
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  char *payload = buf + sizeof h;
  if (h.type == SBX_MSG_WATCH || (h.type == SBX_MSG_EXEC && nfds == 4)) {
    sbxi_close_fds(fds, nfds);
    return;
  }
  if (h.type == SBX_MSG_EXEC) {
    sbxi_exec(&in, (h.flags & SBX_PROTO_F_MEMFD) ? NULL : payload, h.len, fds, nfds);
    return;
  }
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, payload, h.len);
  if (h.type == SBX_MSG_CONNECT && !own_netns) /* no loopback of our own to dial */
    sbxi_close_fds(fds, nfds);
  else
    sbxi_dispatch(&in, &h, &r, fds, nfds);
}

/* The daemon reads every reply (closing the fds they carry), and the
 * transfers the request started run to their end. */
static void settle(void)
{
  for (int round = 0; round < 200; round++) {
    char buf[512];
    int fds[SBX_PROTO_MAX_FDS];
    size_t nfds = SBX_PROTO_MAX_FDS;
    while (sbx_proto_recv(peer, buf, sizeof buf, fds, &nfds) > 0 || nfds) {
      sbxi_close_fds(fds, nfds);
      nfds = SBX_PROTO_MAX_FDS;
    }
    struct pollfd p[256];
    size_t np = sbxi_xfer_poll(p, 256);
    if (np == 0)
      return;
    if (poll(p, np, 10) > 0)
      sbxi_xfer_service(p);
  }
  sbxi_xfer_drop_all();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
  (void)st, (void)flag;
  if (f->level > 0)
    remove(path);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1 || size - 1 > sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE)
    return 0;
  int keep;
  int fd = make_fd(data[0] & 3, &keep);
  send_raw(data + 1, size - 1, fd);
  serve_one();
  if (keep >= 0)
    close(keep);
  settle();
  while (waitpid(-1, NULL, WNOHANG) > 0)
    ;
  nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
