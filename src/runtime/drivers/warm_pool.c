/* warm_pool.c — a driver's warm pool of started sandboxes (warm_pool.h).
 *
 * Per (profile, key limits) up to `want` sandboxes are kept fully started
 * (sbx-init past its READY).  Nothing but sbx-init runs in an idle entry,
 * and nobody can reach it before the hand-over, where the driver sets the
 * request's other limits. */
#include "runtime/drivers/warm_pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

static bool same_key(const struct sbx_limits *a, const struct sbx_limits *b)
{
  return a->cpu_millis == b->cpu_millis && a->memory_bytes == b->memory_bytes &&
         a->disk_bytes == b->disk_bytes && a->pids == b->pids;
}

static struct sbx_warm_key *find(struct sbx_warm_pool *p, const char *profile,
                                 const struct sbx_limits *key, bool add)
{
  for (unsigned i = 0; i < p->nkeys; i++)
    if (!strcmp(p->keys[i].profile, profile) && same_key(&p->keys[i].limits, key))
      return &p->keys[i];
  if (!add || p->nkeys >= SBX_WARM_POOL_KEYS || strlen(profile) >= sizeof p->keys[0].profile)
    return NULL;
  struct sbx_warm_key *k = &p->keys[p->nkeys++];
  memset(k, 0, sizeof *k);
  strcpy(k->profile, profile);
  k->limits = *key;
  return k;
}

static struct sbx_warm_key *wanting(struct sbx_warm_pool *p)
{
  for (unsigned i = 0; i < p->nkeys; i++)
    if (p->keys[i].n < p->want)
      return &p->keys[i];
  return NULL;
}

static void wait_s(struct sbx_warm_pool *p, unsigned s)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += s;
  pthread_cond_timedwait(&p->wake, &p->lock, &ts);
}

static void *refill_main(void *arg)
{
  struct sbx_warm_pool *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->stopping) {
    struct sbx_warm_key *k = wanting(p);
    if (!k) {
      wait_s(p, 1);
      continue;
    }
    struct sbx_limits key = k->limits;
    pthread_mutex_unlock(&p->lock);
    char rid[40];
    sbx_random_id(p->rid_prefix, rid, sizeof rid);
    void *priv = NULL;
    int chan = -1;
    struct sbx_error err = {0};
    int rc = p->build(rid, &key, &priv, &chan, &err);
    pthread_mutex_lock(&p->lock);
    if (rc < 0) {
      sbx_warn(p->name, "pool: %s", err.msg);
      wait_s(p, 5); /* trouble starting one: do not spin */
      continue;
    }
    if (p->stopping || k->n >= SBX_WARM_POOL_MAX) {
      pthread_mutex_unlock(&p->lock);
      p->drop(priv, chan);
      pthread_mutex_lock(&p->lock);
      continue;
    }
    k->idle[k->n++] = (struct sbx_warm_entry){priv, chan};
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

void sbx_warm_pool_start(struct sbx_warm_pool *p, sbx_warm_build_fn build, sbx_warm_drop_fn drop,
                         unsigned size)
{
  pthread_mutex_lock(&p->lock);
  p->build = build;
  p->drop = drop;
  p->want = size > SBX_WARM_POOL_MAX ? SBX_WARM_POOL_MAX : size;
  pthread_mutex_unlock(&p->lock);
}

/* Caller holds the lock. */
static void ensure_thread(struct sbx_warm_pool *p)
{
  if (p->running || p->stopping || !p->build || p->want == 0)
    return;
  if (pthread_create(&p->thread, NULL, refill_main, p) == 0)
    p->running = true;
  else
    sbx_warn(p->name, "pool: cannot start the refill thread");
}

void sbx_warm_pool_want(struct sbx_warm_pool *p, const char *profile,
                        const struct sbx_limits *key)
{
  pthread_mutex_lock(&p->lock);
  find(p, profile, key, true);
  ensure_thread(p);
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

bool sbx_warm_pool_take(struct sbx_warm_pool *p, const char *profile,
                        const struct sbx_limits *key, void **priv, int *chan)
{
  bool got = false;
  pthread_mutex_lock(&p->lock);
  struct sbx_warm_key *k = find(p, profile, key, false);
  if (k && k->n > 0) {
    struct sbx_warm_entry e = k->idle[0];
    memmove(&k->idle[0], &k->idle[1], (size_t)(--k->n) * sizeof k->idle[0]);
    *priv = e.priv;
    *chan = e.chan;
    got = true;
  }
  ensure_thread(p);
  pthread_cond_signal(&p->wake);
  pthread_mutex_unlock(&p->lock);
  return got;
}

unsigned sbx_warm_pool_idle(struct sbx_warm_pool *p, const char *profile)
{
  unsigned n = 0;
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < p->nkeys; i++)
    if (!strcmp(p->keys[i].profile, profile))
      n += p->keys[i].n;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void sbx_warm_pool_stop(struct sbx_warm_pool *p)
{
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  bool join = p->running;
  p->running = false;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  if (join)
    pthread_join(p->thread, NULL);
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < p->nkeys; i++)
    while (p->keys[i].n > 0) {
      struct sbx_warm_entry e = p->keys[i].idle[--p->keys[i].n];
      pthread_mutex_unlock(&p->lock);
      p->drop(e.priv, e.chan);
      pthread_mutex_lock(&p->lock);
    }
  p->nkeys = 0;
  pthread_mutex_unlock(&p->lock);
}
