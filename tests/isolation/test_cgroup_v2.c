/* test_cgroup_v2.c — the cgroup v2 code path against a fake cgroupfs (a
 * temp dir of plain files laid out like /sys/fs/cgroup), since this
 * machine runs v1.  It checks detection, the files and values written for
 * limits, usage parsing, cgroup.kill and the wait for "populated 0", and
 * the daemon taking a leaf of its delegated cgroup.  What a fake tree
 * cannot show (the kernel enforcing delegation and the no-internal-process
 * rule, CLONE_INTO_CGROUP) the host lab shows (docs/hosts.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* The daemon takes a leaf of its delegated cgroup (v2's no-internal-
 * processes rule), bringing its children, and refuses a cgroup it shares
 * with processes that are not its own. */
static void delegation_cases(void)
{
  struct sbx_cg_host h;
  struct sbx_error err = {0};
  char p[512], procs[64];
  const char *self = "0::/system.slice/sandboxd.service\n";
  snprintf(p, sizeof p, "%s/system.slice/sandboxd.service", root);

  /* ours: this process and a child it forked (a probe, say) */
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  CHECK(sbx_mkdir_p(p, 0755) == 0);
  put("system.slice/sandboxd.service/cgroup.controllers", "cpuset cpu io memory pids\n");
  snprintf(procs, sizeof procs, "%d\n%d\n", (int)getpid(), (int)child);
  put("system.slice/sandboxd.service/cgroup.procs", procs);
  CHECK(sbx_cg_detect(&h, root, self, NULL, "sandboxd", &err) == 0);
  snprintf(procs, sizeof procs, "%d", (int)child); /* the fake file keeps the last write */
  CHECK_STR(get("system.slice/sandboxd.service/daemon/cgroup.procs"), procs);
  CHECK_STR(get("system.slice/sandboxd.service/cgroup.subtree_control"), "+memory +pids +cpu");
  snprintf(p, sizeof p, "%s/system.slice/sandboxd.service/sandboxd", root);
  CHECK_STR(h.ctrl[0].parent, p); /* sandboxes beside the daemon's leaf */

  /* someone else's process in the same cgroup: fail closed, naming the fix */
  snprintf(procs, sizeof procs, "%d\n1\n", (int)getpid());
  put("system.slice/sandboxd.service/cgroup.procs", procs);
  CHECK(sbx_cg_detect(&h, root, self, NULL, "sandboxd", &err) < 0);
  CHECK(err.code == SBX_E_RUNTIME_UNAVAILABLE);
  CHECK(strstr(err.msg, "not sandboxd's (pid 1)") != NULL);
  CHECK(strstr(err.msg, "Delegate=yes") != NULL);

  /* controllers not delegated: fail closed, naming them */
  put("system.slice/sandboxd.service/cgroup.procs", "");
  put("system.slice/sandboxd.service/cgroup.controllers", "cpu io\n");
  CHECK(sbx_cg_detect(&h, root, self, NULL, "sandboxd", &err) < 0);
  CHECK(strstr(err.msg, "not delegated") != NULL && strstr(err.msg, "cpu io") != NULL);

  /* without cpu: memory and pids still enabled */
  put("system.slice/sandboxd.service/cgroup.controllers", "memory pids\n");
  CHECK(sbx_cg_detect(&h, root, self, NULL, "sandboxd", &err) == 0);
  CHECK_STR(get("system.slice/sandboxd.service/cgroup.subtree_control"), "+memory +pids");

  /* the root cgroup (no systemd; the lab's init) is exempt: nothing moves */
  put("cgroup.controllers", "cpu memory pids\n");
  put("cgroup.procs", "1\n");
  CHECK(sbx_cg_detect(&h, root, "0::/\n", NULL, "sandboxd", &err) == 0);
  snprintf(p, sizeof p, "%s/daemon", root);
  CHECK(access(p, F_OK) < 0);
  snprintf(p, sizeof p, "%s/sandboxd", root);
  CHECK_STR(h.ctrl[0].parent, p);

  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  sbx_rm_rf(root);
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

  struct sbx_iso_limits lim = {.memory_bytes = 128 << 20, .pids = 50, .cpu_millis = 500};
  struct sbx_cgroup cg;
  CHECK(sbx_cg_create(&h, "s1", &lim, &cg, &err) == 0);
  CHECK(cg.v2_dirfd >= 0); /* what CLONE_INTO_CGROUP gets */
  const char *leaf = "system.slice/sandboxd.service/sandboxd/s1";
  char rel[256];
#define F(name) (snprintf(rel, sizeof rel, "%s/%s", leaf, name), get(rel))
  CHECK_STR(F("memory.max"), "134217728");
  CHECK_STR(F("memory.swap.max"), "0");
  CHECK_STR(F("memory.oom.group"), "0");
  CHECK_STR(F("pids.max"), "50");
  CHECK_STR(F("cpu.max"), "50000 100000");
  CHECK_STR(get("system.slice/sandboxd.service/sandboxd/cgroup.subtree_control"),
            "+memory +pids +cpu");
  /* unlimited */
  struct sbx_iso_limits none = {0};
  CHECK(sbx_cg_set_limits(&cg, &none, &err) == 0);
  CHECK_STR(F("memory.max"), "max");
  CHECK_STR(F("pids.max"), "max");
  CHECK_STR(F("cpu.max"), "max 100000");
  /* the same limits again write nothing (a marker left in the files
   * stays); a change writes its own group only */
  snprintf(rel, sizeof rel, "%s/memory.max", leaf);
  put(rel, "untouched");
  snprintf(rel, sizeof rel, "%s/cpu.max", leaf);
  put(rel, "untouched");
  CHECK(sbx_cg_set_limits(&cg, &none, &err) == 0);
  CHECK_STR(F("memory.max"), "untouched");
  struct sbx_iso_limits more_pids = {.pids = 70};
  CHECK(sbx_cg_set_limits(&cg, &more_pids, &err) == 0);
  CHECK_STR(F("pids.max"), "70");
  CHECK_STR(F("memory.max"), "untouched");
  CHECK_STR(F("cpu.max"), "untouched");
  CHECK(sbx_cg_set_limits(&cg, &lim, &err) == 0);
  CHECK_STR(F("memory.max"), "134217728");
  CHECK_STR(F("cpu.max"), "50000 100000");
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
  struct sbx_iso_usage u;
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
  /* a metrics sample's memory: current, and memory.stat's file (not file_mapped) */
  snprintf(rel, sizeof rel, "%s/memory.current", leaf);
  put(rel, "7340032\n");
  snprintf(rel, sizeof rel, "%s/memory.stat", leaf);
  put(rel, "anon 4194304\nfile_mapped 4096\nfile 2097152\nkernel 1048576\n");
  uint64_t cur = 0, file = 0;
  CHECK(sbx_cg_memory(&cg, &cur, &file) == 0 && cur == 7340032 && file == 2097152);

  /* kill: writes cgroup.kill, then waits for populated 0 */
  snprintf(rel, sizeof rel, "%s/cgroup.events", leaf);
  put(rel, "populated 1\nfrozen 0\n");
  CHECK(sbx_cg_kill(&cg, 50, &err) < 0); /* still populated: times out */
  CHECK_STR(F("cgroup.kill"), "1");
  snprintf(rel, sizeof rel, "%s/cgroup.events", leaf);
  put(rel, "populated 0\nfrozen 0\n");
  /* an empty cgroup is not killed again (v1 would freeze it) */
  snprintf(rel, sizeof rel, "%s/cgroup.kill", leaf);
  put(rel, "untouched");
  CHECK(sbx_cg_kill(&cg, 1000, &err) == 0);
  CHECK_STR(F("cgroup.kill"), "untouched");
  CHECK(sbx_cg_count(&h) == 1);
  /* a fake leaf holds plain files, so rmdir reports ENOTEMPTY; a real
   * cgroupfs removes its control files with the directory */
  CHECK(sbx_cg_remove(&cg, &err) < 0 && err.errnum == ENOTEMPTY);
  CHECK(cg.v2_dirfd == -1);
  sbx_rm_rf(root);
  delegation_cases();
  return check_finish("cgroup-v2-fake");
}
