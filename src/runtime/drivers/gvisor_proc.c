/* gvisor_proc.c — running runsc for the gvisor driver.
 *
 * `runsc run` is started from one long-lived spawner thread
 * (common/spawner.h): its PR_SET_PDEATHSIG fires when the *thread* that
 * forked it exits, so forking from request threads would kill sandboxes
 * when a worker thread ends.  The
 * child waits on a pipe until the parent has moved it into the sandbox's
 * cgroup, so runsc and everything it starts (sandbox, gofer, the ptrace
 * stubs) are charged to and killed with that cgroup.  Between fork and exec
 * the child makes async-signal-safe calls only (the daemon is threaded).
 *
 * Short commands (kill, delete) run with posix_spawn from the calling
 * thread, bounded in time.  The start probes go through the spawner too
 * (sbx_gv_spawn_env), into a cgroup of their own: a hung probe is killed
 * with its whole tree, and one the daemon's death interrupts dies with it.
 *
 * Egress allowlists: a netns holder (cg_spawn.h) gives the sandbox its
 * netns before runsc starts, so the net module can link it first (runsc
 * copies the interfaces at start).  It lives as long as the sandbox. */
#include "runtime/drivers/gvisor_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/spawner.h"
#include "common/util.h"
#include "runtime/drivers/cg_spawn.h"

extern char **environ;

static char *const runsc_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

struct gv_req {
  char *const *argv;
  char *const *envp; /* NULL: runsc_env */
  int in_fd, log_fd;
  bool hide_net_sysctl;
  struct sbx_cgroup *cg;
};

static struct sbx_spawner spawner = SBX_SPAWNER_INIT("gvisor", NULL);

/* For `runsc run --network=sandbox`: a mount namespace of its own (a
 * slave of the host's, so the host's unmounts still reach it) whose
 * /proc/sys is a read-only tmpfs holding binds of the real /proc/sys/<dir>
 * for every dir but net.  Why: this runsc (Debian's, 2022) decides "is this
 * the host's netns?" by whether /proc/sys/net/core/rmem_default exists —
 * which since Linux 6.x it does in every netns (gVisor issue 10704) — and
 * refuses the sandbox's own netns.  runsc reads no net sysctl otherwise;
 * the gofer and the sandbox build their own roots and procfs.
 * Async-signal-safe calls only (forked from the threaded daemon). */
static int hide_net_sysctl(void)
{
  static const char *const keep[] = {"abi", "crypto", "debug", "dev",
                                     "fs",  "kernel", "user",  "vm"};
  enum { N = sizeof keep / sizeof keep[0] };
  int fds[N];
  char path[32];
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return -1;
  for (int i = 0; i < N; i++) {
    memcpy(path, "/proc/sys/", 10);
    size_t n = strlen(keep[i]);
    memcpy(path + 10, keep[i], n + 1);
    fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (fds[i] < 0 && errno != ENOENT)
      return -1;
  }
  if (mount("sbxgv-sys", "/proc/sys", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "mode=0555,size=16k") < 0)
    return -1;
  for (int i = 0; i < N; i++) {
    if (fds[i] < 0)
      continue;
    memcpy(path, "/proc/sys/", 10);
    memcpy(path + 10, keep[i], strlen(keep[i]) + 1);
    if (mkdir(path, 0555) < 0 ||
        syscall(SYS_move_mount, fds[i], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
      return -1;
    close(fds[i]);
  }
  return mount(NULL, "/proc/sys", NULL,
               MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static int spawn_req(struct gv_req *r, pid_t *pid_out, struct sbx_error *err)
{
  struct sbx_cg_spawn s = {.argv = r->argv,
                           .envp = r->envp ? r->envp : runsc_env,
                           .what = "gvisor",
                           .fds = {r->in_fd, r->log_fd, r->log_fd},
                           .nfds = 3,
                           .cg = r->cg,
                           .pre_exec = r->hide_net_sysctl ? hide_net_sysctl : NULL,
                           .pre_exec_msg =
                               "sandboxd: cannot give runsc a /proc/sys without net\n"};
  if (sbx_cg_spawn(&spawner, &s, err) < 0)
    return -1;
  *pid_out = s.pid;
  return 0;
}

int sbx_gv_spawn(char *const argv[], int in_fd, int log_fd, struct sbx_cgroup *cg, bool netns,
                 pid_t *pid_out, struct sbx_error *err)
{
  struct gv_req r = {
      .argv = argv, .in_fd = in_fd, .log_fd = log_fd, .cg = cg, .hide_net_sysctl = netns};
  return spawn_req(&r, pid_out, err);
}

int sbx_gv_spawn_env(char *const argv[], char *const envp[], int in_fd, int log_fd,
                     struct sbx_cgroup *cg, pid_t *pid_out, struct sbx_error *err)
{
  struct gv_req r = {.argv = argv, .envp = envp, .in_fd = in_fd, .log_fd = log_fd, .cg = cg};
  return spawn_req(&r, pid_out, err);
}

void sbx_gv_first_line_fd(int fd, char *msg, size_t msglen)
{
  char buf[1024];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  /* runsc logs may start with blank lines; take the first non-empty one */
  char *s = buf;
  while (*s == '\n' || *s == ' ')
    s++;
  s[strcspn(s, "\n")] = '\0';
  snprintf(msg, msglen, "%s", s);
}

void sbx_gv_first_line(const char *path, char *msg, size_t msglen)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  msg[0] = '\0';
  if (fd >= 0)
    sbx_gv_first_line_fd(fd, msg, msglen);
}

int sbx_gv_run(char *const argv[], unsigned timeout_ms, char *msg, size_t msglen)
{
  msg[0] = '\0';
  _cleanup_close_ int out = memfd_create("runsc-err", MFD_CLOEXEC);
  _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (out < 0 || null_fd < 0) {
    snprintf(msg, msglen, "memfd/devnull: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, null_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, out, 2);
  pid_t pid;
  int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, runsc_env);
  posix_spawn_file_actions_destroy(&fa);
  if (e) {
    snprintf(msg, msglen, "%s: %s", argv[0], strerror(e));
    return -1;
  }
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      snprintf(msg, msglen, "waitpid: %s", strerror(errno));
      return -1;
    }
    if (sbx_now_ms() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      snprintf(msg, msglen, "%s did not finish within %u ms", argv[0], timeout_ms);
      return -1;
    }
    usleep(2000);
  }
  sbx_gv_first_line_fd(out, msg, msglen);
  return status;
}
