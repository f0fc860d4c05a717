/* exec.c — EXEC on the main channel: validate the request, hand it to a
 * spare shepherd (or fork one) and forget it (its report goes to the daemon
 * on ctl; the SIGCHLD handler in main.c reaps it). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "init/init.h"

static void close_all(int *fds, size_t nfds)
{
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
}

static void report_err(int ctl, int e)
{
  int32_t v = e;
  sbx_proto_send(ctl, SBX_MSG_ERR, 0, 0, &v, sizeof v, NULL, 0);
}

/* A spare shepherd, forked ahead of time: an EXEC then costs a hand-over
 * (one datagram carrying the request and its fds) instead of a fork on the
 * critical path (a fork is ~0.6 ms on a VM, as much as the exec itself).
 * The spare is refilled right after each hand-over, while the workload
 * starts on the other core; the first EXEC of a sandbox forks directly, so
 * an idle session that never runs anything costs no extra process. */
static pid_t spare_pid = -1;
static int spare_sock = -1;

static void start_shepherd(const struct sbxi *in, const char *payload, size_t len, int *fds,
                           bool forked);

static _Noreturn void spare_wait(const struct sbxi *in, int sock)
{
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != in->self)
    _exit(0);
  sbxi_xfer_drop_all(); /* their ends must close when sbx-init's do */
  /* The spare never speaks on the main channel: drop it now, so a dead
   * sbx-init is seen by the daemon whatever spares exist. */
  close(in->chan);
  struct sbxi mine = *in;
  mine.chan = -1;
  static char buf[sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
  int fds[SBX_PROTO_MAX_FDS];
  size_t nfds = SBX_PROTO_MAX_FDS;
  ssize_t n = sbx_proto_recv(sock, buf, sizeof buf, fds, &nfds);
  /* The ack tells sbx-init the request is ours from here on; dying before
   * it (a workload's kill -1 reaches spares too) leaves the request with
   * sbx-init, which starts it on a shepherd of its own. */
  if (n <= 0 || nfds != 4 || write(sock, "k", 1) != 1)
    _exit(0);
  close(sock);
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  start_shepherd(&mine, buf + sizeof h, h.len, fds, true);
  _exit(0);
}

static void spare_refill(const struct sbxi *in)
{
  if (spare_pid > 0)
    return;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return;
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    spare_wait(in, sv[1]);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return;
  }
  spare_pid = pid;
  spare_sock = sv[0];
}

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The spare's ack within ms.  Our SIGCHLD handler interrupts poll and read
 * whenever any child ends (the last exec's shepherd, an orphan): that is
 * no answer, so wait on for the rest of the time. */
static bool spare_acked(int sock, int ms)
{
  int64_t due = mono_ms() + ms;
  for (;;) {
    int64_t left = due - mono_ms();
    struct pollfd p = {.fd = sock, .events = POLLIN};
    int n = poll(&p, 1, left > 0 ? (int)left : 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n != 1)
      return false;
    char ack = 0;
    ssize_t r = read(sock, &ack, 1);
    if (r < 0 && errno == EINTR)
      continue;
    return r == 1 && ack == 'k';
  }
}

/* Hands the request to the spare; false if there is none, or it is gone
 * or dies before acknowledging (a SIGKILL already queued for it lands
 * between our send and its exit): the caller then starts it itself.  Once
 * the spare has acknowledged, the request is its own whatever happens
 * next: starting it here too would run the command twice. */
static bool spare_take(const char *payload, size_t len, int *fds)
{
  if (spare_pid <= 0 || len > SBX_PROTO_MAX_INLINE)
    return false;
  int rc = sbx_proto_send(spare_sock, SBX_MSG_EXEC, 0, 0, payload, len, fds, 4);
  if (rc == 0)
    rc = spare_acked(spare_sock, 2000) ? 0 : -1;
  if (rc < 0 && spare_pid > 0) {
    kill(spare_pid, SIGKILL); /* a stuck spare must not start it a second time */
    /* ... unless it acknowledged just after we stopped waiting: then it
     * started it (or dies with it, which the daemon sees as a lost exec). */
    char ack = 0;
    if (recv(spare_sock, &ack, 1, MSG_DONTWAIT) == 1 && ack == 'k')
      rc = 0;
  }
  close(spare_sock);
  spare_sock = -1;
  spare_pid = -1;
  return rc == 0;
}

/* Parses EXEC and becomes (forked: already is) the shepherd. */
static void start_shepherd(const struct sbxi *in, const char *payload, size_t len, int *fds,
                           bool forked)
{
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, payload, payload ? len : 0);
  uint32_t flags = sbx_rbuf_u32(&r);
  const char *cwd = sbx_rbuf_str(&r, SBX_PROTO_MAX_PATH);
  char **argv = sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV);
  char **env = argv ? sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV) : NULL;
  struct sbxi_pty pty = {.master = -1, .slave = -1};
  if (flags & SBX_PROTO_EXEC_PTY) {
    pty.cols = sbx_rbuf_u32(&r);
    pty.rows = sbx_rbuf_u32(&r);
    if (!pty.cols || !pty.rows || pty.cols > SBX_PROTO_PTY_MAX || pty.rows > SBX_PROTO_PTY_MAX)
      r.bad = true;
  }
  pty.relay = (flags & SBX_PROTO_EXEC_PTY_RELAY) != 0;
  struct sbxi_code code = {NULL, NULL};
  if (flags & SBX_PROTO_EXEC_CODE) {
    code.path = sbx_rbuf_str(&r, SBX_PROTO_MAX_PATH);
    code.text = sbx_rbuf_str(&r, SBX_PROTO_MAX_PAYLOAD);
    if (!code.path || !code.text || !sbx_proto_path_ok(code.path))
      r.bad = true;
  }
  if ((flags & ~(SBX_PROTO_EXEC_PTY | SBX_PROTO_EXEC_PTY_RELAY | SBX_PROTO_EXEC_CODE)) ||
      (pty.relay && !(flags & SBX_PROTO_EXEC_PTY)) || r.off != r.len)
    r.bad = true;
  if (!payload || r.bad || !cwd || !argv || !env || !argv[0] || !sbx_proto_path_ok(cwd)) {
    report_err(fds[3], EINVAL);
    goto out;
  }
  pid_t pid = forked ? 0 : fork();
  if (pid == 0)
    sbxi_shepherd(in, cwd, argv, env, fds, (flags & SBX_PROTO_EXEC_PTY) ? &pty : NULL,
                  code.path ? &code : NULL);
  if (pid < 0)
    report_err(fds[3], errno);
out:
  free(argv);
  free(env);
  close_all(fds, 4);
}

void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds)
{
  if (nfds != 4) {
    if (nfds >= 4)
      report_err(fds[3], EINVAL);
    close_all(fds, nfds);
    return;
  }
  if (payload && spare_take(payload, len, fds))
    close_all(fds, nfds); /* the spare holds its own copies now */
  else
    start_shepherd(in, payload, len, fds, false);
  spare_refill(in);
}
