/* quota.h — per-tenant quotas and rate limits.
 *
 * Four limits per tenant, each 0 = unlimited, and the profiles it may use:
 *   sessions             live sessions                  (quota_sessions)
 *   executions           queued + running executions    (quota_executions)
 *   cpu_seconds_per_day  CPU seconds since 00:00 UTC of executions and of
 *                        sessions' cgroups (execs, background processes,
 *                        contexts: core/session_cpu.c)  (quota_cpu_seconds_per_day)
 *   requests_per_second  a token bucket refilled at rate_limit_rps, holding
 *                        at most rate_limit_burst       (rate_limit_*)
 *   profiles             the profiles its sessions, executions and tools
 *                        may name (allowed_profiles; all when unset)
 * Defaults come from [server]; a [tenant.NAME] section overrides any of them
 * for that tenant (docs/configuration.md).
 *
 * A breach is SBX_E_QUOTA (429 quota_exceeded) or SBX_E_RATE (429
 * rate_limited) with English and French messages.  The limit travels in
 * err->field as "NAME:VALUE" (e.g. "sessions:5"); api/envelope.c turns that
 * into details {"limit": NAME, "value": VALUE} for these two codes.
 *
 * State lives in memory, in lock stripes by tenant id; the CPU-seconds of
 * the day are seeded, for each tenant on first use, from the store's usage
 * records of today (so a restart forgets nothing). */
#ifndef SBX_CORE_QUOTA_H
#define SBX_CORE_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct sbx_core;
struct sbx_principal;

/* A field counts only if its SBX_QUOTA_SET_* bit is in `set`: a tenant
 * inherits [server]'s unset fields, [server] the built-ins'.  A zeroed
 * struct sets nothing. */
enum {
  SBX_QUOTA_SET_SESSIONS = 1,
  SBX_QUOTA_SET_EXECUTIONS = 2,
  SBX_QUOTA_SET_CPU = 4,
  SBX_QUOTA_SET_RPS = 8,
  SBX_QUOTA_SET_BURST = 16,
  SBX_QUOTA_SET_PROFILES = 32,
};
/* The profiles a tenant may use: names separated by ",", as configured
 * (spaces dropped); "" = every profile. */
#define SBX_QUOTA_PROFILES_MAX 512
struct sbx_quota_limits {
  unsigned set;
  int64_t sessions;
  int64_t executions;
  double cpu_seconds_per_day;
  double rps;
  double burst;
  char profiles[SBX_QUOTA_PROFILES_MAX];
};

struct sbx_quota_tenant {
  char name[128];
  struct sbx_quota_limits lim;
};

#define SBX_QUOTA_MAX_TENANTS 256 /* [tenant.NAME] sections */

/* What the daemon itself holds for tenants, bounded so one tenant cannot
 * take it from the others (core/resources.c): output of background
 * processes kept in memory, overall and per tenant, and the daemon's file
 * descriptors per session and per tenant.  [server] only; 0 = the default. */
#define SBX_RES_OUTPUT_MEMORY (256ULL << 20)
#define SBX_RES_OUTPUT_MEMORY_PER_TENANT (64ULL << 20)
#define SBX_RES_FDS_PER_SESSION 512
#define SBX_RES_FDS_PER_TENANT 1024
struct sbx_res_config {
  uint64_t output_memory;            /* output_memory */
  uint64_t output_memory_per_tenant; /* output_memory_per_tenant */
  unsigned fds_per_session;          /* fds_per_session */
  unsigned fds_per_tenant;           /* fds_per_tenant */
};

/* Plain storage (no pointers): copied by value into the core's config. */
struct sbx_quota_config {
  struct sbx_res_config res;
  struct sbx_quota_limits defaults;
  struct sbx_quota_tenant tenants[SBX_QUOTA_MAX_TENANTS];
  size_t ntenants;
};

/* Every limit unset (same as a zeroed struct). */
void sbx_quota_config_defaults(struct sbx_quota_config *c);
/* One setting: tenant NULL for [server] (quota_sessions, quota_executions,
 * quota_cpu_seconds_per_day, rate_limit_rps, rate_limit_burst,
 * allowed_profiles), else for [tenant.NAME] (the same keys, or without
 * their prefix: sessions, executions, cpu_seconds_per_day, rps, burst,
 * profiles).  Returns 1 when handled,
 * 0 when key is not a quota setting (the caller decides), -1 on a bad
 * value. */
