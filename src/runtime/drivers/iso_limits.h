/* iso_limits.h — the driver seam's limits and usage (runtime/driver.h) to
 * and from isolation's own (isolation/iso.h), for the drivers built on the
 * shared-kernel wall (container, gvisor's host cgroup).  Isolation sits
 * below runtime and never sees the seam's structs. */
#ifndef SBX_RUNTIME_DRIVERS_ISO_LIMITS_H
#define SBX_RUNTIME_DRIVERS_ISO_LIMITS_H

#include "isolation/iso.h"
#include "runtime/driver.h"

static inline struct sbx_iso_limits sbx_drv_iso_limits(const struct sbx_limits *l)
{
  return (struct sbx_iso_limits){.cpu_millis = l->cpu_millis,
                                 .memory_bytes = l->memory_bytes,
                                 .disk_bytes = l->disk_bytes,
                                 .pids = l->pids};
}

/* A cgroup's counters as the seam's usage. */
static inline int sbx_drv_cg_usage(struct sbx_cgroup *cg, struct sbx_usage *out)
{
  struct sbx_iso_usage u;
  int rc = sbx_cg_usage(cg, &u);
  *out = (struct sbx_usage){.cpu_seconds = u.cpu_seconds,
                            .memory_peak_bytes = u.memory_peak_bytes,
                            .oom_kills = u.oom_kills,
                            .pids_current = u.pids_current,
                            .pids_max_hits = u.pids_max_hits};
  return rc;
}

/* A cgroup's memory now as the seam's. */
static inline int sbx_drv_cg_memory(struct sbx_cgroup *cg, struct sbx_memory *out)
{
  return sbx_cg_memory(cg, &out->current_bytes, &out->file_bytes);
}

#endif
