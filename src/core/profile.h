/* profile.h — profiles: named presets of a driver, limit ceilings, image
 * and pool size (DESIGN §3).  Built-ins: container (default), gvisor,
 * gvisor-small, process; the operator may add or override profiles in the
 * config file.  A request names a profile (or a bare driver name) and may
 * lower limits, never raise them above the profile's ceiling. */
#ifndef SBX_CORE_PROFILE_H
#define SBX_CORE_PROFILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "runtime/driver.h"

struct sbx_profile {
  char name[64];
  char driver_name[32];
  const struct sbx_driver *driver; /* resolved at start; NULL if unknown */
  char image[256];
  struct sbx_limits limits;        /* ceilings, also the defaults */
  uint64_t default_timeout_s;      /* exec timeout when the request gives none */
  int pool_size;                   /* warm sandboxes kept ready (drivers that pool) */
  bool available;
  char reason[256];                /* why not available */
};

struct sbx_profile_set {
  struct sbx_profile *items;
  size_t count;
  char default_name[64];
};

/* Built-ins followed by operator profiles (same name overrides). */
int sbx_profiles_build(const struct sbx_profile *extra, size_t nextra, const char *default_name,
                       struct sbx_profile_set *out, struct sbx_error *err);
/* Probes each profile's driver (each driver once) and fills available/reason. */
void sbx_profiles_probe(struct sbx_profile_set *set, const struct sbx_driver_env *env);
void sbx_profiles_free(struct sbx_profile_set *set);
/* NULL name → the default.  NOT_FOUND-style INVALID error naming the field. */
const struct sbx_profile *sbx_profile_find(const struct sbx_profile_set *set, const char *name,
                                           struct sbx_error *err);
/* Fills a profile with built-in defaults for the given driver. */
void sbx_profile_defaults(struct sbx_profile *p, const char *name, const char *driver);
json_t *sbx_profile_json(const struct sbx_profile *p, bool is_default);
json_t *sbx_limits_json(const struct sbx_limits *l);

#endif