int sbx_quota_config_set(struct sbx_quota_config *c, const char *tenant, const char *key,
                         const char *value, struct sbx_error *err);
/* The limits that apply to tenant (name): its section over [server] over
 * the built-ins; legacy_sessions (max_sessions_per_tenant) is the built-in
 * session limit. */
struct sbx_quota_limits sbx_quota_config_resolve(const struct sbx_quota_config *c,
                                                 const char *tenant, int64_t legacy_sessions);

/* ---- the token bucket (pure; unit-tested) ---- */
struct sbx_token_bucket {
  double tokens;
  uint64_t last_ns; /* 0: never used (starts full) */
};
/* Takes one token at time now_ns for a bucket refilled at rate per second
 * up to burst.  true if taken; else false and *retry_s is the whole number
 * of seconds (>= 1) until a token is there. */
bool sbx_token_bucket_take(struct sbx_token_bucket *b, double rate, double burst,
                           uint64_t now_ns, unsigned *retry_s);

/* ---- runtime (core->quota) ---- */
struct sbx_quota;
struct sbx_quota *sbx_quota_new(struct sbx_core *core);
void sbx_quota_free(struct sbx_quota *q);

/* After authentication, for every request: the rate limit.  *retry_s is
 * for Retry-After. */
int sbx_quota_request(struct sbx_core *core, const struct sbx_principal *who, unsigned *retry_s,
                      struct sbx_error *err);
/* Session create: reserves room for one more live session (counting the
 * live table; in a fleet, every node's sessions through a hold in the
 * database, named in hold); returns 0 with a reservation that MUST be
 * given back by sbx_quota_session_done once the session is in the live
 * table (and stored) or failed. */
#define SBX_QUOTA_HOLD_MAX 48
int sbx_quota_session_begin(struct sbx_core *core, const struct sbx_principal *who,
                            char hold[SBX_QUOTA_HOLD_MAX], struct sbx_error *err);
void sbx_quota_session_done(struct sbx_core *core, int64_t tenant_id, const char *hold);
/* The tenant's executions limit (queued + running; 0: none), for the
 * fleet's count in the database. */
int64_t sbx_quota_executions_limit(struct sbx_core *core, const struct sbx_principal *who);
/* The 429 of an executions quota reached (count of limit): returns -1. */
int sbx_quota_executions_error(struct sbx_error *err, int64_t count, int64_t limit);
/* Execution create: checks the CPU-seconds of the day and admits id among
 * the tenant's queued + running executions. */
int sbx_quota_exec_admit(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                         struct sbx_error *err);
/* Counts id (queued again at start) without checking; idempotent. */
void sbx_quota_exec_track(struct sbx_core *core, int64_t tenant_id, const char *id);
/* id reached a final status (or was never queued); idempotent. */
void sbx_quota_exec_end(struct sbx_core *core, int64_t tenant_id, const char *id);
/* The tenant may use the profile named `profile` (sessions, executions,
 * tool manifests): 0, or -1 with SBX_E_FORBIDDEN naming field. */
int sbx_quota_profile_check(struct sbx_core *core, const struct sbx_principal *who,
                            const char *profile, const char *field, struct sbx_error *err);
/* Session exec: 429 once the CPU-seconds of the day are used up. */
int sbx_quota_cpu_check(struct sbx_core *core, const struct sbx_principal *who,
                        struct sbx_error *err);
/* Adds the CPU seconds of a finished exec or execution.  Call it after
 * the run's usage record is stored (sbx_obs_*_done): the first call for a
 * tenant seeds from the store and must find this run there. */
void sbx_quota_cpu_add(struct sbx_core *core, int64_t tenant_id, double seconds);
/* Adds CPU seconds measured on a session's cgroup (core/session_cpu.c):
 * seeds from the store first, then always adds (their usage record is
 * written later, in batches). */
void sbx_quota_cpu_charge(struct sbx_core *core, int64_t tenant_id, double seconds);
/* True when the tenant has a daily CPU limit (or its limits are not known
 * yet): CPU it burns must then be charged at once, not at the next tick. */
bool sbx_quota_cpu_limited(struct sbx_core *core, int64_t tenant_id);
/* True once the tenant's CPU-seconds of the day are used up. */
bool sbx_quota_cpu_exhausted(struct sbx_core *core, int64_t tenant_id);

#endif
