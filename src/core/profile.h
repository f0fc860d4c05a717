/* profile.h — profiles: named presets of a driver, default limits and
 * their maxima, image and pool size (DESIGN §3), and each profile's probe
 * state.  Built-ins: container (default), gvisor, gvisor-small, process;
 * the operator may add or override profiles in the config file.  A
 * request names a profile (or a bare driver name), gets the profile's
 * defaults for the limits it leaves out, and may ask for any value up to
 * the profile's maximum.
 *
 * Probing: the daemon serves before its drivers are probed.  One thread
 * per driver runs the driver's probe (bounded by the driver), then hooks
 * (recovery), then publishes the result to that driver's profiles; until
 * then a profile is SBX_PROFILE_PROBING.  The result (reason, note,
 * available) is written once, before the state is stored with release
 * order, so API threads that load the state first (acquire) read them
 * without a lock. */
#ifndef SBX_CORE_PROFILE_H
#define SBX_CORE_PROFILE_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "runtime/driver.h"

enum sbx_profile_state { SBX_PROFILE_PROBING, SBX_PROFILE_AVAILABLE, SBX_PROFILE_UNAVAILABLE };

struct sbx_profile {
  char name[64];
  char driver_name[32];
  const struct sbx_driver *driver; /* resolved at start; NULL if unknown */
  char image[256];
  /* What a request gets for each limit it leaves out (`limits` is the
   * older name, still used by callers that mean the defaults). */
  union {
    struct sbx_limits defaults;
    struct sbx_limits limits;
  };
  struct sbx_limits max;      /* the most a request may ask for; 0: no maximum */
  uint64_t default_timeout_s; /* exec timeout when the request gives none */
  int pool_size;              /* warm sandboxes kept ready (drivers that pool) */
  _Atomic int state;          /* enum sbx_profile_state; see the top */
  _Atomic bool available;     /* state == SBX_PROFILE_AVAILABLE */
  char reason[256];           /* why not available */
  char note[256];             /* how the driver runs here, and why (may be "") */
};

/* Called from a driver's probe thread.  probed: after the driver's probe,
 * before its profiles say available (recovery goes here, so no new
 * sandbox of the driver exists while it runs).  ready: for each profile
 * that became available (prewarm). */
struct sbx_probe_hooks {
  void (*probed)(void *ctx, const struct sbx_driver *d, bool ok);
  void (*ready)(void *ctx, const struct sbx_profile *p);
  void *ctx;
};

struct sbx_profile_set {
  struct sbx_profile *items;
  size_t count;
  char default_name[64];
  /* probing */
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast when a state becomes final */
  bool sync_ready;
  atomic_bool stopping; /* drivers' env.cancel points here */
  uint64_t probe_t0_ms;
  struct sbx_prober *probers;
  size_t nprobers;
};

/* Built-ins followed by operator profiles (same name overrides). */
int sbx_profiles_build(const struct sbx_profile *extra, size_t nextra, const char *default_name,
                       struct sbx_profile_set *out, struct sbx_error *err);
/* Starts one thread per distinct driver: probe, hooks, publish.  env must
 * outlive the probes (sbx_profiles_probe_stop); its cancel is set here. */
int sbx_profiles_probe_start(struct sbx_profile_set *set, struct sbx_driver_env *env,
                             const struct sbx_probe_hooks *hooks, struct sbx_error *err);
/* Asks running probes to give up, wakes waiters, joins the threads. */
void sbx_profiles_probe_stop(struct sbx_profile_set *set);
void sbx_profiles_free(struct sbx_profile_set *set);
/* The state, with acquire order (then reason/note/available are final). */
enum sbx_profile_state sbx_profile_state(const struct sbx_profile *p);
/* Waits up to timeout_ms while p is probing (returns early on stop);
 * returns its state then. */
enum sbx_profile_state sbx_profile_wait(struct sbx_profile_set *set, const struct sbx_profile *p,
                                        uint64_t timeout_ms);
/* NULL name → the default.  NOT_FOUND-style INVALID error naming the field. */
const struct sbx_profile *sbx_profile_find(const struct sbx_profile_set *set, const char *name,
                                           struct sbx_error *err);
/* 0 when p's driver has capability cap (SBX_CAP_*), else -1 with an
 * INVALID error naming field: "profile 'P' (driver D) <lacks_en>; use a
 * profile whose capabilities list <cap's name>", and lacks_fr in French. */
int sbx_profile_require(const struct sbx_profile *p, uint32_t cap, const char *field,
                        const char *lacks_en, const char *lacks_fr, struct sbx_error *err);
/* Fills a profile with built-in defaults and host-derived maxima. */
void sbx_profile_defaults(struct sbx_profile *p, const char *name, const char *driver);
/* The built-in maxima for a host with ncpu online CPUs and ram bytes of
 * memory (see profile.c for the shares and why). */
void sbx_limits_host_max(long ncpu, uint64_t ram, struct sbx_limits *out);
json_t *sbx_profile_json(const struct sbx_profile_set *set, const struct sbx_profile *p,
                         bool is_default);
json_t *sbx_limits_json(const struct sbx_limits *l);

#endif
