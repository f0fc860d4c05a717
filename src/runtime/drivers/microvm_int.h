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
};

/* Starts QEMU and the host relay for one guest in pv->cg (made by the
 * caller) with the request's limits; *chan_out: the daemon's end of the
 * sandbox channel (sbx-init's READY comes on it once the guest booted).
 * On failure the caller tears down what pv holds. */
int sbx_mv_start(const struct sbx_mv_conf *conf, struct sbx_mv_priv *pv,
                 const struct sbx_limits *lim, int *chan_out, struct sbx_error *err);

/* Appends the guest console's last meaningful line to err's message (why
 * a boot failed: a kernel panic, the guest init's own complaint). */
void sbx_mv_explain(const struct sbx_mv_priv *pv, struct sbx_error *err);

#endif
