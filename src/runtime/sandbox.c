/* sandbox.c — sbx_sandbox_exec: run one command in a live sandbox.
 *
 * The daemon owns the stdio pipes and the per-exec ctl socket; sbx-init only
 * forks the shepherd (init/proto.h).  This thread then multiplexes stdout,
 * stderr, stdin, ctl and the cancel token with poll() until the tree is gone.
 * Output is read as fast as it comes and kept head+tail (common/capture.h),
 * so a chatty child never blocks on a full pipe and memory stays ~2×cap.
 * Everything from ctl is validated: the sandbox may own sbx-init.
 *
 * Terminals where no fd can leave the sandbox (sb->fd_in, gVisor): the
 * exec asks for PTY_RELAY, the shepherd keeps the master and relays it
 * through the exec's stdin/stdout pipes; the caller's "pty fd" is then the
 * write end of the stdin pipe, and sbx_exec_resize() finds the exec's ctl
 * socket for it in a small registry (keyed by the pipe's inode) to send
 * RESIZE. */
#include "runtime/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/capture.h"
#include "common/cleanup.h"
#include "common/quantity.h"
#include "common/util.h"
#include "init/proto.h"
#include "runtime/chan.h"

#define READ_CHUNK (64 * 1024)
#define KILL_GRACE_MS 5000 /* after KILL: time for EXITED and pipe EOF */
#define DRAIN_MS 2000      /* after EXITED: time for pipe EOF */
#define DEFAULT_CAP (1024 * 1024)

/* P_PTY: a terminal's master, read as stdout. */
enum { P_OUT, P_ERR, P_IN, P_CTL, P_CANCEL, P_PTY, P_N };

struct run {
  const struct sbx_exec_request *req;
  int fd[P_N];
  bool relay;   /* PTY_RELAY: the terminal comes through the pipes */
  int relay_in; /* a dup of the stdin pipe's write end (the caller's pty fd) */
  bool registered;
  struct sbx_capture cap[2];
  size_t in_off;
  char *buf;
  bool exited, exec_failed, lost, init_err, killed, started;
  enum sbx_status kill_status;
  enum sbx_reason kill_reason;
  int remote_errno;
  uint32_t stage, wstatus;
  uint64_t cpu_us, maxrss_kb;
  uint64_t deadline, kill_at, exited_at;
  bool oom_known;      /* oom_before was read */
  uint64_t oom_before; /* the cgroup's OOM-kill counter when the exec started */
};

void sbx_exec_result_free(struct sbx_exec_result *r)
{
  if (!r)
    return;
  free(r->std_out.buf);
  free(r->std_err.buf);
  r->std_out.buf = r->std_err.buf = NULL;
}

