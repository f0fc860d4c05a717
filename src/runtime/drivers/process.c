/* process.c — the `process` driver: development only, no isolation.
 *
 * A sandbox is a host directory /run/sandboxd/process-<hash of state dir>/<id>/ (root-owned,
 * with work/ and tmp/ owned by the sandbox user) and an sbx-init started
 * with `--root <dir>` (so "/work/x" in the API is <dir>/work/x) and, when
 * the daemon is root, `--uid 65534 --gid 65534`.  Limits are rlimits only:
 * RLIMIT_AS from memory, RLIMIT_FSIZE from disk, RLIMIT_NOFILE 1024,
 * RLIMIT_CORE 0.  RLIMIT_NPROC is per *user* (every process sandbox and
 * every `nobody` process on the host share uid 65534), so pids is not
 * enforced.  Workloads see host paths; every sandbox shares one uid and can
 * signal the others.  Hence off unless --enable-unsafe-process-driver. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "init/launch.h"
#include "runtime/driver.h"

#define NOBODY 65534
#define READY_TIMEOUT_MS 5000
#define EXIT_GRACE_MS 2000

static char sandboxes_dir[PATH_MAX];
static char init_path[PATH_MAX];
static bool probed_ok;

struct proc_priv {
  char dir[PATH_MAX];
};

static int process_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  probed_ok = false;
  if (!env->unsafe_process_enabled) {
    snprintf(why, whylen,
             "process driver is unsafe and disabled; start sandboxd with "
             "--enable-unsafe-process-driver");
    return -1;
  }
  if (!env->init_path || access(env->init_path, X_OK) < 0) {
    snprintf(why, whylen, "sbx-init not found or not executable at %s",
             env->init_path ? env->init_path : "(unset)");
    return -1;
  }
  /* Workloads see host paths and run as an unprivileged uid, so their
   * directories must be reachable by that uid: not under the state dir
   * (0700, maybe below other private dirs) but under /run, one base per
   * state dir (the name hashes its path) so daemons never share one. */
  unsigned char h[8];
  char hex[17];
  crypto_generichash(h, sizeof h, (const unsigned char *)env->state_dir, strlen(env->state_dir),
                     NULL, 0);
  sbx_hex(h, sizeof h, hex);
  if (sbx_mkdir_p("/run/sandboxd", 0711) < 0 || chmod("/run/sandboxd", 0711) < 0) {
    snprintf(why, whylen, "cannot create /run/sandboxd: %s", strerror(errno));
    return -1;
  }
  int n1 = snprintf(sandboxes_dir, sizeof sandboxes_dir, "/run/sandboxd/process-%s", hex);
  int n2 = snprintf(init_path, sizeof init_path, "%s", env->init_path);
  if (n1 < 0 || (size_t)n1 >= sizeof sandboxes_dir || n2 < 0 || (size_t)n2 >= sizeof init_path ||
      sbx_mkdir_p(sandboxes_dir, 0711) < 0) {
    snprintf(why, whylen, "cannot use %s", sandboxes_dir);
    return -1;
  }
  probed_ok = true;
  return 0;
}

