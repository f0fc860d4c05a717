/* exec.c — EXEC on the main channel: validate the request, hand it to a
 * shepherd (an idle one of this sandbox's herd, or a new fork) and forget
 * it (its report goes to the daemon on ctl; the SIGCHLD handler in main.c
 * reaps shepherds that end). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

/* The herd: shepherds that come back for another EXEC once theirs has
 * ended cleanly (its whole tree reaped), each on a socketpair to sbx-init.
 * A shepherd says 'r' on it before it reports EXITED to the daemon, so by
 * the time the daemon can send the next EXEC, sbx-init knows the shepherd
 * is idle: the next EXEC costs a hand-over (one datagram carrying the
 * request and its fds, and a one-byte ack) instead of a fork and an exit,
 * which on a VM cost as much as the workload's own exec (copying and then
 * tearing down page tables, with TLB shoot-downs across cores).  Reusing a
 * shepherd gives the next workload nothing the last one could not already
 * reach: both run as the sandbox uid under the same filter, and a shepherd
 * (a fork of sbx-init, not dumpable) cannot be ptraced or written through
 * /proc by them.  Execs beyond the herd's size, and those with a terminal,
 * get a shepherd of their own that ends with them. */
#define HERD_MAX 4

static struct herd_entry {
  pid_t pid;
  int sock;
  bool idle;
} herd[HERD_MAX];
static size_t herd_n;

static void herd_drop(size_t i)
{
  close(herd[i].sock);
  herd[i] = herd[--herd_n];
}

/* Who said 'r' since the last look, and who is gone (their end closed:
 * the shepherd exited, or the workload killed it). */
static void herd_refresh(void)
{
  for (size_t i = 0; i < herd_n;) {
    char c = 0;
    ssize_t n = recv(herd[i].sock, &c, 1, MSG_DONTWAIT);
    if (n == 1 && c == 'r')
      herd[i].idle = true;
    if (n == 0 || (n == 1 && c != 'r') || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      herd_drop(i);
      continue;
    }
    i++;
  }
}

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The shepherd's ack within ms.  Our SIGCHLD handler interrupts poll and
 * read whenever any child ends (another exec's shepherd, an orphan): that
 * is no answer, so wait on for the rest of the time. */
static bool acked(int sock, int ms)
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

/* Hands the request to idle shepherd i; false if it is gone or dies
 * before acknowledging (a SIGKILL already queued for it lands between our
 * send and its exit): it leaves the herd and the caller tries another.
 * Once it has acknowledged, the request is its own whatever happens next:
 * starting it elsewhere too would run the command twice. */
static bool hand_over(size_t i, const char *payload, size_t len, int *fds)
{
  int rc = sbx_proto_send(herd[i].sock, SBX_MSG_EXEC, 0, 0, payload, len, fds, 4);
  if (rc == 0)
    rc = acked(herd[i].sock, 2000) ? 0 : -1;
  if (rc == 0) {
    herd[i].idle = false;
    return true;
  }
  kill(herd[i].pid, SIGKILL); /* a stuck shepherd must not start it later */
  /* ... unless it acknowledged just after we stopped waiting: then it
   * started it (or dies with it, which the daemon sees as a lost exec). */
  char ack = 0;
  bool took = recv(herd[i].sock, &ack, 1, MSG_DONTWAIT) == 1 && ack == 'k';
  herd_drop(i);
  return took;
}

/* One EXEC's fields, parsed from its payload (pointing into it). */
struct exec_req {
  uint32_t flags;
  const char *cwd;
  char **argv, **env;
  struct sbxi_pty pty;
  struct sbxi_code code;
};

static bool exec_parse(const char *payload, size_t len, struct exec_req *q)
{
  struct sbx_rbuf r;
  memset(q, 0, sizeof *q);
  q->pty.master = q->pty.slave = -1;
  if (!payload)
    return false;
  sbx_rbuf_init(&r, payload, len);
  q->flags = sbx_rbuf_u32(&r);
  q->cwd = sbx_rbuf_str(&r, SBX_PROTO_MAX_PATH);
  q->argv = sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV);
  q->env = q->argv ? sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV) : NULL;
  if (q->flags & SBX_PROTO_EXEC_PTY) {
    q->pty.cols = sbx_rbuf_u32(&r);
    q->pty.rows = sbx_rbuf_u32(&r);
    if (!q->pty.cols || !q->pty.rows || q->pty.cols > SBX_PROTO_PTY_MAX ||
        q->pty.rows > SBX_PROTO_PTY_MAX)
      r.bad = true;
  }
  q->pty.relay = (q->flags & SBX_PROTO_EXEC_PTY_RELAY) != 0;
  if (q->flags & SBX_PROTO_EXEC_CODE) {
    q->code.path = sbx_rbuf_str(&r, SBX_PROTO_MAX_PATH);
    q->code.text = sbx_rbuf_str(&r, SBX_PROTO_MAX_PAYLOAD);
    if (!q->code.path || !q->code.text || !sbx_proto_path_ok(q->code.path))
      r.bad = true;
  }
  if ((q->flags & ~(SBX_PROTO_EXEC_PTY | SBX_PROTO_EXEC_PTY_RELAY | SBX_PROTO_EXEC_CODE)) ||
      (q->pty.relay && !(q->flags & SBX_PROTO_EXEC_PTY)) || r.off != r.len)
    r.bad = true;
  return !r.bad && q->cwd && q->argv && q->env && q->argv[0] && sbx_proto_path_ok(q->cwd);
}