/* res->error is shorter than an sbx_error message: cut, don't overflow. */
static void set_error(struct sbx_exec_result *res, const char *msg)
{
  if (snprintf(res->error, sizeof res->error, "%s", msg) < 0)
    res->error[0] = '\0';
}

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* ---- PTY_RELAY: stdin pipe (the caller's pty fd) → the exec's ctl ---- */
struct relay_reg {
  dev_t dev;
  ino_t ino;
  int ctl; /* a dup, owned here */
};
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static struct relay_reg *relays;
static size_t nrelays, relays_cap;

static bool fd_key(int fd, dev_t *dev, ino_t *ino)
{
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
    return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

static bool relay_register(int pipe_fd, int ctl)
{
  dev_t dev;
  ino_t ino;
  int dup_ctl = ctl >= 0 ? fcntl(ctl, F_DUPFD_CLOEXEC, 3) : -1;
  if (!fd_key(pipe_fd, &dev, &ino) || dup_ctl < 0) {
    if (dup_ctl >= 0)
      close(dup_ctl);
    return false;
  }
  pthread_mutex_lock(&relay_lock);
  bool ok = sbx_array_grow(&relays, &relays_cap, nrelays + 1, sizeof *relays,
                           SIZE_MAX / sizeof *relays) == 0;
  if (ok)
    relays[nrelays++] = (struct relay_reg){dev, ino, dup_ctl};
  pthread_mutex_unlock(&relay_lock);
  if (!ok)
    close(dup_ctl);
  return ok;
}

static void relay_unregister(int pipe_fd)
{
  dev_t dev;
  ino_t ino;
  if (!fd_key(pipe_fd, &dev, &ino))
    return;
  pthread_mutex_lock(&relay_lock);
  for (size_t i = 0; i < nrelays; i++)
    if (relays[i].dev == dev && relays[i].ino == ino) {
      close(relays[i].ctl);
      relays[i] = relays[--nrelays];
      break;
    }
  pthread_mutex_unlock(&relay_lock);
}

/* RESIZE on the ctl of the relayed terminal whose stdin pipe pty_fd is. */
static int relay_resize(int pty_fd, unsigned cols, unsigned rows)
{
  dev_t dev;
  ino_t ino;
  if (!fd_key(pty_fd, &dev, &ino))
    return ENOTTY;
  uint32_t cr[2] = {cols, rows};
  int e = ESRCH;
  pthread_mutex_lock(&relay_lock);
  for (size_t i = 0; i < nrelays; i++)
    if (relays[i].dev == dev && relays[i].ino == ino) {
      e = sbx_proto_send(relays[i].ctl, SBX_MSG_RESIZE, 0, 0, cr, sizeof cr, NULL, 0) < 0 ? errno
                                                                                          : 0;
      break;
    }
  pthread_mutex_unlock(&relay_lock);
  return e;
}

static void run_free(struct run *run)
{
  if (run->registered)
    relay_unregister(run->relay_in);
  close_fd(&run->relay_in);
  for (int i = 0; i < P_N; i++)
    if (i != P_CANCEL)
      close_fd(&run->fd[i]);
  sbx_capture_free(&run->cap[0]);
  sbx_capture_free(&run->cap[1]);
  free(run->buf);
}

/* "/work" when absent; relative paths are under /work. */
static int exec_cwd(const char *cwd, char *out, size_t len, struct sbx_error *err)
{
  if (!cwd || !*cwd)
    cwd = "/work";
  int n = cwd[0] == '/' ? snprintf(out, len, "%s", cwd) : snprintf(out, len, "/work/%s", cwd);
  if (n < 0 || (size_t)n >= len || !sbx_proto_path_ok(out))
    return sbx_err_field(err, "cwd", "invalid working directory");
  return 0;
}

static int build_payload(const struct sbx_exec_request *req, bool relay, struct sbx_wbuf *w,
                         struct sbx_error *err)
{
  char cwd[SBX_PROTO_MAX_PATH];
  if (!req->argv || !req->argv[0] || !req->argv[0][0])
    return sbx_err_field(err, "command", "empty command");
  if (exec_cwd(req->cwd, cwd, sizeof cwd, err) < 0)
    return -1;
  static char *const no_env[] = {NULL};
  bool pty = req->live && req->live->pty;
  if (pty && (req->live->cols < 1 || req->live->cols > SBX_PROTO_PTY_MAX ||
              req->live->rows < 1 || req->live->rows > SBX_PROTO_PTY_MAX))
    return sbx_err_field(err, "pty", "pty cols and rows must be 1..%u", SBX_PROTO_PTY_MAX);
  sbx_wbuf_init(w, SBX_PROTO_MAX_PAYLOAD);
  if (req->code && (!req->code_path || strlen(req->code) > SBX_EXEC_CODE_MAX))
    return sbx_err_set(err, SBX_E_TOO_LARGE, E2BIG, "code too large for one exec");
  uint32_t flags = !pty    ? 0
                   : relay ? SBX_PROTO_EXEC_PTY | SBX_PROTO_EXEC_PTY_RELAY
                           : SBX_PROTO_EXEC_PTY;
  sbx_wbuf_u32(w, flags | (req->code ? SBX_PROTO_EXEC_CODE : 0));
  sbx_wbuf_str(w, cwd);
  sbx_wbuf_strv(w, req->argv);
  sbx_wbuf_strv(w, req->env ? req->env : no_env);
  if (pty) {
    sbx_wbuf_u32(w, req->live->cols);
    sbx_wbuf_u32(w, req->live->rows);
  }
  if (req->code) {
    sbx_wbuf_str(w, req->code_path);
    sbx_wbuf_str(w, req->code);
  }
  if (w->bad) {
    sbx_wbuf_free(w);
    return sbx_err_set(err, SBX_E_TOO_LARGE, E2BIG, "command and environment too large");
  }
  return 0;
}

/* Sends EXEC; payloads over one datagram go in a sealed memfd. */
static int send_exec(struct sbx_sandbox *sb, const struct sbx_wbuf *w, const int fds[4],
                     struct sbx_error *err)
{
  if (w->len <= SBX_PROTO_MAX_INLINE)
    return sbx_sandbox_send(sb, SBX_MSG_EXEC, 0, w->buf, w->len, fds, 4, err);
  _cleanup_close_ int mfd = memfd_create("sbx-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0 || sbx_write_all(mfd, w->buf, w->len) != (ssize_t)w->len ||
      fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    return sbx_err_sys(err, errno, "exec payload memfd");
  int all[5] = {fds[0], fds[1], fds[2], fds[3], mfd};
  return sbx_sandbox_send(sb, SBX_MSG_EXEC, SBX_PROTO_F_MEMFD, w->buf, w->len, all, 5, err);
}

/* Makes the pipes, sends EXEC and keeps the daemon's ends in run->fd. */
static int start(struct sbx_sandbox *sb, struct run *run, struct sbx_error *err)
{
  struct sbx_wbuf w;
  run->relay = sb->fd_in && run->req->live && run->req->live->pty;
  if (build_payload(run->req, run->relay, &w, err) < 0)
    return -1;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, ctl[2] = {-1, -1};
  int r = -1;
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
    sbx_err_sys(err, errno, "exec pipes");
    goto out;
  }
  const struct sbx_exec_live *live = run->req->live;
  int child[4] = {in[0], out[1], er[1], ctl[1]};
  if (live && !live->pty && live->stdin_fd >= 0) {
    child[0] = live->stdin_fd; /* the caller's: it writes the other end */
    close_fd(&in[1]);
  }
  if (run->relay && (run->relay_in = fcntl(in[1], F_DUPFD_CLOEXEC, 3)) < 0) {
    sbx_err_sys(err, errno, "exec pipes");
    goto out;
  }
  if (send_exec(sb, &w, child, err) < 0)
    goto out;
  run->fd[P_IN] = steal_fd(&in[1]);
  run->fd[P_OUT] = steal_fd(&out[0]);
  run->fd[P_ERR] = steal_fd(&er[0]);
  run->fd[P_CTL] = steal_fd(&ctl[0]);
  r = 0;
out:
  sbx_wbuf_free(&w);
  int all[8] = {in[0], in[1], out[0], out[1], er[0], er[1], ctl[0], ctl[1]};
  for (int i = 0; i < 8; i++)
    close_fd(&all[i]);
  return r;
}

static void kill_tree(struct run *run, enum sbx_status st, enum sbx_reason why)
{
  if (run->killed)
    return;
  run->killed = true;
  run->kill_status = st;
  run->kill_reason = why;
  run->kill_at = sbx_now_ms();
  if (run->fd[P_CTL] >= 0)
    sbx_proto_send(run->fd[P_CTL], SBX_MSG_KILL, 0, 0, NULL, 0, NULL, 0);
}

/* The terminal's master as sbx-init sent it: hostile input, so it must
 * really be a pty master (TIOCGPTN only answers on one) before we read or
 * write it, and only one is accepted, only when a pty was asked for. */
static void on_pty_msg(struct run *run, int *fds, size_t nfds)
{
  struct stat st;
  unsigned n;
  if (!run->req->live || !run->req->live->pty || run->fd[P_PTY] >= 0 || nfds != 1)
    return;
  if (fstat(fds[0], &st) < 0 || !S_ISCHR(st.st_mode) || ioctl(fds[0], TIOCGPTN, &n) < 0)
    return;
  run->fd[P_PTY] = fds[0];
  fds[0] = -1;
  sbx_set_nonblock(run->fd[P_PTY], 1);
}

static void on_started_msg(struct run *run, struct sbx_rbuf *r)
{
  uint32_t pid = sbx_rbuf_u32(r);
  const struct sbx_exec_live *live = run->req->live;
  if (r->bad || run->started || pid == 0 || pid > 0x7fffffff)
    return;
  run->started = true;
  if (!live || !live->on_started)
    return;
  int ctl = run->fd[P_CTL] >= 0 ? fcntl(run->fd[P_CTL], F_DUPFD_CLOEXEC, 3) : -1;
  /* PTY_RELAY: the terminal's input is the stdin pipe; resizes go on ctl. */
  int src = run->relay ? run->relay_in : run->fd[P_PTY];
  int pty = src >= 0 ? fcntl(src, F_DUPFD_CLOEXEC, 3) : -1;
  if (run->relay && pty >= 0)
    run->registered = relay_register(run->relay_in, run->fd[P_CTL]);
  live->on_started(run->req->on_output_ctx, (pid_t)pid, ctl, pty);
}

static void emit(struct run *run, int stream, const char *data, size_t len)
{
  struct sbx_capture *c = &run->cap[stream - 1];
  if (run->req->on_output)
    run->req->on_output(run->req->on_output_ctx, stream, data, len, c->total);
  sbx_capture_feed(c, data, len);
}

static void read_stream(struct run *run, int which)
{
  /* A few reads per wakeup keep up with a fast writer without starving
   * the other fds. */
  for (int i = 0; i < 4; i++) {
    ssize_t n = read(run->fd[which], run->buf, READ_CHUNK);
    if (n > 0) {
      emit(run, which == P_ERR ? 2 : 1, run->buf, (size_t)n);
      continue;
    }
    /* A pty master reads EIO once every slave fd is closed: that is EOF. */
    if (n == 0 || (errno != EAGAIN && errno != EINTR))
      close_fd(&run->fd[which]);
    return;
  }
}

static void write_stdin(struct run *run)
{
  const struct sbx_exec_request *req = run->req;
  while (run->in_off < req->stdin_len) {
    ssize_t n = write(run->fd[P_IN], (const char *)req->stdin_data + run->in_off,
                      req->stdin_len - run->in_off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0)
      break; /* EPIPE: the child stopped reading; not an error */
    run->in_off += (size_t)n;
  }
  close_fd(&run->fd[P_IN]);
}

/* One validated ctl message; anything malformed is ignored. */
static void on_ctl_msg(struct run *run, const char *buf, size_t n, int *fds, size_t nfds)
{
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, buf + sizeof h, n - sizeof h);
  if (h.type == SBX_MSG_EXITED) {
    uint32_t st = sbx_rbuf_u32(&r);
    uint64_t cpu = sbx_rbuf_u64(&r), rss = sbx_rbuf_u64(&r);
    if (r.bad)
      return;
    run->wstatus = st;
    run->cpu_us = cpu;
    run->maxrss_kb = rss;
    run->exited = true;
  } else if (h.type == SBX_MSG_EXEC_FAILED) {
    run->remote_errno = (int)sbx_rbuf_u32(&r);
    run->stage = sbx_rbuf_u32(&r);
    run->exec_failed = !r.bad;
  } else if (h.type == SBX_MSG_ERR) {
    run->remote_errno = (int)sbx_rbuf_u32(&r);
    run->init_err = !r.bad;
  } else if (h.type == SBX_MSG_PTY) {
    on_pty_msg(run, fds, nfds);
    return;
  } else if (h.type == SBX_MSG_STARTED) {
    on_started_msg(run, &r);
    return;
  } else
    return; /* unknown types need nothing */
  if (run->exited || run->exec_failed || run->init_err) {
    run->exited_at = sbx_now_ms();
    close_fd(&run->fd[P_CTL]);
  }
}

static void read_ctl(struct run *run)
{
  char buf[sizeof(struct sbx_proto_hdr) + 64];
  int fds[SBX_PROTO_MAX_FDS];
  size_t nfds = SBX_PROTO_MAX_FDS;
  ssize_t n = sbx_proto_recv(run->fd[P_CTL], buf, sizeof buf, fds, &nfds);
  if (n > 0)
    on_ctl_msg(run, buf, (size_t)n, fds, nfds);
  for (size_t i = 0; i < nfds; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  if (n > 0)
    return;
  if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == EMSGSIZE || errno == EBADMSG))
    return;
  /* EOF before a final report: the shepherd (or all of sbx-init) died. */
  run->lost = true;
  close_fd(&run->fd[P_CTL]);
}

