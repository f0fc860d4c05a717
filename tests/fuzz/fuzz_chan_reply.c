/* fuzz_chan_reply.c — the daemon's reader of what sbx-init answers.  A
 * compromised sandbox owns sbx-init, so every reply is hostile: here a
 * fake sbx-init thread answers each request of the real sandbox client
 * (runtime/chan.c: ids, types, sizes, fds; runtime/sandbox_files.c and
 * sandbox_list.c: the STAT, READLINK, LIST, GLOB records it writes into
 * the client's memfd, the fd it hands back) with bytes from the input,
 * and the tail of the input is parsed as a watch event stream
 * (sbx_watch_reader).  Two execs follow the file operations: the fake
 * then plays the exec's shepherd on its control socket (runtime/sandbox.c
 * on_ctl_msg: STARTED, EXITED, EXEC_FAILED, ERR, PTY).
 *
 * Input: byte 0 bit 0 = the sandbox is fd-in (gVisor); then per reply
 * [u8 ctl][u16 len][len bytes payload][u16 mlen][mlen bytes into the
 * request's memfd], ctl: bits 0-1 type (OK, ERR, PONG, byte 2 of the
 * payload), bit 2 wrong id, bit 3 attach an fd, bit 4 F_MEMFD flag, bit 5
 * length field off by one (with bits 2, 4 or 5, or a payload over 256
 * bytes, the client drops the reply and waits on: the next reply follows).  When the replies run out the
 * fake closes the channel ("sandbox lost"). */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "init/proto.h"
#include "runtime/driver.h"
#include "runtime/sandbox.h"

struct script {
  const uint8_t *p;
  size_t len, off;
  int sock;
};

static bool take(struct script *s, void *out, size_t n)
{
  if (s->len - s->off < n)
    return false;
  memcpy(out, s->p + s->off, n);
  s->off += n;
  return true;
}

/* Sends header {type, id, flags, hlen} + len bytes of payload (+ fd,
 * which is closed here) on sock. */
static void send_dgram(int sock, uint32_t type, uint32_t id, uint32_t flags, uint32_t hlen,
                       const uint8_t *payload, size_t len, int fd)
{
  struct sbx_proto_hdr h = {.type = type, .id = id, .flags = flags, .len = hlen};
  char buf[sizeof h + 1024];
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, payload, len);
  struct iovec iov = {buf, sizeof h + len};
  union {
    char b[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&u, 0, sizeof u);
    m.msg_control = u.b;
    m.msg_controllen = sizeof u.b;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  sendmsg(sock, &m, MSG_NOSIGNAL);
  if (fd >= 0)
    close(fd);
}

/* One reply to the request hdr (whose fds are rfds); false: script over. */
static bool reply(struct script *s, const struct sbx_proto_hdr *req, int *rfds, size_t nrfds)
{
  uint8_t ctl;
  uint16_t len, mlen;
  if (!take(s, &ctl, 1) || !take(s, &len, 2) || len > 1024 || s->len - s->off < len)
    return false;
  const uint8_t *payload = s->p + s->off;
  s->off += len;
  if (take(s, &mlen, 2) && mlen <= s->len - s->off) {
    for (size_t i = 0; i < nrfds; i++) /* what sbx-init writes into the client's memfd */
      if (pwrite(rfds[i], s->p + s->off, mlen, 0) < 0)
        break;
    s->off += mlen;
  }
  static const uint32_t types[] = {SBX_MSG_OK, SBX_MSG_ERR, SBX_MSG_PONG, 0};
  uint32_t type = types[ctl & 3] ? types[ctl & 3] : (len > 2 ? payload[2] : SBX_MSG_OK);
  struct sbx_proto_hdr h = {.type = type,
                            .id = req->id + ((ctl & 4) ? 1 : 0),
                            .flags = (ctl & 16) ? SBX_PROTO_F_MEMFD : 0,
                            .len = len + ((ctl & 32) ? 1 : 0)};
  int fd = (ctl & 8) ? memfd_create("fuzz-reply", MFD_CLOEXEC) : -1;
  send_dgram(s->sock, h.type, h.id, h.flags, h.len, payload, len, fd);
  /* A stale id, a MEMFD flag, a length that does not match or a datagram
   * over the client's reply buffer (header + 256): the client drops it and
   * keeps waiting (until SBX_CHAN_REPLY_TIMEOUT_MS), so another follows. */
  bool dropped = (ctl & (4 | 16 | 32)) || len > 256;
  return dropped ? reply(s, req, rfds, nrfds) : true;
}

/* EXEC: the shepherd's side of the exec's control socket (fds[3]; fds[1],
 * fds[2] its stdout and stderr): up to 16 ctl datagrams from the script,
 * [u8 ctl][u8 len][payload], ctl bits 0-2: STARTED, EXEC_FAILED, EXITED,
 * ERR, PTY (with a memfd, which is no pty master), PONG, KILL, byte 0 of
 * the payload; bit 3 length field off by one.  Then every fd closes. */
