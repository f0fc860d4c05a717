/* cg_spawn.c — a driver's helper program started inside a cgroup
 * (cg_spawn.h). */
#include "runtime/drivers/cg_spawn.h"

#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <poll.h>
#include <net/if.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* Puts r->fds[i] on fd i.  Each goes above the target range first, so a
 * source that is itself a target number is not overwritten too early. */
static int place_fds(const struct sbx_cg_spawn *r)
{
  int tmp[SBX_CG_SPAWN_MAX_FDS];
  for (int i = 0; i < r->nfds; i++)
    if ((tmp[i] = fcntl(r->fds[i], F_DUPFD, SBX_CG_SPAWN_MAX_FDS + 3)) < 0)
      return -1;
  for (int i = 0; i < r->nfds; i++)
    if (dup2(tmp[i], i) < 0)
      return -1;
  return 0;
}

/* The child: its fds, death signal, wait for "go" (cgroup joined), exec. */
static _Noreturn void child_main(const struct sbx_cg_spawn *r, int go_fd)
{
  char c;
  if (place_fds(r) < 0)
    _exit(126);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  setsid();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (read(go_fd, &c, 1) != 1)
    _exit(126); /* the parent gave up: never start outside the cgroup */
  if (r->pre_exec && r->pre_exec() != 0) {
    if (r->pre_exec_msg) {
      size_t n = 0;
      while (r->pre_exec_msg[n])
        n++;
      (void)!write(2, r->pre_exec_msg, n);
    }
    _exit(125);
  }
  syscall(SYS_close_range, (unsigned)r->nfds, ~0u, 0u);
  execve(r->argv[0], r->argv, r->envp);
  _exit(127);
}

static int do_spawn(void *arg, struct sbx_error *err)
{
  struct sbx_cg_spawn *r = arg;
  int go[2];
  if (pipe2(go, O_CLOEXEC) < 0)
    return sbx_err_sys(err, errno, "%s: pipe", r->what);
  pid_t pid = fork();
  if (pid == 0)
    child_main(r, go[0]);
  close(go[0]);
  if (pid < 0) {
    close(go[1]);
    return sbx_err_sys(err, errno, "%s: fork", r->what);
  }
  if (sbx_cg_attach(r->cg, pid, err) < 0 || write(go[1], "g", 1) != 1) {
    if (!err->msg[0])
      sbx_err_sys(err, errno, "%s: releasing %s", r->what, r->argv[0]);
    close(go[1]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  close(go[1]);
  r->pid = pid;
  return 0;
}

int sbx_cg_spawn(struct sbx_spawner *s, struct sbx_cg_spawn *r, struct sbx_error *err)
{
  if (r->nfds < 0 || r->nfds > SBX_CG_SPAWN_MAX_FDS)
    return sbx_err_set(err, SBX_E_INTERNAL, EINVAL, "%s: too many fds for a helper", r->what);
  return sbx_spawner_call(s, do_spawn, r, err);
}

int sbx_cg_spawn_reap(pid_t pid, unsigned timeout_ms, bool kill_first)
{
  if (pid <= 0)
    return 0;
  if (kill_first)
    kill(pid, SIGKILL);
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  unsigned nap = 1;
  for (;;) {
    pid_t w = waitpid(pid, NULL, WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD))
      return 0;
    if (sbx_now_ms() >= deadline)
      return -1;
    usleep(nap * 1000);
    nap = nap < 16 ? nap * 2 : nap;
  }
}

/* ---- network namespace holder (egress allowlists) ---------------------- */

/* The holder: alone with its end of the socketpair (fd 3; every other fd
 * the threaded daemon had is closed at once, so no sandbox channel or
 * listening socket is kept open by it), a netns of its own, "ready", then
 * parked until EOF — the daemon closing its end, or dying. */
static _Noreturn void holder_main(int fd)
{
  char c = '0';
  if (fd != 3 && dup2(fd, 3) < 0)
    _exit(126);
  syscall(SYS_close_range, 4u, ~0u, 0u);
  /* lo up: runsc hands gVisor only the interfaces that are up, and its
   * loopback is the netns's lo (a microVM's bridge ignores it) */
  struct ifreq ifr = {.ifr_name = "lo"};
  int s = -1;
  if (unshare(CLONE_NEWNET) == 0 && (s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0 &&
      ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) == 0)
      c = '1';
  }
  if (s >= 0)
    close(s);
  if (write(3, &c, 1) != 1 || c != '1')
    _exit(1);
  while (read(3, &c, 1) != 0) /* data or EINTR: keep waiting for EOF */
    ;
  _exit(0);
}

int sbx_cg_netns_hold(struct sbx_cgroup *cg, pid_t *pid_out, int *fd_out, struct sbx_error *err)
{
  *pid_out = 0;
  *fd_out = -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_err_sys(err, errno, "netns holder socketpair");
  pid_t pid = fork();
  if (pid == 0)
    holder_main(sv[1]);
  int e = errno;
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return sbx_err_sys(err, e, "fork netns holder");
  }
  /* Charged to and killed with the sandbox's cgroup (also by recovery). */
  if (cg && sbx_cg_attach(cg, pid, err) < 0)
    goto fail;
  struct pollfd p = {.fd = sv[0], .events = POLLIN};
  char c = 0;
  if (poll(&p, 1, 5000) != 1 || read(sv[0], &c, 1) != 1 || c != '1') {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                "could not make a network namespace for the sandbox");
    goto fail;
  }
  *pid_out = pid;
  *fd_out = sv[0];
  return 0;
fail:
  close(sv[0]);
  sbx_cg_spawn_reap(pid, 2000, true);
  return -1;
}

void sbx_cg_netns_release(pid_t *pid, int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
  /* EOF ends it; a holder that does not go within the grace is killed */
  if (*pid > 0 && sbx_cg_spawn_reap(*pid, 1000, false) < 0 &&
      sbx_cg_spawn_reap(*pid, 2000, true) < 0)
    sbx_warn("driver", "netns holder %d not reaped", (int)*pid);
  *pid = 0;
}