static bool finished(const struct run *run)
{
  if (run->lost)
    return true;
  bool final = run->exited || run->exec_failed || run->init_err;
  return final && run->fd[P_OUT] < 0 && run->fd[P_ERR] < 0 && run->fd[P_PTY] < 0;
}

/* Next timer in ms (-1: none); fires the deadline and the give-up timers. */
static int timers(struct run *run, bool *give_up)
{
  uint64_t now = sbx_now_ms(), next = UINT64_MAX;
  if (run->deadline && !run->killed) {
    if (now >= run->deadline)
      kill_tree(run, SBX_ST_TIMEOUT, SBX_RS_TIMEOUT);
    else
      next = run->deadline;
  }
  if (run->killed)
    next = next < run->kill_at + KILL_GRACE_MS ? next : run->kill_at + KILL_GRACE_MS;
  if (run->exited_at)
    next = next < run->exited_at + DRAIN_MS ? next : run->exited_at + DRAIN_MS;
  if (next == UINT64_MAX)
    return -1;
  if (now >= next) {
    *give_up = true;
    return 0;
  }
  return (int)(next - now);
}

static void cancelled(struct run *run)
{
  struct sbx_cancel *c = run->req->cancel;
  enum sbx_reason why = c->why != SBX_RS_NONE ? c->why : SBX_RS_CANCELLED;
  kill_tree(run, SBX_ST_KILLED, why);
  run->fd[P_CANCEL] = -1; /* borrowed: stop polling it, never close it */
}