static void exec_req_free(struct exec_req *q)
{
  free(q->argv);
  free(q->env);
  q->argv = q->env = NULL;
}

/* Runs q on this (shepherd) process; true if it may take another. */
static bool run_job(const struct sbxi *in, struct exec_req *q, int *fds, int back)
{
  bool pty = q->flags & SBX_PROTO_EXEC_PTY;
  return sbxi_shepherd(in, q->cwd, q->argv, q->env, fds, pty ? &q->pty : NULL,
                       q->code.path ? &q->code : NULL, pty ? -1 : back);
}

/* The next valid request on back, acknowledged; false when sbx-init is
 * gone or sent something that is not one. */
static bool next_job(int back, char *buf, size_t size, struct exec_req *q, int *fds)
{
  for (;;) {
    size_t nfds = SBX_PROTO_MAX_FDS;
    ssize_t n;
    do
      n = sbx_proto_recv(back, buf, size, fds, &nfds);
    while (n < 0 && errno == EINTR);
    if (n <= 0 || nfds != 4) {
      if (n > 0)
        close_all(fds, nfds);
      return false;
    }
    /* The ack tells sbx-init the request is ours from here on; dying
     * before it (a workload's kill -1 reaches idle shepherds too) leaves
     * the request with sbx-init, which starts it on another shepherd. */
    if (write(back, "k", 1) != 1) {
      close_all(fds, 4);
      return false;
    }
    struct sbx_proto_hdr h;
    memcpy(&h, buf, sizeof h);
    if (exec_parse(buf + sizeof h, h.len, q))
      return true;
    exec_req_free(q);
    report_err(fds[3], EINVAL);
    close_all(fds, 4);
  }
}

/* A new shepherd's life: the request sbx-init forked it for (q; NULL:
 * none, it starts idle), then (with a way back) the ones handed to it,
 * until one does not end cleanly. */
static _Noreturn void shepherd_main(const struct sbxi *in, struct exec_req *q, int *fds,
                                    int back)
{
  static char buf[sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
  for (size_t i = 0; i < herd_n; i++) /* sbx-init's ends, not ours */
    close(herd[i].sock);
  herd_n = 0;
  if (!sbxi_shepherd_setup(in)) {
    if (q)
      report_err(fds[3], errno);
    _exit(1);
  }
  struct exec_req next;
  int next_fds[SBX_PROTO_MAX_FDS];
  if (!q) {
    if (!next_job(back, buf, sizeof buf, &next, next_fds))
      _exit(0);
    q = &next;
    fds = next_fds;
  }
  while (run_job(in, q, fds, back) && back >= 0) {
    exec_req_free(q);
    if (!next_job(back, buf, sizeof buf, q, fds))
      break;
  }
  _exit(0);
}

/* Forks a shepherd for q (NULL: an idle one), in the herd if joins and
 * there is room; 0, or -1 with errno. */
static int fork_shepherd(const struct sbxi *in, struct exec_req *q, int *fds, bool joins)
{
  int sv[2] = {-1, -1};
  joins = joins && herd_n < HERD_MAX &&
          socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0;
  if (!q && !joins)
    return 0; /* an idle shepherd outside the herd could never be reached */
  pid_t pid = fork();
  if (pid == 0) {
    if (joins)
      close(sv[0]);
    shepherd_main(in, q, fds, sv[1]);
  }
  int e = errno;
  if (joins)
    close(sv[1]);
  if (joins && pid > 0)
    herd[herd_n++] = (struct herd_entry){.pid = pid, .sock = sv[0], .idle = q == NULL};
  else if (joins)
    close(sv[0]);
  errno = e;
  return pid < 0 ? -1 : 0;
}

void sbxi_exec_prepare(const struct sbxi *in)
{
  herd_refresh();
  for (size_t i = 0; i < herd_n; i++)
    if (herd[i].idle)
      return;
  fork_shepherd(in, NULL, NULL, true);
}

void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds)
{
  if (nfds != 4) {
    if (nfds >= 4)
      report_err(fds[3], EINVAL);
    close_all(fds, nfds);
    return;
  }
  herd_refresh();
  for (size_t i = herd_n; payload && len <= SBX_PROTO_MAX_INLINE && i-- > 0;)
    if (herd[i].idle && hand_over(i, payload, len, fds)) {
      close_all(fds, 4); /* the shepherd holds its own copies now */
      return;
    }
  struct exec_req q;
  if (!exec_parse(payload, len, &q))
    report_err(fds[3], EINVAL);
  else if (fork_shepherd(in, &q, fds, !(q.flags & SBX_PROTO_EXEC_PTY)) < 0)
    report_err(fds[3], errno);
  exec_req_free(&q);
  close_all(fds, 4);
}
