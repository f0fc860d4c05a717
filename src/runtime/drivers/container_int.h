/* container_int.h — what the wasm driver (wasm.c) shares of the container
 * driver (container.c): its sandboxes are container sandboxes whose
 * sbx-init also keeps an engine running (init/engine.c), so the engine is
 * always inside the container wall, never the only wall. */
#ifndef SBX_RUNTIME_DRIVERS_CONTAINER_INT_H
#define SBX_RUNTIME_DRIVERS_CONTAINER_INT_H

#include "runtime/driver.h"

/* What sbx-init also runs: its argv ("sbx-init", "--root", "/",
 * "--engine", PROG, "--engine-arg", …, NULL) and its stdin (the runner's
 * script: a sealed memfd the driver keeps open). */
struct sbx_ctr_engine {
  char *const *init_argv;
  int stdin_fd;
};

/* The container driver's probe (isolation, sbx-init, warm pool), done once
 * whichever driver asks first; the same verdict after. */
int sbx_ctr_setup(const struct sbx_driver_env *env, char *why, size_t whylen);
/* From now on profile's sandboxes, pooled ones included, run engine
 * (which must outlive the daemon's drivers). */
void sbx_ctr_engine_profile(const char *profile, const struct sbx_ctr_engine *engine);
/* create() of a container sandbox owned by drv, running engine (NULL:
 * none), and the members both drivers' tables share. */
int sbx_ctr_create(const struct sbx_driver *drv, const struct sbx_sandbox_spec *spec,
                   const struct sbx_ctr_engine *engine, struct sbx_sandbox **out,
                   struct sbx_error *err);
void sbx_ctr_destroy(struct sbx_sandbox *sb);
int sbx_ctr_usage(struct sbx_sandbox *sb, struct sbx_usage *out);
int sbx_ctr_memory(struct sbx_sandbox *sb, struct sbx_memory *out);
int sbx_ctr_oom_kills(struct sbx_sandbox *sb, uint64_t *out);
void sbx_ctr_prewarm(const char *profile, const struct sbx_limits *limits);
unsigned sbx_ctr_pool_idle(const char *profile, const struct sbx_limits *limits);

#endif