static void pump(struct run *run)
{
  static const short ev[P_N] = {POLLIN, POLLIN, POLLOUT, POLLIN, POLLIN, POLLIN};
  while (!finished(run)) {
    bool give_up = false;
    int timeout = timers(run, &give_up);
    if (give_up)
      return;
    struct pollfd p[P_N];
    for (int i = 0; i < P_N; i++)
      p[i] = (struct pollfd){.fd = run->fd[i], .events = ev[i]};
    int r = poll(p, P_N, timeout);
    if (r < 0 && errno != EINTR)
      return;
    if (r <= 0)
      continue;
    if (p[P_OUT].revents)
      read_stream(run, P_OUT);
    if (p[P_ERR].revents)
      read_stream(run, P_ERR);
    if (p[P_IN].revents)
      write_stdin(run);
    if (p[P_CTL].revents)
      read_ctl(run);
    if (p[P_CANCEL].revents)
      cancelled(run);
    if (p[P_PTY].revents)
      read_stream(run, P_PTY);
  }
}

static void exec_failed_message(struct run *run)
{
  char msg[512];
  int e = run->remote_errno > 0 && run->remote_errno < 4096 ? run->remote_errno : EIO;
  if (run->stage == 1)
    snprintf(msg, sizeof msg, "sbx: cannot change directory: %s\n", strerror(e));
  else if (e == ENOENT)
    snprintf(msg, sizeof msg, "sbx: %.200s: command not found\n", run->req->argv[0]);
  else
    snprintf(msg, sizeof msg, "sbx: %.200s: %s\n", run->req->argv[0], strerror(e));
  emit(run, 2, msg, strlen(msg));
}

