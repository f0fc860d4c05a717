/* gvisor_pool.c — warm pool of pre-started gvisor sandboxes.
 *
 * Per (profile, disk, pids) key — the tmpfs sizes and RLIMIT_NPROC are
 * fixed when runsc starts — up to the gvisor_pool_size setting (default 1)
 * sandboxes are kept fully started: cgroup, bundle, runsc, sbx-init past
 * its READY.  A pooled sandbox is handed out once and never comes back:
 * destroy tears it down like any other.  Nothing but sbx-init runs in an
 * idle entry, and nobody can reach it before the hand-over has set the
 * request's memory/cpu/pids limits on its cgroup.  Keys come from
 * prewarm() only (the profiles' own limits): an idle gVisor sandbox costs
 * tens of MiB, so odd request sizes do not get pools of their own.  The
 * refill thread starts with the first key, which is after recovery
 * (recovery would kill idle entries). */
#include "runtime/drivers/gvisor_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define MAX_KEYS 16
#define MAX_IDLE SBX_GV_POOL_MAX

struct entry {
  struct sbx_gv_priv *pv;
  int chan;
};

struct key {
  char profile[64];
  uint64_t disk, pids;
  unsigned n;
  struct entry idle[MAX_IDLE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct key keys[MAX_KEYS];
static unsigned nkeys;
static bool running, stopping;
static pthread_t thread;
static sbx_gv_build_fn build_fn;
static sbx_gv_drop_fn drop_fn;
static unsigned want_idle = 1; /* per key; guarded by lock */

static unsigned pool_size(void) { return want_idle; }

static struct key *find(const char *profile, uint64_t disk, uint64_t pids, bool add)
{
  for (unsigned i = 0; i < nkeys; i++)
    if (!strcmp(keys[i].profile, profile) && keys[i].disk == disk && keys[i].pids == pids)
      return &keys[i];
  if (!add || nkeys >= MAX_KEYS || strlen(profile) >= sizeof keys[0].profile)
    return NULL;
  struct key *k = &keys[nkeys++];
  memset(k, 0, sizeof *k);
  strcpy(k->profile, profile);
  k->disk = disk;
  k->pids = pids;
  return k;
}

static struct key *wanting(unsigned size)
{
  for (unsigned i = 0; i < nkeys; i++)
    if (keys[i].n < size)
      return &keys[i];
  return NULL;
}

static void wait_s(unsigned s)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += s;
  pthread_cond_timedwait(&wake, &lock, &ts);
}

static void *refill_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&lock);
  while (!stopping) {
    struct key *k = wanting(pool_size());
    if (!k) {
      wait_s(1);
      continue;
    }
    uint64_t disk = k->disk, pids = k->pids;
    pthread_mutex_unlock(&lock);
    char rid[40];
    sbx_random_id("gvp_", rid, sizeof rid);
    struct sbx_gv_priv *pv = NULL;
    int chan = -1;
    struct sbx_error err = {0};
    int rc = build_fn(rid, disk, pids, &pv, &chan, &err);
    pthread_mutex_lock(&lock);
    if (rc < 0) {
      sbx_warn("gvisor", "pool: %s", err.msg);
      wait_s(5); /* runsc trouble: do not spin */
      continue;
    }
    if (stopping || k->n >= MAX_IDLE) {
      pthread_mutex_unlock(&lock);
      drop_fn(pv, chan);
      pthread_mutex_lock(&lock);
      continue;
    }
    k->idle[k->n++] = (struct entry){pv, chan};
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

void sbx_gv_pool_start(sbx_gv_build_fn build, sbx_gv_drop_fn drop, unsigned n)
{
  pthread_mutex_lock(&lock);
  build_fn = build;
  drop_fn = drop;
  want_idle = n > MAX_IDLE ? MAX_IDLE : n;
  pthread_mutex_unlock(&lock);
}

/* Caller holds the lock. */
static void ensure_thread(void)
{
  if (running || stopping || !build_fn || pool_size() == 0)
    return;
  if (pthread_create(&thread, NULL, refill_main, NULL) == 0)
    running = true;
  else
    sbx_warn("gvisor", "pool: cannot start the refill thread");
}

void sbx_gv_pool_want(const char *profile, uint64_t disk, uint64_t pids)
{
  pthread_mutex_lock(&lock);
  find(profile, disk, pids, true);
  ensure_thread();
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
}

bool sbx_gv_pool_take(const char *profile, uint64_t disk, uint64_t pids, struct sbx_gv_priv **pv,
                      int *chan)
{
  bool got = false;
  pthread_mutex_lock(&lock);
  struct key *k = find(profile, disk, pids, false);
  if (k && k->n > 0) {
    struct entry e = k->idle[0];
    memmove(&k->idle[0], &k->idle[1], (size_t)(--k->n) * sizeof k->idle[0]);
    *pv = e.pv;
    *chan = e.chan;
    got = true;
  }
  ensure_thread();
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
  return got;
}

unsigned sbx_gv_pool_idle(const char *profile)
{
  unsigned n = 0;
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < nkeys; i++)
    if (!strcmp(keys[i].profile, profile))
      n += keys[i].n;
  pthread_mutex_unlock(&lock);
  return n;
}

void sbx_gv_pool_stop(void)
{
  pthread_mutex_lock(&lock);
  stopping = true;
  bool join = running;
  running = false;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  if (join)
    pthread_join(thread, NULL);
  pthread_mutex_lock(&lock);
  for (unsigned i = 0; i < nkeys; i++)
    while (keys[i].n > 0) {
      struct entry e = keys[i].idle[--keys[i].n];
      pthread_mutex_unlock(&lock);
      drop_fn(e.pv, e.chan);
      pthread_mutex_lock(&lock);
    }
  nkeys = 0;
  pthread_mutex_unlock(&lock);
}
