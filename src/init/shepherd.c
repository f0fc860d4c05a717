/* shepherd.c — one exec at a time: forks the workload, reports
 * STARTED/EXITED on the exec's ctl socket, and makes sure nothing of the
 * workload's tree survives it (it is a child subreaper, so double-forked
 * grandchildren reparent to it and are found and killed too).  A shepherd
 * whose exec ended cleanly may run the next one (exec.c's herd).
 *
 * The workload can kill its shepherd, and nothing here can stop that: both
 * run as the sandbox uid, so kill(2)'s permission check passes, SIGKILL
 * cannot be caught, and the only process `kill -9 -1` spares is the pid
 * namespace's init (sbx-init) and the caller.  The ways out all need a
 * capability sbx-init deliberately lacks (docs/isolation.md: same uid,
 * caps and seccomp as the workload): a uid of its own for the shepherd
 * (CAP_SETUID to switch the workload back), or the workload in a child pid
 * namespace with the shepherd as its init (CAP_SYS_ADMIN, and seccomp
 * denies CLONE_NEWPID).  Giving PID 1 those capabilities would weaken the
 * wall for every sandbox to save an exec that killed itself.  So the
 * outcome is made right instead: the workload's main process dies with
 * its shepherd (PR_SET_PDEATHSIG), sbx-init (PID 1, spared) serves on and
 * forks new shepherds, and the daemon — seeing ctl hang up while sbx-init
 * still answers a PING — reports killed/shepherd_lost (runtime/sandbox.c)
 * and the session lives on. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

/* PTY_RELAY: this shepherd relays the terminal; NULL otherwise. */
static struct sbxi_relay *relay;

/* No close_range (gVisor's 2022 kernel): mark only the fds that are open,
 * listed in /proc/self/fd — a loop over the whole fd range costs one
 * syscall per slot, i.e. a second under gVisor's ptrace platform.  Runs in
 * the vfork child: raw getdents64 into a stack buffer, no heap. */
__attribute__((noinline)) static void cloexec_open_fds(int keep)
{
  int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) {
    for (int fd = 3; fd < 65536; fd++)
      if (fd != keep)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    return;
  }
  char buf[4096];
  long n;
  while ((n = syscall(SYS_getdents64, d, buf, sizeof buf)) > 0)
    for (long off = 0; off < n;) {
      struct dirent64 *de = (struct dirent64 *)(buf + off);
      int fd = atoi(de->d_name);
      if (fd >= 3 && fd != keep && fd != d)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
      off += de->d_reclen;
    }
  close(d);
}

/* Process driver: the daemon says HOME=/work and TMPDIR=/tmp, which only
 * mean something under --root; point them at the sandbox's own dirs.
 * noinline: inlined into the vfork caller, gcc warns (-Wclobbered). */
__attribute__((noinline)) static char **rewrite_env(const struct sbxi *in, char **env)
{
  if (!strcmp(in->root, "/"))
    return env;
  size_t n = 0;
  while (env[n])
    n++;
  char **out = calloc(n + 1, sizeof *out);
  if (!out)
    return env;
  for (size_t i = 0; i < n; i++) {
    out[i] = env[i];
    const char *v = NULL;
    if (!strcmp(env[i], "HOME=/work") || !strcmp(env[i], "TMPDIR=/tmp"))
      v = strchr(env[i], '=');
    char *s;
    if (v && asprintf(&s, "%.*s=%s%s", (int)(v - env[i]), env[i], in->root, v + 1) >= 0)
      out[i] = s;
  }
  return out;
}

static void set_stdio(const int fds[3])
{
  /* Move out of the 0..2 range first so no dup2 clobbers a source. */
  int tmp[3];
  for (int i = 0; i < 3; i++)
    tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
  for (int i = 0; i < 3; i++)
    if (tmp[i] < 0 || dup2(tmp[i], i) < 0)
      _exit(127);
}