static bool id_ok(const char *id)
{
  size_t n = strlen(id);
  if (n == 0 || n > 80)
    return false;
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* <dir>, <dir>/work, <dir>/tmp; the last two belong to the sandbox user. */
static int make_dirs(const char *dir, uid_t uid, struct sbx_error *err)
{
  if (mkdir(dir, 0755) < 0)
    return sbx_err_set(err, errno == EEXIST ? SBX_E_CONFLICT : SBX_E_INTERNAL, errno,
                       "mkdir %s: %s", dir, strerror(errno));
  const char *subs[] = {"work", "tmp"};
  for (int i = 0; i < 2; i++) {
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/%s", dir, subs[i]);
    if (mkdir(p, 0755) < 0 || (geteuid() == 0 && chown(p, uid, uid) < 0))
      return sbx_err_sys(err, errno, "mkdir %s", p);
  }
  return 0;
}

static void set_limit(int res, uint64_t v)
{
  struct rlimit rl = {.rlim_cur = (rlim_t)v, .rlim_max = (rlim_t)v};
  setrlimit(res, &rl);
}

/* In the forked child: only async-signal-safe calls until execv. */
static _Noreturn void child_exec(int chan, int devnull, const struct sbx_limits *lim,
                                 char *const argv[])
{
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (lim->memory_bytes)
    set_limit(RLIMIT_AS, lim->memory_bytes);
  if (lim->disk_bytes)
    set_limit(RLIMIT_FSIZE, lim->disk_bytes);
  set_limit(RLIMIT_NOFILE, 1024);
  set_limit(RLIMIT_CORE, 0);
  if (devnull >= 0)
    dup2(devnull, 0);
  if (chan == 3)
    fcntl(3, F_SETFD, 0); /* dup2(3, 3) would keep CLOEXEC */
  else if (dup2(chan, 3) < 0)
    _exit(127);
  execv(argv[0], argv);
  _exit(127);
}

/* PR_SET_PDEATHSIG (set by sbx-init when it is not PID 1) fires when the
 * *thread* that forked it exits, not the daemon.  API worker threads come
 * and go, so every fork happens on one long-lived spawner thread. */
struct spawn_req {
  char *const *argv;
  int chan, devnull;
  const struct sbx_limits *lim;
  pid_t pid;
  int err;
  bool done;
};

static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawn_cond = PTHREAD_COND_INITIALIZER;
static struct spawn_req *spawn_pending;
static pthread_once_t spawn_once = PTHREAD_ONCE_INIT;
static bool spawner_ok;

static void *spawner(void *arg)
{
  pthread_mutex_lock(&spawn_lock);
  for (;;) {
    while (!spawn_pending)
      pthread_cond_wait(&spawn_cond, &spawn_lock);
    struct spawn_req *r = spawn_pending;
    spawn_pending = NULL;
    r->pid = fork();
    r->err = errno;
    if (r->pid == 0)
      child_exec(r->chan, r->devnull, r->lim, r->argv);
    if (r->pid > 0)
      setpgid(r->pid, r->pid); /* both sides: no window where kill(-pid) misses */
    r->done = true;
    pthread_cond_broadcast(&spawn_cond);
  }
  return NULL;
}

static void start_spawner(void)
{
  pthread_attr_t a;
  pthread_t t;
  sigset_t all, old;
  sigfillset(&all);
  /* The spawner never handles signals; its children start with them
   * blocked until sbx-init sets its own mask. */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  spawner_ok = pthread_create(&t, &a, spawner, NULL) == 0;
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static pid_t spawn_init(const char *dir, int chan, const struct sbx_limits *lim,
                        struct sbx_error *err)
{
  char uid[16], gid[16];
  snprintf(uid, sizeof uid, "%d", NOBODY);
  snprintf(gid, sizeof gid, "%d", NOBODY);
  char *argv[] = {init_path, "--root", (char *)dir, "--uid", uid, "--gid", gid, NULL};
  if (geteuid() != 0)
    argv[3] = NULL; /* not root: the sandbox runs as the daemon's user */
  _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  pthread_once(&spawn_once, start_spawner);
  if (!spawner_ok)
    return sbx_err_sys(err, EAGAIN, "process driver spawner thread");
  struct spawn_req req = {.argv = argv, .chan = chan, .devnull = devnull, .lim = lim};
  pthread_mutex_lock(&spawn_lock);
  while (spawn_pending)
    pthread_cond_wait(&spawn_cond, &spawn_lock);
  spawn_pending = &req;
  pthread_cond_broadcast(&spawn_cond);
  while (!req.done)
    pthread_cond_wait(&spawn_cond, &spawn_lock);
  pthread_mutex_unlock(&spawn_lock);
  if (req.pid < 0)
    return sbx_err_sys(err, req.err, "fork sbx-init");
  return req.pid;
}

static int write_pidfile(const char *dir, pid_t pid, struct sbx_error *err)
{
  char p[PATH_MAX + 16], buf[32];
  if (snprintf(p, sizeof p, "%s/init.pid", dir) >= (int)sizeof p)
    return sbx_err_set(err, SBX_E_INTERNAL, ENAMETOOLONG, "path too long");
  int n = snprintf(buf, sizeof buf, "%d\n", (int)pid);
  _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || sbx_write_all(fd, buf, (size_t)n) != n)
    return sbx_err_sys(err, errno, "write %s", p);
  return 0;
}

/* Waits up to ms for pid to exit; true if reaped (or not ours any more). */
static bool wait_exit(pid_t pid, uint64_t ms)
{
  uint64_t end = sbx_now_ms() + ms;
  for (;;) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD))
      return true;
    if (sbx_now_ms() >= end)
      return false;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void kill_init(pid_t pid, uint64_t grace_ms)
{
  if (pid <= 0)
    return;
  /* sbx-init kills its own tree when its channel closes; give it a moment,
   * then take out its process group and itself regardless. */
  if (!wait_exit(pid, grace_ms)) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  } else
    kill(-pid, SIGKILL);
}

static void teardown(struct sbx_sandbox *sb, struct proc_priv *priv, uint64_t grace_ms)
{
  if (sb->init_fd >= 0)
    close(sb->init_fd);
  sb->init_fd = -1;
  kill_init(sb->init_pid, grace_ms);
  if (priv && priv->dir[0] && sbx_rm_rf(priv->dir) < 0)
    sbx_warn("process", "cannot remove %s: %s", priv->dir, strerror(errno));
  free(priv);
  sb->priv = NULL;
  sbx_sandbox_free(sb);
}

