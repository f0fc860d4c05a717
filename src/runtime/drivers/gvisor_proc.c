/* gvisor_proc.c — running runsc for the gvisor driver.
 *
 * `runsc run` is started from one long-lived spawner thread: its
 * PR_SET_PDEATHSIG fires when the *thread* that forked it exits, so forking
 * from request threads would kill sandboxes when a worker thread ends.  The
 * child waits on a pipe until the parent has moved it into the sandbox's
 * cgroup, so runsc and everything it starts (sandbox, gofer, the ptrace
 * stubs) are charged to and killed with that cgroup.  Between fork and exec
 * the child makes async-signal-safe calls only (the daemon is threaded).
 *
 * Short commands (probe, kill, delete) run with posix_spawn from the
 * calling thread, bounded in time. */
#include "runtime/drivers/gvisor_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

extern char **environ;

static char *const runsc_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

struct gv_req {
  char *const *argv;
  int in_fd, log_fd;
  struct sbx_cgroup *cg;
  pid_t pid;
  int rc;
  struct sbx_error err;
  bool done;
};

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static struct gv_req *pending;
static bool started;

/* The child: stdio, death signal, wait for "go" (cgroup joined), exec. */
static _Noreturn void child_main(const struct gv_req *r, int go_fd)
{
  char c;
  if (dup2(r->in_fd, 0) < 0 || dup2(r->log_fd, 1) < 0 || dup2(r->log_fd, 2) < 0)
    _exit(126);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  setsid();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (read(go_fd, &c, 1) != 1)
    _exit(126); /* the parent gave up: never start runsc outside the cgroup */
  syscall(SYS_close_range, 3u, ~0u, 0u);
  execve(r->argv[0], r->argv, runsc_env);
  _exit(127);
}

static void do_spawn(struct gv_req *r)
{
  int go[2];
  if (pipe2(go, O_CLOEXEC) < 0) {
    r->rc = sbx_err_sys(&r->err, errno, "gvisor: pipe");
    return;
  }
  pid_t pid = fork();
  if (pid == 0)
    child_main(r, go[0]);
  close(go[0]);
  if (pid < 0) {
    close(go[1]);
    r->rc = sbx_err_sys(&r->err, errno, "gvisor: fork");
    return;
  }
  if (sbx_cg_attach(r->cg, pid, &r->err) < 0 || write(go[1], "g", 1) != 1) {
    if (!r->err.msg[0])
      sbx_err_sys(&r->err, errno, "gvisor: releasing runsc");
    close(go[1]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    r->rc = -1;
    return;
  }
  close(go[1]);
  r->pid = pid;
  r->rc = 0;
}

static void *spawner_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&q_lock);
  for (;;) {
    while (!pending)
      pthread_cond_wait(&q_cond, &q_lock);
    struct gv_req *r = pending;
    pthread_mutex_unlock(&q_lock);
    do_spawn(r);
    pthread_mutex_lock(&q_lock);
    pending = NULL;
    r->done = true;
    pthread_cond_broadcast(&done_cond);
  }
  return NULL;
}

static int start_spawner(struct sbx_error *err)
{
  if (started)
    return 0;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  int e = pthread_create(&t, &a, spawner_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&a);
  if (e)
    return sbx_err_sys(err, e, "gvisor: starting the spawner thread");
  started = true;
  return 0;
}

int sbx_gv_spawn(char *const argv[], int in_fd, int log_fd, struct sbx_cgroup *cg,
                 pid_t *pid_out, struct sbx_error *err)
{
  struct gv_req r = {.argv = argv, .in_fd = in_fd, .log_fd = log_fd, .cg = cg};
  pthread_mutex_lock(&q_lock);
  if (start_spawner(err) < 0) {
    pthread_mutex_unlock(&q_lock);
    return -1;
  }
  while (pending)
    pthread_cond_wait(&done_cond, &q_lock);
  pending = &r;
  pthread_cond_signal(&q_cond);
  while (!r.done)
    pthread_cond_wait(&done_cond, &q_lock);
  pthread_mutex_unlock(&q_lock);
  if (r.rc < 0) {
    if (err)
      *err = r.err;
    return -1;
  }
  *pid_out = r.pid;
  return 0;
}

int sbx_gv_reap(pid_t pid, unsigned timeout_ms, bool kill_first)
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

static void first_line_fd(int fd, char *msg, size_t msglen)
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
    first_line_fd(fd, msg, msglen);
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
  first_line_fd(out, msg, msglen);
  return status;
}