/* sbx-init set every signal to its default at start-up but SIGPIPE
 * (ignored: an ignored signal would stay so across execve) and SIGCHLD
 * (its handler; setup_self put it back; a handler ends at execve anyway). */
void sbxi_signals_for_exec(void)
{
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

static _Noreturn void workload(char **argv, char **env, const int fds[4], int cwdfd, int errfd,
                               const struct sbxi_pty *pty)
{
  setsid();
  /* If the shepherd dies (sbx-init killed) the main process goes with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (pty)
    sbxi_pty_attach(pty);
  else
    set_stdio(fds);
  int e = 0;
  if (fchdir(cwdfd) < 0)
    e = errno;
  /* Everything above 2 closes at exec; errfd is already CLOEXEC. */
  if (!e && syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
    cloexec_open_fds(errfd);
  if (!e) {
    sbxi_signals_for_exec();
    if (sbxi_engine_on())
      sbxi_engine_client(argv, env);
    environ = env; /* execvp searches the PATH of this environment */
    execvp(argv[0], argv);
    e = errno;
  }
  int32_t v = e;
  (void)!write(errfd, &v, sizeof v);
  _exit(127);
}

static void send_exec_failed(int ctl, int e, uint32_t stage)
{
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, 64);
  sbx_wbuf_u32(&w, (uint32_t)e);
  sbx_wbuf_u32(&w, stage);
  sbx_proto_send(ctl, SBX_MSG_EXEC_FAILED, 0, 0, w.buf, w.len, NULL, 0);
  sbx_wbuf_free(&w);
}

/* SBX_PROTO_EXEC_CODE: the directory and name of the code file while it
 * exists, so that every way out removes it before the daemon hears of the
 * end. */
static int code_dir = -1;
static char code_buf[SBX_PROTO_MAX_PATH + 3];
static const char *code_name;

static void code_remove(void)
{
  if (code_dir < 0)
    return;
  unlinkat(code_dir, code_name, 0);
  close(code_dir);
  code_dir = -1;
}

/* 0, or the errno of the failed write (the file is then gone). */
static int code_write(int rootfd, const struct sbxi_code *c)
{
  int fd = sbxi_open_write(rootfd, c->path, 0644, SBX_PROTO_W_MKDIR);
  if (fd < 0)
    return -fd;
  int r = sbxi_open_parent(rootfd, c->path, O_RDONLY, code_buf, sizeof code_buf, &code_name);
  if (r >= 0) {
    code_dir = r;
    r = 0;
  }
  for (size_t off = 0, n = strlen(c->text); r == 0 && off < n;) {
    ssize_t w = write(fd, c->text + off, n - off);
    if (w < 0 && errno != EINTR)
      r = -errno;
    off += w > 0 ? (size_t)w : 0;
  }
  close(fd);
  if (r < 0)
    code_remove();
  return -r;
}

static void send_u32(int ctl, uint32_t type, uint32_t v)
{
  sbx_proto_send(ctl, type, 0, 0, &v, sizeof v, NULL, 0);
}

/* Kill the workload's tree and report its status and rusage.  The main pid
 * is still unreaped here (alive or a zombie), so kill(-main) cannot hit a
 * recycled process group.  True when this shepherd may take another exec:
 * it has a way back to sbx-init, no terminal, and nothing of the tree is
 * left; then it tells sbx-init so on back before the daemon hears EXITED. */
static bool finish(int ctl, pid_t main, int back)
{
  kill(-main, SIGKILL);
  kill(main, SIGKILL);
  int st = 0;
  bool reaped = false;
  bool empty = sbxi_kill_tree(main, &st, &reaped);
  while (!reaped) {
    pid_t r = sbxi_wait(main, &st, 0);
    if (r == main || (r < 0 && errno != EINTR))
      reaped = true;
  }
  if (relay) /* the output before EXITED, and the pipe's EOF after it */
    sbxi_relay_drain(relay);
  code_remove();
  bool again = back >= 0 && empty && !relay && write(back, "r", 1) == 1;
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, 64);
  sbx_wbuf_u32(&w, (uint32_t)st);
  sbx_wbuf_u64(&w, sbxi_reaped.cpu_us);
  sbx_wbuf_u64(&w, sbxi_reaped.maxrss_kb);
  sbx_proto_send(ctl, SBX_MSG_EXITED, 0, 0, w.buf, w.len, NULL, 0);
  sbx_wbuf_free(&w);
  return again;
}

