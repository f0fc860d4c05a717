/* session_metrics.c — one sample of what a live session uses now, from
 * what the daemon really measures (the E2B surface's getMetrics):
 *
 *   CPU     the sandbox cgroup's CPU time, averaged since a reading at
 *           least a second old (session_cpu.c keeps the reaper's), as a
 *           share of the session's CPU limit;
 *   memory  what the cgroup is charged now (the memory limit counts the
 *           same: anonymous, kernel, page cache and tmpfs files), its file
 *           part apart, against the session's memory limit;
 *   disk    the sandbox's writable filesystems, each counted once
 *           (statvfs inside it, through sbx-init): /tmp and /work, and
 *           "/" when it is an image's root over a writable upper layer.
 *           Without an image "/" is the host's tree, read-only, which
 *           gVisor does not flag as such: it is not asked about.
 *
 * No history is kept: each call is a new reading. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/util.h"
#include "core/internal.h"

static const char *const disk_paths[] = {"/tmp", "/work", "/"};

/* Used and total bytes of the sandbox's writable filesystems; -1 when it
 * could read none of them. */
/* a + b, at most INT64_MAX (the JSON integer's range). */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
  return a > (uint64_t)INT64_MAX - b || b > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : a + b;
}

static int disk_use(struct sbx_live_session *ls, uint64_t *used, uint64_t *total)
{
  uint64_t seen[sizeof disk_paths / sizeof disk_paths[0]];
  size_t nseen = 0, n = sizeof disk_paths / sizeof disk_paths[0] - (ls->image ? 0 : 1);
  *used = *total = 0;
  for (size_t i = 0; i < n; i++) {
    struct sbx_statfs fs;
    struct sbx_error ignore = {0};
    if (sbx_sandbox_statfs(ls->sb, disk_paths[i], &fs, &ignore) < 0)
      continue;
    bool dup = false;
    for (size_t j = 0; j < nseen; j++)
      dup = dup || seen[j] == fs.dev;
    seen[nseen++] = fs.dev;
    if (dup || fs.read_only)
      continue;
    /* sbx-init's figures are the sandbox's word: saturate, never wrap. */
    *used = sat_add(*used, fs.total_bytes - fs.free_bytes);
    *total = sat_add(*total, fs.total_bytes);
  }
  return nseen ? 0 : -1;
}

static int not_measured(struct sbx_live_session *ls, struct sbx_error *err)
{
  const char *drv = ls->sb->driver->name;
  sbx_err_set(err, SBX_E_CONFLICT, 0,
              "session %s runs on the %s runtime, which measures no CPU or memory "
              "of its own",
              ls->id, drv);
  return sbx_err_fr(err, "La session %s (%s) ne mesure ni CPU ni mémoire", ls->id, drv);
}

int sbx_session_metrics(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                        json_t **out, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_peek(core, who, id, err);
  if (!ls)
    return -1;
  struct sbx_memory mem;
  double cpu_s = 0, cores = 0;
  if (!sbx_driver_has(ls->sb->driver, memory) || ls->sb->driver->memory(ls->sb, &mem) < 0 ||
      sbx_session_cpu_sample(ls, &cpu_s, &cores) < 0) {
    int rc = not_measured(ls, err);
    sbx_session_release(core, ls);
    return rc;
  }
  double limit = (double)ls->limits.cpu_millis / 1000.0;
  uint64_t used = 0, total = 0;
  bool disk = disk_use(ls, &used, &total) == 0;
  json_t *o =
      json_pack("{s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:I}", "timestamp",
                (json_int_t)sbx_wall_s(), "cpu_count", (json_int_t)ceil(limit), "cpu_limit",
                limit, "cpu_used_pct", limit > 0 ? round(cores / limit * 1000.0) / 10.0 : 0.0,
                "cpu_seconds", round(cpu_s * 1e6) / 1e6, "memory_used_bytes",
                (json_int_t)mem.current_bytes, "memory_cache_bytes", (json_int_t)mem.file_bytes,
                "memory_limit_bytes", (json_int_t)ls->limits.memory_bytes);
  if (o && disk) {
    json_object_set_new(o, "disk_used_bytes", json_integer((json_int_t)used));
    json_object_set_new(o, "disk_total_bytes", json_integer((json_int_t)total));
  }
  sbx_session_release(core, ls);
  if (!o)
    return sbx_err_sys(err, ENOMEM, "metrics");
  *out = o;
  return 0;
}
