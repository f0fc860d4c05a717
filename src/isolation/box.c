/* box.c — one walled sandbox process from the host's side: its cgroup,
 * uid range, pidfd and daemon channel.  Creation is fail-closed: any step
 * failing (here or in the child, reported by step name) kills and reaps
 * the child, removes the cgroup and frees the uid range before returning. */
#include "isolation/iso.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#define EXEC_TIMEOUT_MS 10000

static char *const default_argv[] = {"sbx-init", "--root", "/", NULL};
static char *const empty_envp[] = {NULL};

static struct sbx_iso_plan host_layout;

void sbx_iso_host_layout(struct sbx_iso_plan *p)
{
  static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
  struct stat st;
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
    char path[32], target[64];
    snprintf(path, sizeof path, "/%s", tops[i]);
    if (lstat(path, &st) < 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(path, target, sizeof target - 1);
      if (n <= 0 || p->nlinks >= SBX_PLAN_MAX_LINKS)
        continue;
      target[n] = '\0';
      snprintf(p->links[p->nlinks].name, sizeof p->links[0].name, "%s", tops[i]);
      snprintf(p->links[p->nlinks++].target, sizeof p->links[0].target, "%s", target);
    } else if (S_ISDIR(st.st_mode) && p->nrobinds < SBX_PLAN_MAX_ROBINDS) {
      snprintf(p->robinds[p->nrobinds++], sizeof p->robinds[0], "%s",
               tops[i]); /* non-merged /usr */
    }
  }
  p->have_ldcache = stat("/etc/ld.so.cache", &st) == 0 && S_ISREG(st.st_mode);
  p->have_certs = stat("/etc/ssl/certs", &st) == 0 && S_ISDIR(st.st_mode);
  p->have_alternatives = stat("/etc/alternatives", &st) == 0 && S_ISDIR(st.st_mode);
  host_layout = *p;
}

void sbx_iso_plan_fill(struct sbx_iso_plan *p, const struct sbx_iso_limits *lim)
{
  *p = host_layout;
  uint64_t disk = lim->disk_bytes ? lim->disk_bytes : SBX_ISO_DEFAULT_DISK;
  uint64_t inodes = disk / 16384;
  inodes = inodes < 1024 ? 1024 : inodes > 1048576 ? 1048576 : inodes;
  snprintf(p->root_opts, sizeof p->root_opts, "mode=0755,size=1m,nr_inodes=4096");
  snprintf(p->tmp_opts, sizeof p->tmp_opts, "mode=1777,size=%llu,nr_inodes=%llu",
           (unsigned long long)disk, (unsigned long long)inodes);
  p->run_uid = SBX_ISO_SANDBOX_UID;
  p->run_gid = SBX_ISO_SANDBOX_GID;
  snprintf(p->work_opts, sizeof p->work_opts, "mode=0755,uid=%d,gid=%d,size=%llu,nr_inodes=%llu",
           SBX_ISO_SANDBOX_UID, SBX_ISO_SANDBOX_GID, (unsigned long long)disk,
           (unsigned long long)inodes);
  /* An image's upper tmpfs (copy-ups, new files in the root): one more
   * tmpfs sized by disk, like /tmp and /work (docs/isolation.md §7). */
  p->upper_size = disk;
  p->upper_inodes = inodes;
  p->nofile = 4096;
  p->nproc = lim->pids ? lim->pids : 16384;
  /* No RLIMIT_FSIZE: the tmpfs size already caps files, and SIGXFSZ would
   * kill writers where ENOSPC is the documented outcome. */
  p->fsize = RLIM_INFINITY;
}

/* Waits for the child's verdict: EOF = execveat succeeded (the sync socket
 * was close-on-exec), a report = the step that failed. */
static int await_exec(int sync_fd, pid_t pid, struct sbx_error *err)
{
  struct pollfd pf = {.fd = sync_fd, .events = POLLIN};
  int r;
  do
    r = poll(&pf, 1, EXEC_TIMEOUT_MS);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, ETIMEDOUT,
                       "sandbox setup did not finish within %d ms", EXEC_TIMEOUT_MS);
  struct sbx_iso_report rep;
  ssize_t n = recv(sync_fd, &rep, sizeof rep, 0);
  if (n == 0)
    return 0;
  if (n != sizeof rep)
    return sbx_err_sys(err, n < 0 ? errno : EPROTO, "sandbox setup: reading child %d", (int)pid);
  /* A host that cannot do a step at all (no userns mounts, …) is
   * "runtime unavailable"; the message names the step either way. */
  return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, rep.errnum,
                     "sandbox setup failed at step '%s': %s",
                     sbx_iso_step_name((enum sbx_iso_step)rep.step), strerror(rep.errnum));
}

static int open_devnull(void) { return open("/dev/null", O_RDWR | O_CLOEXEC); }