/* Reaps orphans that died while leaving the main process unreaped; true
 * once the main process has exited. */
static bool reap_orphans(pid_t main)
{
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
      return false;
    if (si.si_pid == main)
      return true;
    sbxi_wait(si.si_pid, NULL, 0);
  }
}

/* SIGNAL{signo} from the daemon: for the workload's process group (its
 * session leader's, as it called setsid), else the main process alone.
 * RESIZE{cols, rows}: the relayed terminal's size. */
static bool on_signal_msg(const char *buf, ssize_t n, pid_t main)
{
  struct sbx_proto_hdr h;
  if (n < (ssize_t)sizeof h)
    return false;
  memcpy(&h, buf, sizeof h);
  if (h.type == SBX_MSG_RESIZE) {
    uint32_t cr[2];
    if (h.len != sizeof cr || (size_t)n != sizeof h + sizeof cr)
      return false;
    memcpy(cr, buf + sizeof h, sizeof cr);
    if (relay)
      sbxi_relay_resize(relay, cr[0], cr[1]);
    return true;
  }
  uint32_t sig;
  if (h.type != SBX_MSG_SIGNAL || h.len != sizeof sig || (size_t)n != sizeof h + sizeof sig)
    return false;
  memcpy(&sig, buf + sizeof h, sizeof sig);
  if (sig < 1 || sig > 64)
    return true; /* refused, but not a reason to kill */
  if (kill(-main, (int)sig) < 0)
    kill(main, (int)sig);
  return true;
}

static bool supervise(int ctl, int sfd, pid_t main, int back)
{
  for (;;) {
    struct pollfd p[6] = {{.fd = sfd, .events = POLLIN}, {.fd = ctl, .events = POLLIN}};
    size_t nr = relay ? sbxi_relay_poll(relay, p + 2) : 0;
    if (poll(p, 2 + nr, -1) < 0) {
      if (errno == EINTR)
        continue;
      return finish(ctl, main, back);
    }
    if (nr)
      sbxi_relay_service(relay, p + 2, nr);
    if (p[0].revents) {
      struct signalfd_siginfo si[8];
      (void)!read(sfd, si, sizeof si);
      if (reap_orphans(main))
        return finish(ctl, main, back);
    }
    if (p[1].revents) {
      char buf[64];
      ssize_t n = recv(ctl, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (n > 0 && on_signal_msg(buf, n, main))
        continue;
      /* KILL, EOF (the daemon thread is gone) or anything broken: kill. */
      return finish(ctl, main, back);
    }
  }
}

/* Once per shepherd, before its first exec. */
static int setup_self(const struct sbxi *in, int *sfd)
{
  close(in->chan);
  sbxi_xfer_drop_all(); /* sbx-init's transfers: their ends are not ours */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != in->self)
    _exit(1);
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  /* main.c's SIGCHLD handler would reap our children behind our back. */
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGCHLD);
  sigprocmask(SIG_BLOCK, &m, NULL);
  signal(SIGCHLD, SIG_DFL);
  *sfd = signalfd(-1, &m, SFD_CLOEXEC | SFD_NONBLOCK);
  return *sfd < 0 ? -1 : 0;
}

static int shepherd_sfd = -1;

bool sbxi_shepherd_setup(const struct sbxi *in)
{
  return shepherd_sfd >= 0 || setup_self(in, &shepherd_sfd) == 0;
}

