/* microvm_int.h — internals of the microvm driver, one job per file:
 *   microvm.c       the driver table: probe (assets, accelerator), create,
 *                   destroy, usage, recover
 *   microvm_qemu.c  one guest: QEMU's command line (machine, kernel
 *                   command line, devices), starting QEMU and the host
 *                   relay (sbx-vm relay) in the sandbox's cgroup, and
 *                   the guest console's words when a boot fails */
#ifndef SBX_RUNTIME_MICROVM_INT_H
#define SBX_RUNTIME_MICROVM_INT_H

#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "isolation/iso.h"
#include "runtime/driver.h"

/* What the probe settled: the files and the accelerator every guest uses. */
struct sbx_mv_conf {
  char qemu[PATH_MAX];
  char kernel[PATH_MAX];
  char initrd[PATH_MAX];
  char rootfs[PATH_MAX];
  char helper[PATH_MAX]; /* sbx-vm: the host relay */
  char dir[PATH_MAX];    /* <state_dir>/microvm: one dir per guest */
  char accel[8];         /* "kvm" or "tcg" */
  unsigned tsc_khz;      /* the host's TSC, for tcg guests (0: unknown) */
  char runas[32];        /* QEMU drops to this user after start ("" none) */
};

/* One guest from the host's side. */
struct sbx_mv_priv {
  char rid[96]; /* sandbox id = cgroup leaf = dir name */
  char dir[PATH_MAX];
  struct sbx_cgroup cg;
  pid_t qemu_pid, relay_pid; /* our children */
  /* Egress allowlist: the netns holder whose netns holds the bridge of
   * the veth and the guest's tap (microvm_net.c); 0/-1 without. */
  pid_t holder_pid;
  int holder_fd;
};

/* How one guest starts: booted, or restored from a saved state. */
struct sbx_mv_boot {
  /* Give QEMU a QMP monitor: *qmp_out is the daemon's end (microvm_snap.c
   * saves and resumes through it). */
  bool qmp;
  /* Restore: the saved state (an open file, read by QEMU as `-incoming
   * fd:`) and the kernel command line it was booted with — the machine
   * must be the one that was saved, byte for byte; -1/NULL: boot. */
  int state_fd;
  const char *cmdline;
  /* The root image (NULL: the host pack's, conf->rootfs) and the user the
   * workload runs as (0: the sandbox user, 1000). */
  const char *rootfs;
  uint32_t uid, gid;
  /* An egress allowlist's NIC (microvm_net.c): the tap's fd (QEMU's
   * -netdev tap) and the guest's addresses for its command line; -1/"":
   * no NIC at all. */
  int tap_fd;
  const char *net_cmdline;
};

/* Starts QEMU and the host relay for one guest in pv->cg (made by the
 * caller) with the request's limits; *chan_out: the daemon's end of the
 * sandbox channel (a booted guest's sbx-init says READY on it), *qmp_out
 * QMP's when asked for (else -1); cmdline_out (may be NULL, 768 bytes):
 * the kernel command line used.  On failure the caller tears down what pv
 * holds. */
int sbx_mv_start(const struct sbx_mv_conf *conf, struct sbx_mv_priv *pv,
                 const struct sbx_limits *lim, const struct sbx_mv_boot *boot, int *chan_out,
                 int *qmp_out, char *cmdline_out, struct sbx_error *err);

/* The guest's hostname for sandbox id rid: the id with '_' as '-' (a
 * hostname's alphabet), so every guest has its own. */
void sbx_mv_hostname(const char *rid, char out[64]);

/* ---- egress allowlists (microvm_net.c) ---- */
struct sbx_mv_net {
  int tap_fd;
  struct in_addr addr4, gw4;
  struct in6_addr addr6, gw6;
  unsigned prefix4, prefix6;
  bool have6;
  char cmdline[320]; /* " sbx.ip4=… sbx.gw4=… [sbx.ip6=… sbx.gw6=…] [sbx.dns=…]" */
};
/* In the netns of netns_pid, already linked by the net module (its eth0
 * holds the sandbox's addresses): a bridge of eth0 and a new tap, eth0's
 * addresses handed to the guest.  resolv: the sandbox's resolv.conf text
 * (its nameservers go on the guest's command line).  0 with n filled (the
 * caller owns n->tap_fd), or -1 with err. */
int sbx_mv_net_plumb(pid_t netns_pid, const char *resolv, struct sbx_mv_net *n,
                     struct sbx_error *err);

/* ---- OCI images (microvm_image.c) ---- */
/* The squashfs root of the image with manifest digest `digest` and these
 * unpacked layers (lowest first), built under images_dir once; its path
 * into out.  0, or -1 with err. */
int sbx_mv_image_root(const char *images_dir, const char *digest, const char *const *layers,
                      size_t n, char *out, size_t len, struct sbx_error *err);

/* ---- saved states (microvm_snap.c) ---- */
#define SBX_MV_CMDLINE_MAX 768
/* One QMP command (a JSON object in text) on qmp_fd, with fd passed along
 * when ≥ 0 (getfd); the reply's text into reply.  0 on "return", -1 with
 * err on "error", a closed monitor or timeout_ms. */
int sbx_mv_qmp(int qmp_fd, const char *cmd, int fd, char *reply, size_t len, unsigned timeout_ms,
               struct sbx_error *err);
/* Saves the running guest behind qmp_fd (paused first) into path. */
int sbx_mv_save(int qmp_fd, const char *path, struct sbx_error *err);
/* Resumes a guest restored with -incoming once its state is loaded. */
int sbx_mv_resume(int qmp_fd, struct sbx_error *err);

/* Appends the guest console's last meaningful line to err's message (why
 * a boot failed: a kernel panic, the guest init's own complaint). */
void sbx_mv_explain(const struct sbx_mv_priv *pv, struct sbx_error *err);

#endif
