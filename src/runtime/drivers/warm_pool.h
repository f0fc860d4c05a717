/* warm_pool.h — a driver's warm pool of started sandboxes, per (profile,
 * limits fixed at start) key, refilled by a thread of its own.
 *
 * A pooled sandbox is handed out once and never comes back: destroy tears
 * it down like any other.  Keys come from prewarm() (the profiles' own
 * limits), so odd request sizes do not get pools of their own.  The refill
 * thread starts with the first key, which is after recovery (recovery
 * would kill idle entries).  Each driver keeps its own pool object. */
#ifndef SBX_RUNTIME_DRIVERS_WARM_POOL_H
#define SBX_RUNTIME_DRIVERS_WARM_POOL_H

#include <pthread.h>
#include <stdbool.h>

#include "common/err.h"
#include "runtime/driver.h"

#define SBX_WARM_POOL_MAX 8 /* idle sandboxes per key, at most */
#define SBX_WARM_POOL_KEYS 16

/* Starts a sandbox with id rid for a key's limits (what the driver fixes
 * at start; the rest are applied at the hand-over). */
typedef int (*sbx_warm_build_fn)(const char *rid, const struct sbx_limits *key, void **priv,
                                 int *chan, struct sbx_error *err);
/* Tears one down completely (closes chan). */
typedef void (*sbx_warm_drop_fn)(void *priv, int chan);

struct sbx_warm_entry {
  void *priv;
  int chan;
};

struct sbx_warm_key {
  char profile[64];
  struct sbx_limits limits;
  unsigned n;
  struct sbx_warm_entry idle[SBX_WARM_POOL_MAX];
};

struct sbx_warm_pool {
  const char *name;       /* for logs: "gvisor" */
  const char *rid_prefix; /* ids of pooled sandboxes: "gvp_" */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct sbx_warm_key keys[SBX_WARM_POOL_KEYS];
  unsigned nkeys, want;
  bool running, stopping;
  pthread_t thread;
  sbx_warm_build_fn build;
  sbx_warm_drop_fn drop;
};

#define SBX_WARM_POOL_INIT(name_, prefix_)                                                      \
  {                                                                                             \
    .name = (name_), .rid_prefix = (prefix_), .lock = PTHREAD_MUTEX_INITIALIZER,                \
    .wake = PTHREAD_COND_INITIALIZER, .want = 1                                                 \
  }

/* size: idle sandboxes kept per key (0 disables, at most SBX_WARM_POOL_MAX). */
void sbx_warm_pool_start(struct sbx_warm_pool *p, sbx_warm_build_fn build, sbx_warm_drop_fn drop,
                         unsigned size);
/* Remembers a key to keep warm (starts the refill thread if needed). */
void sbx_warm_pool_want(struct sbx_warm_pool *p, const char *profile,
                        const struct sbx_limits *key);
/* Hands over an idle sandbox of that key, or false (then build cold). */
bool sbx_warm_pool_take(struct sbx_warm_pool *p, const char *profile,
                        const struct sbx_limits *key, void **priv, int *chan);
/* Idle sandboxes of every key of profile (the sandbox_pool_idle gauge). */
unsigned sbx_warm_pool_idle(struct sbx_warm_pool *p, const char *profile);
/* Stops the refill thread and drops every idle sandbox. */
void sbx_warm_pool_stop(struct sbx_warm_pool *p);

#endif