static void classify(struct run *run, struct sbx_exec_result *res)
{
  int st = (int)run->wstatus;
  res->exit_code = -1;
  if (run->exec_failed) {
    exec_failed_message(run);
    res->status = SBX_ST_FAILED;
    res->reason = SBX_RS_EXIT;
    bool noexec =
        run->stage == 0 && (run->remote_errno == EACCES || run->remote_errno == ENOEXEC);
    res->exit_code = noexec ? 126 : 127;
    return;
  }
  if (run->exited && WIFEXITED(st)) {
    res->exit_code = WEXITSTATUS(st);
    res->status = res->exit_code ? SBX_ST_FAILED : SBX_ST_SUCCEEDED;
    res->reason = SBX_RS_EXIT;
  } else {
    res->signal = run->exited && WIFSIGNALED(st) ? WTERMSIG(st) : SIGKILL;
    res->status = SBX_ST_KILLED;
    res->reason = SBX_RS_SIGNAL;
  }
  if (run->killed) {
    res->status = run->kill_status;
    res->reason = run->kill_reason;
    set_error(res,
              run->kill_status == SBX_ST_TIMEOUT ? "wall-clock timeout exceeded" : "cancelled");
  }
}

/* The sandbox cgroup's OOM-kill counter: the driver's one-file read, else
 * its whole usage(); -1 without a cgroup (process driver). */