static int launch(struct sbx_iso_box *box, const struct sbx_iso_spec *spec,
                  struct sbx_error *err)
{
  int chan[2], sync[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0)
    return sbx_err_sys(err, errno, "socketpair");
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
    close(chan[0]);
    close(chan[1]);
    return sbx_err_sys(err, errno, "socketpair");
  }
  _cleanup_close_ int chan_child = chan[1], sync_parent = sync[0], sync_child = sync[1];
  _cleanup_close_ int null_fd = open_devnull();
  box->chan_fd = chan[0];
  struct sbx_iso_plan plan;
  sbx_iso_plan_fill(&plan, &spec->limits);
  plan.sync_fd = sync_child;
  plan.chan_fd = chan_child;
  plan.exec_fd = spec->exec_fd;
  for (int i = 0; i < 3; i++)
    plan.stdio[i] = spec->stdio[i] >= 0 ? spec->stdio[i] : null_fd;
  plan.argv = spec->argv ? spec->argv : default_argv;
  plan.envp = spec->envp ? spec->envp : empty_envp;
  plan.layers = spec->layers;
  plan.nlayers = spec->nlayers;
  if (spec->run_uid && spec->run_gid) { /* the image's User; /work is theirs */
    if (spec->run_uid > 65535 || spec->run_gid > 65535)
      return sbx_err_set(err, SBX_E_INVALID, 0, "user %u:%u is outside the sandbox's ids",
                         spec->run_uid, spec->run_gid);
    plan.run_uid = spec->run_uid;
    plan.run_gid = spec->run_gid;
    uint64_t disk = spec->limits.disk_bytes ? spec->limits.disk_bytes : SBX_ISO_DEFAULT_DISK;
    snprintf(plan.work_opts, sizeof plan.work_opts,
             "mode=0755,uid=%u,gid=%u,size=%llu,nr_inodes=%llu", plan.run_uid, plan.run_gid,
             (unsigned long long)disk, (unsigned long long)plan.upper_inodes);
  }
  if (null_fd < 0)
    return sbx_err_sys(err, errno, "open /dev/null");
  if (sbx_spawn_clone(&plan, &box->cg, box->uid_base, &box->pid, &box->pidfd, sync_parent, err) <
      0)
    return -1;
  /* Our copies of the child's ends must go, or EOF never comes. */
  close(steal_fd(&chan_child));
  close(steal_fd(&sync_child));
  return await_exec(sync_parent, box->pid, err);
}

int sbx_iso_box_create(const struct sbx_iso_spec *spec, struct sbx_iso_box **out,
                       struct sbx_error *err)
{
  struct sbx_iso_box *box = calloc(1, sizeof *box);
  if (!box)
    return sbx_err_sys(err, ENOMEM, "box");
  box->pidfd = box->chan_fd = -1;
  box->cg.v2_dirfd = -1;
  box->uid_base = (uid_t)-1;
  snprintf(box->leaf, sizeof box->leaf, "%s", spec->leaf);
  box->disk_bytes = spec->limits.disk_bytes ? spec->limits.disk_bytes : SBX_ISO_DEFAULT_DISK;
  /* Image layers that are (or may turn out) not idmapped: the lowest free
   * uid range, and their shifted copies for it made here rather than on
   * the spawner thread, which every sandbox's start waits for. */
  bool shifted = spec->nlayers > 0 && strcmp(sbx_overlay_layer_idmap(), "idmapped") != 0;
  if (sbx_iso_init(err) < 0 || sbx_userns_slot_alloc(&box->uid_base, shifted, err) < 0 ||
      (shifted && sbx_overlay_prepare(spec->layers, spec->nlayers, box->uid_base, err) < 0))
    goto fail;
  if (sbx_cg_create(sbx_cg_host_default(), spec->leaf, &spec->limits, &box->cg, err) < 0)
    goto fail;
  if (launch(box, spec, err) < 0)
    goto fail;
  *out = box;
  return 0;
fail:
  sbx_err_prefix(err, "container %s", spec->leaf);
  sbx_iso_box_destroy(box);
  return -1;
}

int sbx_iso_box_wait(struct sbx_iso_box *box, int timeout_ms)
{
  if (box->reaped)
    return 0;
  if (box->pidfd < 0) {
    errno = ECHILD;
    return -1;
  }
  struct pollfd pf = {.fd = box->pidfd, .events = POLLIN};
  int r;
  do
    r = poll(&pf, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r == 0) {
    errno = ETIMEDOUT;
    return -1;
  }
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PIDFD, (id_t)box->pidfd, &si, WEXITED) < 0)
    return -1;
  box->reaped = true;
  box->exit_status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
  return 0;
}

void sbx_iso_box_destroy(struct sbx_iso_box *box)
{
  if (!box)
    return;
  struct sbx_error err = {0};
  if (box->pidfd >= 0 && !box->reaped) {
    /* PID 1 of the namespace: its death takes every process in it along,
     * atomically (no fork outruns it), and its reaping waits for them */
    syscall(SYS_pidfd_send_signal, box->pidfd, SIGKILL, NULL, 0);
    if (sbx_iso_box_wait(box, 5000) < 0)
      sbx_warn("isolation", "%s: init %d not reaped: %s", box->leaf, (int)box->pid,
               strerror(errno));
  }
  if (box->chan_fd >= 0)
    close(box->chan_fd);
  if (box->pidfd >= 0)
    close(box->pidfd);
  /* Whatever is in the cgroup but not in the namespace (nothing, unless
   * init could not be killed): the cgroup's own kill, then rmdir,
   * retried on EBUSY. */
  if (sbx_cg_kill(&box->cg, 5000, &err) < 0)
    sbx_warn("isolation", "%s: %s", box->leaf, err.msg);
  if (sbx_cg_remove(&box->cg, &err) < 0)
    sbx_warn("isolation", "%s: %s", box->leaf, err.msg);
  if (box->uid_base != (uid_t)-1)
    sbx_userns_slot_free(box->uid_base);
  free(box);
}
