/* rlimit.c — resource limits of the sandbox's processes, soft = hard so
 * nothing inside can raise them.  A second layer behind the cgroup:
 * RLIMIT_NPROC counts per (user namespace, uid), and every sandbox has its
 * own host uid range, so it caps this sandbox only.  No RLIMIT_AS (it
 * breaks Go, the JVM and sanitizers; memory is the cgroup's job).
 * Child-side. */
#include "isolation/iso.h"

#include <sys/resource.h>

/* Never above the hard limit the daemon was given: raising it needs
 * CAP_SYS_RESOURCE in the initial namespace, and the kernel derives some
 * hard limits from RAM (RLIMIT_NPROC is 6144 on a 1.5 GiB host, below the
 * default 16384), so asking for more would fail every create there. */
static int set1(int res, rlim_t v)
{
  struct rlimit cur;
  if (getrlimit(res, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
    v = cur.rlim_max;
  struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
  return setrlimit(res, &rl);
}

int sbx_rlimit_apply(const struct sbx_iso_plan *p)
{
  if (set1(RLIMIT_CORE, 0) < 0 || set1(RLIMIT_NOFILE, p->nofile) < 0 ||
      set1(RLIMIT_NPROC, p->nproc) < 0 || set1(RLIMIT_FSIZE, p->fsize) < 0 ||
      set1(RLIMIT_MEMLOCK, 64 * 1024) < 0 || set1(RLIMIT_RTPRIO, 0) < 0 ||
      set1(RLIMIT_MSGQUEUE, 800 * 1024) < 0 || set1(RLIMIT_SIGPENDING, 4096) < 0)
    return -1;
  return 0;
}