static int start(struct sbx_sandbox *sb, struct proc_priv *priv, struct sbx_error *err)
{
  uid_t uid = geteuid() == 0 ? NOBODY : geteuid();
  if (make_dirs(priv->dir, uid, err) < 0)
    return -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_err_sys(err, errno, "socketpair");
  sb->init_fd = sv[0];
  pid_t pid = spawn_init(priv->dir, sv[1], &sb->limits, err);
  close(sv[1]);
  if (pid < 0)
    return -1;
  sb->init_pid = pid;
  if (sbx_init_handshake(sb->init_fd, READY_TIMEOUT_MS, err) < 0)
    return sbx_err_prefix(err, "process sandbox %s", sb->id);
  return write_pidfile(priv->dir, pid, err);
}

static int process_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                          struct sbx_error *err)
{
  *out = NULL;
  if (!probed_ok)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "process driver is not enabled");
  if (!spec->id || !id_ok(spec->id))
    return sbx_err_set(err, SBX_E_INVALID, 0, "bad sandbox id");
  struct sbx_sandbox *sb = sbx_sandbox_alloc(&sbx_drv_process, spec);
  struct proc_priv *priv = calloc(1, sizeof *priv);
  if (!sb || !priv) {
    free(priv);
    sbx_sandbox_free(sb);
    return sbx_err_sys(err, ENOMEM, "process sandbox");
  }
  int n = snprintf(priv->dir, sizeof priv->dir, "%s/%s", sandboxes_dir, spec->id);
  sb->priv = priv;
  snprintf(sb->host_root, sizeof sb->host_root, "%s", priv->dir);
  /* root_desc is for logs: the tail of the dir is the informative part */
  size_t dl = strlen(priv->dir), keep = sizeof sb->root_desc - 1;
  memcpy(sb->root_desc, priv->dir + (dl > keep ? dl - keep : 0), (dl > keep ? keep : dl) + 1);
  if (n < 0 || (size_t)n >= sizeof priv->dir) {
    priv->dir[0] = '\0';
    teardown(sb, priv, 0);
    return sbx_err_set(err, SBX_E_INTERNAL, ENAMETOOLONG, "state dir path too long");
  }
  if (start(sb, priv, err) < 0) {
    bool existed = err && err->code == SBX_E_CONFLICT;
    if (existed)
      priv->dir[0] = '\0'; /* not ours: never remove it */
    teardown(sb, priv, 0);
    return -1;
  }
  *out = sb;
  return 0;
}

static void process_destroy(struct sbx_sandbox *sb)
{
  if (sb)
    teardown(sb, sb->priv, EXIT_GRACE_MS);
}

/* Does pid's command line say it is our sbx-init serving dir?  Readable
 * even when /proc/PID/exe is not (sbx-init is non-dumpable, so only root
 * may read its exe link). */
static bool cmdline_matches(pid_t pid, const char *dir)
{
  char p[64], buf[2 * PATH_MAX + 64];
  snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
  _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (n <= 0)
    return false;
  buf[n] = '\0';
  const char *a0 = buf, *a1 = a0 + strlen(a0) + 1;
  const char *a2 = a1 < buf + n ? a1 + strlen(a1) + 1 : buf + n;
  return a2 < buf + n && !strcmp(a0, init_path) && !strcmp(a1, "--root") && !strcmp(a2, dir);
}

/* Is pid our sbx-init for dir?  (A recycled pid must not be killed.) */
static bool is_our_init(pid_t pid, const char *dir)
{
  char link[64], exe[PATH_MAX], want[PATH_MAX];
  snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(link, exe, sizeof exe - 1);
  if (n > 0 && realpath(init_path, want)) {
    exe[n] = '\0';
    size_t wl = strlen(want);
    if (strncmp(exe, want, wl) || (exe[wl] != '\0' && strcmp(exe + wl, " (deleted)")))
      return false;
  }
  return cmdline_matches(pid, dir);
}

static void recover_one(const char *dir)
{
  char p[PATH_MAX + 16], buf[32] = "";
  if (snprintf(p, sizeof p, "%s/init.pid", dir) >= (int)sizeof p)
    return;
  _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 && read(fd, buf, sizeof buf - 1) > 0) {
    long pid = strtol(buf, NULL, 10);
    if (pid > 1 && pid < INT_MAX && is_our_init((pid_t)pid, dir)) {
      kill(-(pid_t)pid, SIGKILL);
      kill((pid_t)pid, SIGKILL);
    }
  }
  if (sbx_rm_rf(dir) < 0)
    sbx_warn("process", "recover: cannot remove %s: %s", dir, strerror(errno));
}

static int process_recover(const struct sbx_driver_env *env)
{
  if (!probed_ok)
    return 0;
  DIR *d = opendir(sandboxes_dir);
  if (!d)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !id_ok(e->d_name))
      continue;
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/%s", sandboxes_dir, e->d_name) >= (int)sizeof dir)
      continue;
    recover_one(dir);
    n++;
  }
  closedir(d);
  return n;
}

const struct sbx_driver sbx_drv_process = {
    .abi = SBX_DRIVER_ABI,
    .name = "process",
    .klass = "none",
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES,
    .probe = process_probe,
    .create = process_create,
    .destroy = process_destroy,
    .recover = process_recover,
};
