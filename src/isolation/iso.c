/* iso.c — one-time setup of the isolation module: can this host build the
 * wall at all, and the process-wide state every sandbox shares (cgroup
 * layout, the seccomp program, the host's /usr layout, the spawner). */
#include "isolation/iso.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool init_done;
static struct sbx_error init_err;
static struct sbx_cg_host cg_host;

const struct sbx_cg_host *sbx_cg_host_default(void) { return &cg_host; }

static int check_userns(struct sbx_error *err)
{
  if (access("/proc/self/ns/user", F_OK) < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno, "kernel has no user namespaces");
  FILE *f = fopen("/proc/sys/user/max_user_namespaces", "re");
  long max = 1;
  if (f) {
    if (fscanf(f, "%ld", &max) != 1)
      max = 1;
    fclose(f);
  }
  if (max <= 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                       "user namespaces are disabled (user.max_user_namespaces=0)");
  if (geteuid() != 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, EPERM,
                       "the container driver needs a root daemon (uid ranges, cgroups)");
  return 0;
}

static int do_init(struct sbx_error *err)
{
  struct sbx_iso_plan layout;
  if (check_userns(err) < 0 || sbx_cg_detect(&cg_host, NULL, NULL, NULL, NULL, err) < 0)
    return -1;
  if (sbx_seccomp_build(err) < 0) {
    err->code = SBX_E_RUNTIME_UNAVAILABLE;
    return -1;
  }
  sbx_iso_host_layout(&layout);
  if (sbx_spawn_start(err) < 0)
    return -1;
  sbx_debug("isolation", "ready: cgroup v%d, %d hierarchies, parent %s", (int)cg_host.version,
            cg_host.nctrl, cg_host.ctrl[0].parent);
  return 0;
}

int sbx_iso_init(struct sbx_error *err)
{
  pthread_mutex_lock(&init_lock);
  if (!init_done) {
    init_done = true;
    if (do_init(&init_err) == 0)
      memset(&init_err, 0, sizeof init_err);
  }
  int failed = init_err.code != SBX_E_NONE;
  if (failed && err)
    *err = init_err;
  pthread_mutex_unlock(&init_lock);
  return failed ? -1 : 0;
}