static int read_oom_kills(struct sbx_sandbox *sb, uint64_t *out)
{
  struct sbx_usage u;
  if (!sb->driver)
    return -1;
  if (sb->driver->oom_kills)
    return sb->driver->oom_kills(sb, out);
  if (!sb->driver->usage || sb->driver->usage(sb, &u) < 0)
    return -1;
  *out = u.oom_kills;
  return 0;
}

/* ctl hung up before a final report: the shepherd died, or all of
 * sbx-init did.  Only a round trip on the channel tells them apart: under
 * gVisor the channel's far end is runsc's, which may outlive the Sentry for
 * a moment, so a hang-up poll alone could call a dead sandbox alive.
 * Either sbx-init answers, or its channel hangs up (or stays silent for
 * the reply timeout) because it is gone.  Only on this rare path. */
static bool init_answers(struct sbx_sandbox *sb)
{
  struct sbx_chan_reply rep;
  struct sbx_error e = {0};
  if (sbx_sandbox_call(sb, SBX_MSG_PING, NULL, 0, "ping", &rep, &e) < 0)
    return false;
  if (rep.fd >= 0)
    close(rep.fd);
  return true;
}

static void lost_result(struct sbx_sandbox *sb, struct sbx_exec_result *res)
{
  res->exit_code = -1;
  res->signal = SIGKILL;
  if (init_answers(sb)) {
    /* A workload may SIGKILL its own shepherd: they share the sandbox
     * uid (init/shepherd.c says why that cannot be helped).  Its main
     * process went with it (PR_SET_PDEATHSIG); the session lives on. */
    res->status = SBX_ST_KILLED;
    res->reason = SBX_RS_SHEPHERD_LOST;
    set_error(res, "the exec's supervisor (its shepherd inside the sandbox) was killed, by a "
                   "process of the sandbox (kill -9 -1?): the command was killed with it");
    return;
  }
  struct sbx_usage u = {0};
  if (sb->driver && sb->driver->usage && sb->driver->usage(sb, &u) == 0 && u.pids_max_hits) {
    /* gVisor: the host cgroup's pids ceiling also holds the Sentry's own
     * threads; a fork past it can take the whole sandbox. */
    res->status = SBX_ST_KILLED;
    res->reason = SBX_RS_PIDS;
    set_error(res, "the sandbox reached its pids limit and was lost with the command");
    return;
  }
  res->status = SBX_ST_ERROR;
  res->reason = SBX_RS_SANDBOX_LOST;
  set_error(res, "sandbox lost: sbx-init went away during the exec");
}

/* sbx-init could not fork the shepherd or the shepherd the workload: a
 * full pids (or memory) limit is the sandbox's, and a result says so;
 * anything else is the service's failure. */
static int init_err_result(struct run *run, struct sbx_exec_result *res, struct sbx_error *err)
{
  int e = run->remote_errno > 0 && run->remote_errno < 4096 ? run->remote_errno : 0;
  char msg[300];
  if (e != EAGAIN && e != ENOMEM) {
    sbx_err_set(err, SBX_E_INTERNAL, e, "sbx-init could not start the command: %s", strerror(e));
    res->status = SBX_ST_ERROR;
    res->reason = SBX_RS_NONE;
    res->exit_code = -1;
    set_error(res, err ? err->msg : "sbx-init could not start the command");
    return -1;
  }
  bool pids = e == EAGAIN;
  snprintf(msg, sizeof msg, "sbx: cannot start %.200s: %s (the sandbox's %s limit)\n",
           run->req->argv[0], strerror(e), pids ? "pids" : "memory");
  emit(run, 2, msg, strlen(msg));
  res->status = SBX_ST_FAILED;
  res->reason = pids ? SBX_RS_PIDS : SBX_RS_MEMORY;
  res->exit_code = 126;
  set_error(res, pids ? "the command could not start: the sandbox's pids limit is reached"
                      : "the command could not start: out of memory in the sandbox");
  return 0;
}

