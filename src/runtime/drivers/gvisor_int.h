/* gvisor_int.h — internals of the gvisor driver, split one job per file:
 *   gvisor.c         the driver table: probe, create, destroy, usage, recover
 *   gvisor_bundle.c  the OCI bundle (rootfs skeleton or an image's
 *                    copy-on-write overlay, + config.json)
 *   gvisor_proc.c    running runsc: the long-lived spawner thread that
 *                    starts `runsc run` inside the sandbox's cgroup, and
 *                    bounded one-shot runsc commands (probe, kill, delete)
 * Its warm pool is the drivers' shared one (warm_pool.h). */
#ifndef SBX_RUNTIME_GVISOR_INT_H
#define SBX_RUNTIME_GVISOR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "isolation/iso.h"
#include "runtime/driver.h"

#define SBX_GV_UID 1000
#define SBX_GV_GID 1000

/* One started gVisor sandbox from the host's side. */
struct sbx_gv_priv {
  char rid[96]; /* runsc container id = cgroup leaf = bundle dir name */
  struct sbx_cgroup cg;
  pid_t runsc_pid; /* `runsc run`, our child */
  char bundle[4096];
  bool fd_in; /* READY said FDIN (always, under gVisor) */
  /* Egress allowlist: the netns holder (sbx_cg_netns_hold) whose netns
   * runsc joined; 0/-1 for network none. */
  pid_t holder_pid;
  int holder_fd;
};

/* What an allowlisted sandbox needs at create (NULL: network none). */
struct sbx_gv_net {
  int (*prepare)(void *ctx, pid_t netns_pid, struct sbx_error *err);
  void *ctx;
  const char *resolv_conf; /* its /etc/resolv.conf */
};

/* An OCI image as the sandbox's root (issue 7): the store's unpacked layer
 * dirs (absolute, lowest first, 1..SBX_GV_MAX_LAYERS) and the image's User
 * inside (0: the sandbox user).  NULL where the host pack is meant. */
struct sbx_gv_image {
  const char *const *layers;
  size_t nlayers;
  uint32_t run_uid, run_gid;
};
#define SBX_GV_MAX_LAYERS SBX_ISO_MAX_LAYERS

/* Writes <dir>/rootfs and <dir>/config.json for one sandbox.  Host pack
 * (img NULL): a skeleton with a synthetic /etc, mounted read-only by
 * runsc, host /usr and CA certs bound read-only.  Image: the image's
 * layers as the read-only lowers of an overlayfs mounted on the host at
 * <dir>/rootfs, its upper on a tmpfs of disk_bytes (writable root,
 * copy-on-write), the sandbox's hosts/resolv.conf/hostname bound over the
 * image's.  Both: sbx-init bound at /.sbx/sbx-init, tmpfs /tmp and /work
 * of disk_bytes, uid/gid 1000 (or the image's User), no capabilities,
 * no_new_privs, empty env, cwd /work, RLIMIT_NPROC = pids (0: 16384)
 * enforced by gVisor's own kernel.  On failure err->errnum is EEXIST
 * only when dir already existed (not ours: leave it); otherwise the caller
 * owns what was made: sbx_gv_bundle_unmount, then remove the dir. */
/* netns: NULL for a netns of runsc's own (network none); else the path
 * of the netns runsc joins (--network=sandbox) and resolv the text of its
 * /etc/resolv.conf (NULL: no nameserver). */
/* cgpath: the OCI linux.cgroupsPath, from sbx_gv_cgroups_path. */
int sbx_gv_bundle_write(const char *dir, const char *init_path, uint64_t disk_bytes,
                        uint64_t pids, const struct sbx_gv_image *img, const char *netns,
                        const char *resolv, const char *cgpath, struct sbx_error *err);
/* The cgroupsPath that makes runsc use cg as it is: "." on v1, the leaf's
 * absolute path below /sys/fs/cgroup on v2; -1 (ENOTSUP) when cgroup2
 * is not mounted there, which runsc assumes. */
int sbx_gv_cgroups_path(const struct sbx_cgroup *cg, char *out, size_t len,
                        struct sbx_error *err);

/* Unmounts whatever is mounted at <dir>/rootfs (an image sandbox's
 * overlay, also a killed daemon's).  0 when nothing is mounted there any
 * more (also when nothing was), -1 with errno otherwise: then the bundle
 * must not be removed. */
int sbx_gv_bundle_unmount(const char *dir);

/* Starts argv (argv[0] an absolute path) from the spawner thread with
 * stdin = in_fd, stdout/stderr = log_fd, PR_SET_PDEATHSIG SIGKILL, and
 * attached to cg before it execs.  netns: `runsc run --network=sandbox`,
 * which then runs in a mount namespace whose /proc/sys lacks net (see
 * gvisor_proc.c).  The caller reaps *pid_out. */
int sbx_gv_spawn(char *const argv[], int in_fd, int log_fd, struct sbx_cgroup *cg, bool netns,
                 pid_t *pid_out, struct sbx_error *err);

/* Same with the environment envp and no netns setup (the start probes:
 * TMPDIR inside the state dir, so what runsc leaves there can go). */
int sbx_gv_spawn_env(char *const argv[], char *const envp[], int in_fd, int log_fd,
                     struct sbx_cgroup *cg, pid_t *pid_out, struct sbx_error *err);

/* Runs argv to completion within timeout_ms (then SIGKILL); stderr's first
 * line goes to msg.  Returns the wait status, or -1 if it could not run or
 * timed out (msg says which). */
int sbx_gv_run(char *const argv[], unsigned timeout_ms, char *msg, size_t msglen);

/* Reads the first line of a log file into msg ("" if none). */
void sbx_gv_first_line(const char *path, char *msg, size_t msglen);
/* Same for an open file (read from offset 0). */
void sbx_gv_first_line_fd(int fd, char *msg, size_t msglen);

#endif