/* Before each exec: the last one's SIGCHLDs are read, its counts reset. */
static int shepherd_ready(const struct sbxi *in)
{
  if (!sbxi_shepherd_setup(in))
    return -1;
  struct signalfd_siginfo si[8];
  while (read(shepherd_sfd, si, sizeof si) > 0)
    ;
  memset(&sbxi_reaped, 0, sizeof sbxi_reaped);
  return shepherd_sfd;
}

static void free_env(char **run_env, char **env)
{
  if (run_env == env)
    return;
  for (size_t i = 0; run_env[i]; i++)
    if (run_env[i] != env[i])
      free(run_env[i]);
  free(run_env);
}

/* After the workload was forked (pid < 0: it was not): what of its stdio
 * the shepherd keeps — the terminal's master when it relays, nothing else,
 * so the pipes reach EOF when the tree is gone. */
static void keep_stdio(int ctl, const int fds[4], struct sbxi_pty *pty, pid_t pid)
{
  if (pty) /* only the workload holds the slave: its exit hangs the master up */
    close(pty->slave);
  if (pty && pty->relay && pid > 0) {
    /* The master stays: stdin pipe → master → stdout pipe, here. */
    relay = sbxi_relay_new(pty->master, fds[0], fds[1]);
    close(fds[2]);
    return;
  }
  if (pty) {
    if (pid > 0)
      sbx_proto_send(ctl, SBX_MSG_PTY, 0, 0, NULL, 0, &pty->master, 1);
    close(pty->master);
  }
  for (int i = 0; i < 3; i++)
    close(fds[i]);
}

bool sbxi_shepherd(const struct sbxi *in, const char *cwd, char **argv, char **env,
                   const int fds[4], struct sbxi_pty *pty, const struct sbxi_code *code,
                   int back)
{
  int ctl = fds[3], sfd = shepherd_ready(in), werr;
  if (sfd < 0) {
    send_u32(ctl, SBX_MSG_ERR, (uint32_t)errno);
    return false;
  }
  if (code && (werr = code_write(in->rootfd, code)) != 0) {
    send_exec_failed(ctl, werr, 2);
    return false;
  }
  int cwdfd = sbxi_open_in_root(in->rootfd, cwd, O_RDONLY | O_DIRECTORY, 0);
  if (cwdfd < 0) {
    werr = errno;
    code_remove();
    send_exec_failed(ctl, werr, 1);
    return false;
  }
  char **const run_env = rewrite_env(in, env);
  int ep[2];
  if ((pty && sbxi_pty_open(in->rootfd, pty) < 0) || pipe2(ep, O_CLOEXEC) < 0) {
    werr = errno;
    code_remove();
    send_u32(ctl, SBX_MSG_ERR, (uint32_t)werr);
    return false;
  }
  /* vfork: the workload only sets up its fds and credentials-free state
   * and execs (or _exits), so sharing our memory until then is safe, and it
   * saves copying page tables on every exec. */
  pid_t pid = vfork();
  if (pid == 0)
    workload(argv, run_env, fds, cwdfd, ep[1], pty);
  int e = errno;
  keep_stdio(ctl, fds, pty, pid);
  close(ep[1]);
  close(cwdfd);
  free_env(run_env, env);
  if (pid < 0) {
    code_remove();
    send_u32(ctl, SBX_MSG_ERR, (uint32_t)e);
    return false;
  }
  int32_t child_err;
  ssize_t n;
  do
    n = read(ep[0], &child_err, sizeof child_err);
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  if (n == sizeof child_err) {
    sbxi_wait(pid, NULL, 0);
    code_remove();
    send_exec_failed(ctl, child_err, 0);
    return false;
  }
  send_u32(ctl, SBX_MSG_STARTED, (uint32_t)pid);
  bool again = supervise(ctl, sfd, pid, back);
  close(ctl);
  return again;
}