/* OOM from the cgroup's counter over the exec, whatever the tree did with
 * the kill (a shell that reaps its OOM-killed child exits 137 itself):
 * oom_killed whenever the counter moved and the exec did not exit 0.  The
 * daemon's own kills (timeout, cancel) keep their status: they are what
 * ended the exec.  Concurrent execs of a session share its cgroup, so each
 * of them that fails while a kill happens is reported oom_killed: the
 * counter does not say whose process it took, and the limit is the
 * session's (docs/isolation.md, "OOM"). */
static void apply_oom(struct sbx_sandbox *sb, const struct run *run, struct sbx_exec_result *res)
{
  if (!res->oom_kills || res->status == SBX_ST_SUCCEEDED || run->killed)
    return;
  if (res->status == SBX_ST_ERROR && res->reason == SBX_RS_NONE)
    return; /* the service failed, not the command */
  char mem[32];
  sbx_format_bytes(sb->limits.memory_bytes, mem, sizeof mem);
  res->status = SBX_ST_OOM_KILLED;
  res->reason = SBX_RS_MEMORY;
  snprintf(res->error, sizeof res->error,
           "memory limit of %s reached: the kernel's OOM "
           "killer ended %llu process%s during the exec",
           mem, (unsigned long long)res->oom_kills, res->oom_kills == 1 ? "" : "es");
}

/* The code file of a language+code exec could not be written: the command
 * never started. */
static int code_err_result(const struct run *run, struct sbx_exec_result *res,
                           struct sbx_error *err)
{
  int e = run->remote_errno > 0 && run->remote_errno < 4096 ? run->remote_errno : EIO;
  bool full = e == ENOSPC || e == EDQUOT;
  res->status = SBX_ST_ERROR;
  res->reason = full ? SBX_RS_DISK : SBX_RS_NONE;
  res->exit_code = -1;
  sbx_err_set(err, full || e == EFBIG ? SBX_E_TOO_LARGE : SBX_E_INTERNAL, e,
              "writing the code into the sandbox: write %s: %s", run->req->code_path,
              strerror(e));
  set_error(res, err ? err->msg : "writing the code into the sandbox failed");
  return -1;
}

static int fill_result(struct sbx_sandbox *sb, struct run *run, struct sbx_exec_result *res,
                       uint64_t t0, struct sbx_error *err)
{
  int r = 0;
  if (run->init_err)
    r = init_err_result(run, res, err);
  else if (run->exec_failed && run->stage == 2 && run->req->code)
    r = code_err_result(run, res, err);
  else if (run->lost && !run->killed)
    lost_result(sb, res);
  else if (!run->exited && !run->exec_failed && !run->killed) {
    res->status = SBX_ST_ERROR; /* the pump failed (poll): nothing to report */
    res->reason = SBX_RS_NONE;
    res->exit_code = -1;
    r = sbx_err_set(err, SBX_E_INTERNAL, errno, "exec: waiting for the command failed");
    set_error(res, err ? err->msg : "exec failed");
  } else
    classify(run, res);
  uint64_t after;
  if (run->oom_known && read_oom_kills(sb, &after) == 0 && after > run->oom_before)
    res->oom_kills = after - run->oom_before;
  apply_oom(sb, run, res);
  res->duration_ms = sbx_now_ms() - t0;
  res->cpu_seconds = (double)run->cpu_us / 1e6;
  res->memory_peak_bytes = run->maxrss_kb * 1024;
  struct sbx_output *outs[2] = {&res->std_out, &res->std_err};
  for (int i = 0; i < 2; i++)
    if (sbx_capture_output(&run->cap[i], outs[i]) < 0 && r == 0)
      r = sbx_err_sys(err, ENOMEM, "exec output");
  return r;
}