static void shepherd(struct script *s, int *fds, size_t nfds)
{
  static const uint32_t types[] = {SBX_MSG_STARTED, SBX_MSG_EXEC_FAILED,
                                   SBX_MSG_EXITED,  SBX_MSG_ERR,
                                   SBX_MSG_PTY,     SBX_MSG_PONG,
                                   SBX_MSG_KILL,    0};
  uint8_t count = 0;
  take(s, &count, 1);
  for (unsigned i = 0; i < (count & 15u); i++) {
    uint8_t ctl, len;
    if (!take(s, &ctl, 1) || !take(s, &len, 1) || s->len - s->off < len)
      break;
    const uint8_t *payload = s->p + s->off;
    s->off += len;
    uint32_t type = types[ctl & 7] ? types[ctl & 7] : (len ? payload[0] : 0);
    int fd = type == SBX_MSG_PTY ? memfd_create("fuzz-pty", MFD_CLOEXEC) : -1;
    send_dgram(fds[3], type, 0, 0, (uint32_t)len + ((ctl & 8) ? 1 : 0), payload, len, fd);
  }
  if (write(fds[1], "out", 3) < 0 || write(fds[2], "err", 3) < 0)
    abort();
  (void)nfds;
}

static void *fake_init(void *arg)
{
  struct script *s = arg;
  for (;;) {
    char buf[sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
    int fds[SBX_PROTO_MAX_FDS];
    size_t nfds = SBX_PROTO_MAX_FDS;
    ssize_t n = sbx_proto_recv(s->sock, buf, sizeof buf, fds, &nfds);
    if (n <= 0)
      break;
    struct sbx_proto_hdr h;
    memcpy(&h, buf, sizeof h);
    bool more = true;
    if (h.type == SBX_MSG_EXEC && nfds >= 4)
      shepherd(s, fds, nfds); /* EXEC has no reply on the main channel */
    else
      more = reply(s, &h, fds, nfds);
    for (size_t i = 0; i < nfds; i++)
      close(fds[i]);
    if (!more)
      break;
  }
  close(s->sock); /* the client sees "sandbox lost" from here on */
  return NULL;
}

static void on_started(void *ctx, pid_t pid, int ctl_fd, int pty_fd)
{
  (void)ctx, (void)pid;
  if (ctl_fd >= 0)
    close(ctl_fd);
  if (pty_fd >= 0)
    close(pty_fd);
}

/* A plain exec and a background-style one (on_started): what the
 * shepherd's ctl messages decide (status, exit code, pid, pty fd). */
static void exec_ops(struct sbx_sandbox *sb)
{
  static char *const argv[] = {"true", NULL}, *const env[] = {NULL};
  const struct sbx_exec_live live = {.stdin_fd = -1, .on_started = on_started};
  for (int i = 0; i < 2; i++) {
    struct sbx_exec_request req = {.argv = argv,
                                   .env = env,
                                   .timeout_ms = 5000,
                                   .live = i ? &live : NULL};
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    struct sbx_error err = {0};
    sbx_sandbox_exec(sb, &req, &res, &err);
    sbx_exec_result_free(&res);
  }
}

static void client_ops(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  struct sbx_stat st;
  sbx_sandbox_stat(sb, "/work/a", &st, &err);
  struct sbx_statfs fs;
  sbx_sandbox_statfs(sb, "/work", &fs, &err);
  static char link[4096];
  sbx_sandbox_readlink(sb, "/work/l", link, sizeof link, &err);
  struct sbx_dirent *ents = NULL;
  size_t count = 0;
  if (sbx_sandbox_list(sb, "/work", &ents, &count, 100, &err) == 0)
    free(ents);
  char **paths = NULL;
  if (sbx_sandbox_glob(sb, "/work/*.txt", &paths, &count, 100, &err) == 0) {
    for (size_t i = 0; i < count; i++)
      free(paths[i]);
    free(paths);
  }
  int fd = -1;
  uint64_t size;
  if (sbx_sandbox_file_open_read(sb, "/work/a", &fd, &size, &err) == 0)
    close(fd);
  sbx_sandbox_mkdir(sb, "/work/d", 0700, SBX_MKDIR_PARENTS, &err);
  sbx_sandbox_remove(sb, "/work/d", &err);
  ents = NULL;
  if (sbx_sandbox_list_tree(sb, "/work", 3, &ents, &count, 100, &err) == 0)
    free(ents);
  exec_ops(sb);
}

static void watch_stream(const uint8_t *data, size_t size)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
    abort();
  static struct sbx_watch_reader r;
  static struct sbx_watch_event ev;
  r.len = 0;
  size_t off = 0;
  for (int rounds = 0; rounds < 64; rounds++) {
    if (off < size) {
      ssize_t w = write(p[1], data + off, size - off);
      off += w > 0 ? (size_t)w : 0;
    } else if (p[1] >= 0) {
      close(p[1]);
      p[1] = -1;
    }
    int f = sbx_watch_reader_fill(&r, p[0]);
    int got;
    while ((got = sbx_watch_reader_next(&r, &ev)) == 1)
      ;
    if (got < 0 || f != 0)
      break;
  }
  close(p[0]);
  if (p[1] >= 0)
    close(p[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  struct sbx_sandbox *sb = sbx_sandbox_alloc(NULL, NULL);
  sb->init_fd = sv[0];
  sb->fd_in = data[0] & 1;
  struct script s = {.p = data, .len = size, .off = 1, .sock = sv[1]};
  pthread_t t;
  if (pthread_create(&t, NULL, fake_init, &s) != 0)
    abort();
  client_ops(sb);
  shutdown(sv[0], SHUT_RDWR); /* the fake may still wait for a request */
  pthread_join(t, NULL);
  sbx_sandbox_free(sb);
  watch_stream(data + s.off, size - s.off);
  return 0;
}
