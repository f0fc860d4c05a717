/* spawn.c — the parent's side of the wall: clone3 from one long-lived
 * spawner thread, uid/gid maps, cgroup entry, release (isolation.md §1 B).
 *
 * Why one dedicated thread (common/spawner.h): PR_SET_PDEATHSIG fires when
 * the *thread* that forked exits, so forking from request threads would
 * kill sandboxes at random; the spawner lives as long as the daemon.  It
 * also drops its own
 * supplementary groups at start (credentials are per thread in the kernel;
 * the raw syscall changes only this thread), so children never carry the
 * daemon's groups — the parent then denies setgroups in the sandbox's
 * namespace for good.
 *
 * The spawner only does the short privileged part (clone, maps, cgroup,
 * an image's overlay root — overlay.c, a few ms — and "go", which then
 * carries the overlay's mount fd); the slow part (mounts in the child, waiting for exec) happens
 * while the requesting thread waits, so sandboxes build in parallel. */
#include "isolation/iso.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/spawner.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

struct spawn_req {
  const struct sbx_iso_plan *plan;
  struct sbx_cgroup *cg;
  uid_t uid_base;
  int parent_sync_fd;
  pid_t pid;
  int pidfd;
};

static void drop_groups(void)
{
  if (syscall(SYS_setgroups, 0, NULL) < 0)
    sbx_error("isolation", "spawner: dropping supplementary groups: %s", strerror(errno));
}

static struct sbx_spawner spawner = SBX_SPAWNER_INIT("isolation", drop_groups);

static int do_clone(struct spawn_req *r, struct sbx_error *err)
{
  struct clone_args ca;
  memset(&ca, 0, sizeof ca);
  ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
             CLONE_NEWUTS | CLONE_PIDFD;
  ca.pidfd = (uint64_t)(uintptr_t)&r->pidfd;
  ca.exit_signal = SIGCHLD;
  if (r->cg->v2_dirfd >= 0) {
    /* v2: born inside its cgroup, never charged to the daemon's. */
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = (uint64_t)r->cg->v2_dirfd;
  }
  long pid = sbx_fault(SBX_FAULT_CLONE) ? -1 : syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0)
    sbx_iso_child(r->plan); /* never returns */
  if (pid < 0) {
    int e = errno;
    return sbx_err_set(err,
                       e == EPERM || e == EINVAL || e == ENOSYS ? SBX_E_RUNTIME_UNAVAILABLE
                                                                : SBX_E_INTERNAL,
                       e, "clone3 into new namespaces: %s", strerror(e));
  }
  r->pid = (pid_t)pid;
  return 0;
}

/* "go": one byte, plus the image root's mount fd when there is one. */
static int send_go(int sync_fd, int root_fd)
{
  char go = 'g';
  struct iovec iov = {.iov_base = &go, .iov_len = 1};
  return sbx_sendmsg_fds(sync_fd, &iov, 1, &root_fd, root_fd >= 0 ? 1 : 0, 0) == 1 ? 0 : -1;
}

static int do_spawn(void *arg, struct sbx_error *err)
{
  struct spawn_req *r = arg;
  r->pidfd = -1;
  if (do_clone(r, err) < 0)
    return -1;
  int root_fd = -1;
  /* The image root needs the child's user namespace with its maps (the
   * layers are idmapped to it), so it is built between the maps and "go". */
  if (sbx_userns_write_maps(r->pid, r->uid_base, err) < 0 ||
      (r->cg->v2_dirfd < 0 && sbx_cg_attach(r->cg, r->pid, err) < 0) ||
      (r->plan->nlayers && (root_fd = sbx_overlay_build(r->pid, r->plan, err)) < 0) ||
      send_go(r->parent_sync_fd, root_fd) < 0) {
    if (root_fd >= 0)
      close(root_fd);
    if (!err->msg[0])
      sbx_err_sys(err, errno, "spawn: releasing the child");
    /* the child is still waiting for "go": nothing of it ran */
    syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    waitid(P_PIDFD, (id_t)r->pidfd, &si, WEXITED);
    close(r->pidfd);
    r->pidfd = -1;
    return -1;
  }
  if (root_fd >= 0)
    close(root_fd); /* the child has its own reference now */
  return 0;
}

/* All signals are blocked on the spawner (common/spawner.h): the child
 * resets its mask before exec (pid.c). */
int sbx_spawn_start(struct sbx_error *err) { return sbx_spawner_start(&spawner, err); }

/* Supplementary groups must be gone before the child is born: with
 * setgroups denied it could never drop them itself. */
int sbx_spawn_clone(const struct sbx_iso_plan *plan, struct sbx_cgroup *cg, uid_t uid_base,
                    pid_t *pid_out, int *pidfd_out, int parent_sync_fd, struct sbx_error *err)
{
  struct spawn_req r = {.plan = plan,
                        .cg = cg,
                        .uid_base = uid_base,
                        .parent_sync_fd = parent_sync_fd,
                        .pidfd = -1};
  if (sbx_spawner_call(&spawner, do_spawn, &r, err) < 0)
    return -1;
  *pid_out = r.pid;
  *pidfd_out = r.pidfd;
  return 0;
}