static int run_init(struct run *run, const struct sbx_exec_request *req, struct sbx_error *err)
{
  memset(run, 0, sizeof *run);
  for (int i = 0; i < P_N; i++)
    run->fd[i] = -1;
  run->relay_in = -1;
  run->req = req;
  size_t cap = req->output_cap ? (size_t)req->output_cap : DEFAULT_CAP;
  run->buf = malloc(READ_CHUNK);
  if (!run->buf || sbx_capture_init(&run->cap[0], cap) < 0 ||
      sbx_capture_init(&run->cap[1], cap) < 0)
    return sbx_err_sys(err, ENOMEM, "exec buffers");
  return 0;
}

static int exec_run(struct sbx_sandbox *sb, const struct sbx_exec_request *req,
                    struct sbx_exec_result *res, struct sbx_error *err)
{
  memset(res, 0, sizeof *res);
  res->status = SBX_ST_ERROR;
  res->exit_code = -1;
  struct run run;
  uint64_t t0 = sbx_now_ms();
  /* One small cgroupfs read before and one after (~10 us each here): an
   * OOM kill anywhere in the tree is seen, whoever reaped its victim. */
  int rc = run_init(&run, req, err);
  if (rc == 0)
    run.oom_known = read_oom_kills(sb, &run.oom_before) == 0;
  if (rc == 0 && start(sb, &run, err) < 0)
    rc = sbx_sandbox_alive(sb) ? -1 : 1;
  if (rc != 0) {
    /* A sandbox found gone at the start (its sbx-init died since the last
     * exec, before the reaper noticed) is a result like one lost midway. */
    if (rc > 0) {
      res->status = SBX_ST_ERROR;
      res->reason = SBX_RS_SANDBOX_LOST;
    }
    set_error(res, rc > 0 ? "sandbox lost: sbx-init is gone" : err ? err->msg : "exec failed");
    run_free(&run);
    return rc > 0 ? 0 : -1;
  }
  if (req->timeout_ms)
    run.deadline = t0 + req->timeout_ms;
  if (req->cancel && req->cancel->efd >= 0)
    run.fd[P_CANCEL] = req->cancel->efd;
  for (int i = P_OUT; i <= P_CTL; i++)
    sbx_set_nonblock(run.fd[i], 1);
  if (!req->stdin_data || req->stdin_len == 0)
    close_fd(&run.fd[P_IN]);
  pump(&run);
  run.fd[P_CANCEL] = -1;
  int r = fill_result(sb, &run, res, t0, err);
  run_free(&run);
  return r;
}

int sbx_sandbox_exec(struct sbx_sandbox *sb, const struct sbx_exec_request *req,
                     struct sbx_exec_result *res, struct sbx_error *err)
{
  sbx_sandbox_hold(sb);
  int r = exec_run(sb, req, res, err);
  sbx_sandbox_release(sb);
  return r;
}

int sbx_exec_signal(int ctl_fd, int signo, struct sbx_error *err)
{
  uint32_t v = (uint32_t)signo;
  if (signo < 1 || signo > 64)
    return sbx_err_field(err, "signal", "signal number out of range");
  if (ctl_fd < 0 || sbx_proto_send(ctl_fd, SBX_MSG_SIGNAL, 0, 0, &v, sizeof v, NULL, 0) < 0)
    return sbx_err_set(err, SBX_E_CONFLICT, ctl_fd < 0 ? 0 : errno, "the process has exited");
  return 0;
}

int sbx_exec_resize(int pty_fd, unsigned cols, unsigned rows, struct sbx_error *err)
{
  if (cols < 1 || rows < 1 || cols > SBX_PROTO_PTY_MAX || rows > SBX_PROTO_PTY_MAX)
    return sbx_err_field(err, "cols", "cols and rows must be 1..%u", SBX_PROTO_PTY_MAX);
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  if (pty_fd < 0)
    return sbx_err_sys(err, EBADF, "resizing the terminal");
  if (ioctl(pty_fd, TIOCSWINSZ, &ws) == 0)
    return 0;
  int e = errno == ENOTTY ? relay_resize(pty_fd, cols, rows) : errno; /* PTY_RELAY */
  if (e == ESRCH || e == EPIPE)
    return sbx_err_set(err, SBX_E_CONFLICT, e, "the process has exited");
  return e ? sbx_err_sys(err, e, "resizing the terminal") : 0;
}
