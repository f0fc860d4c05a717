/* core.h — the daemon's world as the API sees it: configuration, the
 * store, profiles, live sessions, the execution queue, and the operations
 * on them.  Every operation takes the caller's tenant and treats another
 * tenant's object exactly like a missing one (SBX_E_NOT_FOUND).
 *
 * Lifecycle: sbx_core_start() opens the store, probes drivers, recovers
 * what a previous run left, starts the reaper and the execution workers;
 * sbx_core_stop() ends running work with reason daemon_shutdown, destroys
 * every sandbox and closes the store. */
#ifndef SBX_CORE_CORE_H
#define SBX_CORE_CORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "core/profile.h"
#include "runtime/sandbox.h"
#include "store/store.h"

struct sbx_core;
struct sbx_principal;

struct sbx_core_config {
  const char *state_dir;        /* absolute */
  const char *database_url;     /* NULL/"" → SQLite under state_dir */
  const char *init_path;        /* sbx-init binary */
  const char *runsc_path;
  bool unsafe_process_driver;
  const char *default_profile;  /* "container" */
  unsigned workers;             /* execution workers */
  unsigned queue_max;           /* queued executions before 429 */
  int64_t default_ttl_s;        /* session TTL when the request gives none */
  int64_t max_ttl_s;
  int64_t idle_timeout_s;       /* 0: no idle expiry */
  unsigned reaper_interval_ms;
  unsigned max_sessions_per_tenant;
  struct sbx_profile *profiles; /* operator-defined, merged over built-ins */
  size_t nprofiles;
};

int sbx_core_start(const struct sbx_core_config *cfg, struct sbx_core **out,
                   struct sbx_error *err);
void sbx_core_stop(struct sbx_core *core);

struct sbx_store_handle *sbx_core_store(struct sbx_core *core);
const struct sbx_profile_set *sbx_core_profiles(struct sbx_core *core);
/* Readiness for /readyz: store reachable and at least one profile usable. */
json_t *sbx_core_readiness(struct sbx_core *core, bool *ready);
/* Counts one HTTP request (metrics). */
void sbx_core_observe_http(struct sbx_core *core, const char *route, int status, uint64_t us);

/* Keys: create prints nothing; *key_out is "sbx_<id>_<secret>" (caller frees). */
int sbx_keys_create(struct sbx_store_handle *st, const char *tenant, bool admin, char **key_out,
                    struct sbx_error *err);
int sbx_keys_verify(struct sbx_store_handle *st, const char *token, struct sbx_principal *who,
                    struct sbx_error *err);

/* Sessions (core/session.c).  `body` is the parsed request body (borrowed);
 * *out is a new JSON reference on success. */
int sbx_session_create(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                       json_t **out, struct sbx_error *err);
int sbx_session_get(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                    json_t **out, struct sbx_error *err);
int sbx_session_list(struct sbx_core *core, const struct sbx_principal *who, const char *status,
                     const char *cursor, int limit, json_t **out, struct sbx_error *err);
int sbx_session_patch(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      json_t *body, json_t **out, struct sbx_error *err);
int sbx_session_delete(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                       struct sbx_error *err);
/* Synchronous exec; *out is the result object. */
int sbx_session_exec(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                     json_t *body, json_t **out, struct sbx_error *err);

/* A live session held for a file operation: the sandbox stays alive until
 * sbx_session_release().  NULL with err if missing/not ready. */
struct sbx_live_session;
struct sbx_live_session *sbx_session_acquire(struct sbx_core *core,
                                             const struct sbx_principal *who, const char *id,
                                             struct sbx_error *err);
struct sbx_sandbox *sbx_live_sandbox(struct sbx_live_session *ls);
void sbx_session_release(struct sbx_core *core, struct sbx_live_session *ls);

/* Executions (core/execution.c). */
int sbx_execution_create(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                         json_t **out, struct sbx_error *err);
/* wait_s > 0 long-polls until the status is final or the time is up. */
int sbx_execution_get(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      double wait_s, json_t **out, struct sbx_error *err);
int sbx_execution_list(struct sbx_core *core, const struct sbx_principal *who,
                       const char *status, const char *cursor, int limit, json_t **out,
                       struct sbx_error *err);
int sbx_execution_cancel(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                         json_t **out, struct sbx_error *err);
int sbx_execution_file(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                       const char *path, void **data, size_t *size, struct sbx_error *err);

#endif
