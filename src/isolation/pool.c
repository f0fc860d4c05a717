/* pool.c — see pool.h.  One refill thread; entries are built with the
 * driver's build function outside the lock, one at a time (netns creation
 * is serialised in the kernel anyway). */
#include "isolation/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "isolation/iso.h"

#define MAX_KEYS 16
#define MAX_SIZE 64

struct pool_key {
  char profile[64];
  uint64_t disk;
  unsigned n;
  struct sbx_iso_box *idle[MAX_SIZE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct pool_key keys[MAX_KEYS];
static int nkeys;
static int size = 2; /* sbx_container_pool_configure; guarded by lock */
static bool running, stopping;
static pthread_t thread;
static sbx_pool_build_fn build_fn;
static unsigned long seq;
static uint64_t last_take_ms; /* guarded by lock */
#define REFILL_SETTLE_MS 50

static unsigned cur_size(void) { return (unsigned)size; }

static void drain_excess_locked(struct sbx_iso_box **out, int *nout)
{
  unsigned s = cur_size();
  for (int k = 0; k < nkeys; k++)
    while (keys[k].n > s)
      out[(*nout)++] = keys[k].idle[--keys[k].n];
}

void sbx_container_pool_configure(unsigned n)
{
  struct sbx_iso_box *drop[MAX_KEYS * MAX_SIZE];
  int ndrop = 0;
  pthread_mutex_lock(&lock);
  size = n > MAX_SIZE ? MAX_SIZE : (int)n;
  drain_excess_locked(drop, &ndrop);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < ndrop; i++)
    sbx_iso_box_destroy(drop[i]);
}

unsigned sbx_container_pool_size(void)
{
  pthread_mutex_lock(&lock);
  unsigned s = cur_size();
  pthread_mutex_unlock(&lock);
  return s;
}

static struct pool_key *find_key(const char *profile, uint64_t disk, bool add)
{
  if (!profile)
    profile = "";
  for (int k = 0; k < nkeys; k++)
    if (keys[k].disk == disk && !strcmp(keys[k].profile, profile))
      return &keys[k];
  if (!add || nkeys >= MAX_KEYS || strlen(profile) >= sizeof keys[0].profile)
    return NULL;
  struct pool_key *pk = &keys[nkeys++];
  snprintf(pk->profile, sizeof pk->profile, "%s", profile);
  pk->disk = disk;
  pk->n = 0;
  return pk;
}

static struct pool_key *next_to_fill_locked(void)
{
  for (int k = 0; k < nkeys; k++)
    if (keys[k].n < cur_size())
      return &keys[k];
  return NULL;
}

static void nap_locked(unsigned ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  pthread_cond_timedwait(&wake, &lock, &ts);
}

static void *refill_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&lock);
  while (!stopping) {
    struct pool_key *pk = next_to_fill_locked();
    if (!pk) {
      pthread_cond_wait(&wake, &lock);
      continue;
    }
    /* Building a sandbox costs ~10 ms of CPU; right after a hand-over the
     * new owner is usually about to exec in it, so let it have the CPU for
     * a moment — unless this key's pool is empty and requests would wait. */
    uint64_t since = sbx_now_ms() - last_take_ms;
    if (pk->n > 0 && since < REFILL_SETTLE_MS) {
      nap_locked((unsigned)(REFILL_SETTLE_MS - since));
      continue;
    }
    char leaf[96], profile[64];
    uint64_t disk = pk->disk;
    snprintf(profile, sizeof profile, "%s", pk->profile);
    snprintf(leaf, sizeof leaf, "pool_%d_%lu", (int)getpid(), ++seq);
    pthread_mutex_unlock(&lock);
    struct sbx_iso_box *box = NULL;
    struct sbx_error err = {0};
    int r = build_fn(leaf, profile, disk, &box, &err);
    pthread_mutex_lock(&lock);
    if (r < 0) {
      sbx_warn("pool", "building a warm sandbox for '%s': %s", profile, err.msg);
      nap_locked(1000); /* a broken host must not spin */
      continue;
    }
    pk = find_key(profile, disk, false);
    if (stopping || !pk || pk->n >= cur_size()) {
      pthread_mutex_unlock(&lock);
      sbx_iso_box_destroy(box);
      pthread_mutex_lock(&lock);
      continue;
    }
    pk->idle[pk->n++] = box;
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

int sbx_pool_start(sbx_pool_build_fn build, struct sbx_error *err)
{
  pthread_mutex_lock(&lock);
  if (running) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  build_fn = build;
  stopping = false;
  int e = pthread_create(&thread, NULL, refill_main, NULL);
  running = e == 0;
  pthread_mutex_unlock(&lock);
  return e ? sbx_err_sys(err, e, "pool: starting the refill thread") : 0;
}

/* A profile some key of which was wanted (prewarmed): its other disk
 * sizes are learnt from requests; a profile never wanted (pool_size 0)
 * is never pooled. */
static bool profile_pooled_locked(const char *profile)
{
  for (int k = 0; k < nkeys; k++)
    if (!strcmp(keys[k].profile, profile ? profile : ""))
      return true;
  return false;
}

struct sbx_iso_box *sbx_pool_take(const char *profile, uint64_t disk_bytes)
{
  struct sbx_iso_box *box = NULL;
  pthread_mutex_lock(&lock);
  last_take_ms = sbx_now_ms();
  if (running && cur_size() > 0) {
    struct pool_key *pk = find_key(profile, disk_bytes, profile_pooled_locked(profile));
    if (pk && pk->n > 0)
      box = pk->idle[--pk->n];
    pthread_cond_broadcast(&wake);
  }
  pthread_mutex_unlock(&lock);
  return box;
}

void sbx_pool_want(const char *profile, uint64_t disk_bytes)
{
  /* Remembered even while the thread is stopped (a recovery restarts it):
   * it fills the key once it runs. */
  pthread_mutex_lock(&lock);
  if (find_key(profile, disk_bytes, true))
    pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
}

unsigned sbx_pool_idle(const char *profile, uint64_t disk_bytes)
{
  pthread_mutex_lock(&lock);
  struct pool_key *pk = find_key(profile, disk_bytes, false);
  unsigned n = pk ? pk->n : 0;
  pthread_mutex_unlock(&lock);
  return n;
}

void sbx_pool_stop(void)
{
  pthread_mutex_lock(&lock);
  if (!running) {
    pthread_mutex_unlock(&lock);
    return;
  }
  stopping = true;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  pthread_join(thread, NULL);
  pthread_mutex_lock(&lock);
  running = false;
  struct sbx_iso_box *drop[MAX_KEYS * MAX_SIZE];
  int ndrop = 0;
  for (int k = 0; k < nkeys; k++) {
    while (keys[k].n)
      drop[ndrop++] = keys[k].idle[--keys[k].n];
  }
  /* The keys stay: a restart after recovery keeps the same profiles warm. */
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < ndrop; i++)
    sbx_iso_box_destroy(drop[i]);
}
