/* chain.c — the child's side of the wall as one ordered list of steps, in
 * privilege-drop order (isolation.md §1 "Order", nsjail containProc()):
 *
 *   wait for the parent (maps written, cgroup joined, an image's overlay
 *   received) → root of the new user ns → cgroup ns → mounts → pivot_root
 *   → root read-only (host pack) → lo up →
 *   hostname → signals reset → setsid → pdeathsig → rlimits → bounding set → uid/gid →
 *   capability sets → pdeathsig again → no_new_privs → fds → seccomp →
 *   execveat.
 *
 * Runs after a raw clone3 from a threaded daemon: raw syscalls only (see
 * iso.h).  Any failure reports {step, errno} on the sync socket and exits;
 * nothing half-built ever runs code. */
#include "isolation/iso.h"

#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const step_names[SBX_STEP__COUNT] = {
    [SBX_STEP_NONE] = "none",
    [SBX_STEP_SYNC] = "sync with parent",
    [SBX_STEP_USERNS] = "user namespace",
    [SBX_STEP_CGROUPNS] = "cgroup namespace",
    [SBX_STEP_MOUNT_PRIVATE] = "mount propagation",
    [SBX_STEP_MOUNT_ROOT] = "root tmpfs",
    [SBX_STEP_MOUNT_IMAGE] = "image root (overlay)",
    [SBX_STEP_MOUNT_USR] = "/usr bind",
    [SBX_STEP_MOUNT_ETC] = "synthetic /etc",
    [SBX_STEP_MOUNT_PROC] = "/proc",
    [SBX_STEP_MOUNT_DEV] = "/dev",
    [SBX_STEP_MOUNT_TMP] = "/tmp and /work",
    [SBX_STEP_PIVOT] = "pivot_root",
    [SBX_STEP_MOUNT_RO] = "read-only root",
    [SBX_STEP_NET] = "loopback",
    [SBX_STEP_UTS] = "hostname",
    [SBX_STEP_SIGNALS] = "signal reset",
    [SBX_STEP_SETSID] = "setsid",
    [SBX_STEP_PDEATHSIG] = "pdeathsig",
    [SBX_STEP_RLIMIT] = "rlimits",
    [SBX_STEP_CAPS_BOUND] = "capability bounding set",
    [SBX_STEP_CREDS] = "uid/gid",
    [SBX_STEP_CAPS] = "capability sets",
    [SBX_STEP_NNP] = "no_new_privs",
    [SBX_STEP_FDS] = "fd sweep",
    [SBX_STEP_SECCOMP] = "seccomp",
    [SBX_STEP_EXEC] = "execveat",
};

const char *sbx_iso_step_name(enum sbx_iso_step s)
{
  return s > 0 && s < SBX_STEP__COUNT && step_names[s] ? step_names[s] : "unknown step";
}

static int report_fd = -1;

__attribute__((noreturn)) static void fail(enum sbx_iso_step step)
{
  struct sbx_iso_report r = {.step = step, .errnum = errno};
  if (report_fd >= 0)
    (void)!send(report_fd, &r, sizeof r, MSG_NOSIGNAL);
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

/* Waits for "go"; returns the image root's mount fd that comes with it
 * (SCM_RIGHTS, overlay.c) when the plan has layers, else -1. */
static int wait_parent(const struct sbx_iso_plan *p)
{
  char go;
  struct iovec iov = {.iov_base = &go, .iov_len = 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = u.buf,
                      .msg_controllen = sizeof u.buf};
  ssize_t n;
  do
    n = recvmsg(p->sync_fd, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1) {
    errno = n < 0 ? errno : EPIPE;
    fail(SBX_STEP_SYNC);
  }
  int fd = -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
      c->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if ((fd >= 0) != (p->nlayers > 0) || (mh.msg_flags & MSG_CTRUNC)) {
    errno = EPROTO;
    fail(SBX_STEP_SYNC);
  }
  return fd;
}

#define STEP(id, call)                                                                          \
  do {                                                                                          \
    if ((call) < 0)                                                                             \
      fail(id);                                                                                 \
  } while (0)

void sbx_iso_child(const struct sbx_iso_plan *p)
{
  enum sbx_iso_step step = SBX_STEP_NONE;
  int sync_fd, exec_fd;
  report_fd = p->sync_fd;

  /* First of all: die with the spawner thread.  Until fds are arranged
   * this child holds copies of every daemon fd (the state-dir lock, other
   * children's sync sockets), so a child left waiting after a kill -9 of
   * the daemon would keep the lock and block the restart. */
  STEP(SBX_STEP_PDEATHSIG, sbx_pid_deathsig());
  int image_fd = wait_parent(p);
  STEP(SBX_STEP_USERNS, sbx_userns_child_become_root());
  /* After the parent moved us: the cgroup ns root is our own cgroup. */
  STEP(SBX_STEP_CGROUPNS, sbx_fault(SBX_FAULT_UNSHARE) ? -1 : unshare(CLONE_NEWCGROUP));
  if (sbx_mount_build_root(p, image_fd, &step) < 0 || sbx_mount_pivot(&step) < 0)
    fail(step);
  /* An image root stays writable (copy-on-write into its upper tmpfs,
   * nosuid,nodev); the host pack's tmpfs root goes read-only. */
  if (!p->nlayers)
    STEP(SBX_STEP_MOUNT_RO, sbx_mount_root_readonly());
  STEP(SBX_STEP_NET, sbx_net_lo_up());
  STEP(SBX_STEP_UTS, sbx_uts_set_hostname());
  STEP(SBX_STEP_SIGNALS, sbx_pid_reset_signals());
  STEP(SBX_STEP_SETSID, sbx_pid_setsid());
  STEP(SBX_STEP_PDEATHSIG, sbx_pid_deathsig());
  STEP(SBX_STEP_RLIMIT, sbx_rlimit_apply(p));
  STEP(SBX_STEP_CAPS_BOUND, sbx_caps_drop_bounding());
  STEP(SBX_STEP_CREDS, sbx_caps_drop_creds(p->run_uid, p->run_gid));
  STEP(SBX_STEP_CAPS, sbx_caps_clear());
  STEP(SBX_STEP_PDEATHSIG, sbx_pid_deathsig()); /* the uid change cleared it */
  STEP(SBX_STEP_NNP, sbx_caps_no_new_privs());
  STEP(SBX_STEP_FDS, sbx_fds_arrange(p, &sync_fd, &exec_fd));
  report_fd = sync_fd;
  STEP(SBX_STEP_SECCOMP, sbx_seccomp_apply());
  syscall(SYS_execveat, exec_fd, "", p->argv, p->envp, AT_EMPTY_PATH);
  fail(SBX_STEP_EXEC);
}
