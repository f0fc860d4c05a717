/* test_cgroup_v2.c — the cgroup v2 code path against a fake cgroupfs (a
 * temp dir of plain files laid out like /sys/fs/cgroup), since this
 * machine runs v1.  It checks detection, the files and values written for
 * limits, usage parsing, cgroup.kill and the wait for "populated 0".  What
 * a fake tree cannot show (delegation, the no-internal-process rule,
 * CLONE_INTO_CGROUP) is listed in docs/cgroups.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/check.h"
#include "common/util.h"
#include "isolation/iso.h"

static char root[256];

static void put(const char *rel, const char *s)
{
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  if (f) {
    fputs(s, f);
    fclose(f);
  }
}

static char *get(const char *rel)
{
  static char buf[256];
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "r");
  buf[0] = 0;
  if (f) {
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
  }
  return buf;
}

int main(void)
{
  snprintf(root, sizeof root, "/tmp/sbx-fakecg-%d", (int)getpid());
  char p[512];
  snprintf(p, sizeof p, "%s/system.slice/sandboxd.service", root);
  CHECK(sbx_mkdir_p(p, 0755) == 0);
  put("system.slice/sandboxd.service/cgroup.controllers", "cpuset cpu io memory pids\n");
  const char *self = "0::/system.slice/sandboxd.service\n";

  struct sbx_cg_host h;
  struct sbx_error err = {0};
  CHECK(sbx_cg_detect(&h, root, self, NULL, "sandboxd", &err) == 0);
  CHECK(h.version == SBX_CG_V2);
  CHECK(h.nctrl == 1);
  snprintf(p, sizeof p, "%s/system.slice/sandboxd.service/sandboxd", root);
  CHECK_STR(h.ctrl[0].parent, p);

  struct sbx_limits lim = {.memory_bytes = 128 << 20, .pids = 50, .cpu_millis = 500};
  struct sbx_cgroup cg;
  CHECK(sbx_cg_create(&h, "s1", &lim, &cg, &err) == 0);
  CHECK(cg.v2_dirfd >= 0); /* what CLONE_INTO_CGROUP gets */
  const char *leaf = "system.slice/sandboxd.service/sandboxd/s1";
  char rel[256];
#define F(name) (snprintf(rel, sizeof rel, "%s/%s", leaf, name), get(rel))
  CHECK_STR(F("memory.max"), "134217728");
  CHECK_STR(F("memory.swap.max"), "0");
  CHECK_STR(F("memory.oom.group"), "1");
  CHECK_STR(F("pids.max"), "50");
  CHECK_STR(F("cpu.max"), "50000 100000");
  CHECK_STR(get("system.slice/sandboxd.service/sandboxd/cgroup.subtree_control"),
            "+memory +pids +cpu");
  /* unlimited */
  struct sbx_limits none = {0};
  CHECK(sbx_cg_set_limits(&cg, &none, &err) == 0);
  CHECK_STR(F("memory.max"), "max");
  CHECK_STR(F("pids.max"), "max");
  CHECK_STR(F("cpu.max"), "max 100000");
  /* a second leaf of the same name is a conflict, not a takeover */
  struct sbx_cgroup dup;
  CHECK(sbx_cg_create(&h, "s1", &lim, &dup, &err) < 0 && err.code == SBX_E_CONFLICT);
  CHECK(sbx_cg_create(&h, "../escape", &lim, &dup, &err) < 0);

  /* usage from the kernel's files */
  snprintf(rel, sizeof rel, "%s/cpu.stat", leaf);
  put(rel, "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
  snprintf(rel, sizeof rel, "%s/memory.peak", leaf);
  put(rel, "99999\n");
  snprintf(rel, sizeof rel, "%s/memory.events", leaf);
  put(rel, "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 1\n");
  snprintf(rel, sizeof rel, "%s/pids.current", leaf);
  put(rel, "7\n");
  struct sbx_usage u;
  CHECK(sbx_cg_usage(&cg, &u) == 0);
  CHECK(u.cpu_seconds > 2.49 && u.cpu_seconds < 2.51);
  CHECK(u.memory_peak_bytes == 99999);
  CHECK(u.oom_kills == 2);
  CHECK(u.pids_current == 7);
  CHECK(u.pids_max_hits == 0); /* no pids.events in the fake tree */
  snprintf(rel, sizeof rel, "%s/pids.events", leaf);
  put(rel, "max 3\n");
  CHECK(sbx_cg_usage(&cg, &u) == 0 && u.pids_max_hits == 3);
  /* the exec path's one-file read: memory.events' oom_kill, not oom */
  uint64_t ooms = 0;
  CHECK(sbx_cg_oom_kills(&cg, &ooms) == 0 && ooms == 2);

  /* kill: writes cgroup.kill, then waits for populated 0 */
  snprintf(rel, sizeof rel, "%s/cgroup.events", leaf);
  put(rel, "populated 1\nfrozen 0\n");
  CHECK(sbx_cg_kill(&cg, 50, &err) < 0); /* still populated: times out */
  CHECK_STR(F("cgroup.kill"), "1");
  snprintf(rel, sizeof rel, "%s/cgroup.events", leaf);
  put(rel, "populated 0\nfrozen 0\n");
  CHECK(sbx_cg_kill(&cg, 1000, &err) == 0);
  CHECK(sbx_cg_count(&h) == 1);
  /* a fake leaf holds plain files, so rmdir reports ENOTEMPTY; a real
   * cgroupfs removes its control files with the directory */
  CHECK(sbx_cg_remove(&cg, &err) < 0 && err.errnum == ENOTEMPTY);
  CHECK(cg.v2_dirfd == -1);
  sbx_rm_rf(root);
  return check_finish("cgroup-v2-fake");
}
