/* internal.h — struct sbx_core and what core/ files share.  Not for api/. */
#ifndef SBX_CORE_INTERNAL_H
#define SBX_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"
#include "core/exec_queue.h"
#include "core/quota.h"
#include "core/schema.h"
#include "obs/trace.h"
#include "store/store.h"

/* Core-internal: the store and a held session's sandbox never leave core
 * (the API goes through core's operations, core.h). */
struct sbx_store_handle *sbx_core_store(struct sbx_core *core);
struct sbx_sandbox *sbx_live_sandbox(struct sbx_live_session *ls);

/* One in-flight exec, so delete/shutdown can cancel it. */
struct sbx_exec_slot {
  struct sbx_cancel cancel;
  struct sbx_exec_slot *next;
};

/* A session whose sandbox is alive.  Refcounted: the API (exec, files),
 * the reaper and delete may hold it at once; the sandbox is destroyed when
 * the last reference goes after it was marked dying. */
struct sbx_live_session {
  char id[64];
  int64_t tenant_id;
  const struct sbx_profile *profile;
  struct sbx_sandbox *sb;
  struct sbx_limits limits;
  char **env; /* session env "K=V" (from the create request) */
  int refs;   /* guarded by core->sess_lock */
  bool dying;
  enum sbx_reason dying_reason;
  struct sbx_exec_slot *execs; /* guarded by core->sess_lock */
  int64_t expires_at;          /* guarded by core->sess_lock */
  int64_t last_used_at;
  int64_t last_touch_stored;    /* when last_used_at last reached the store */
  struct sbx_proc_table *procs; /* background processes (core/process.c); own lock */
  /* The egress policy in force and, once it was ever an
   * allowlist, the sandbox's link to the host (NULL on the none path).
   * Both change only under net_lock (PATCH). */
  pthread_mutex_t net_lock;
  struct sbx_net_policy *policy;
  struct sbx_net_attachment *net;
  /* The metadata as stored (PATCH replaces it, under net_lock): what an
   * exec's usage record and span carry, without a store read per exec. */
  char *metadata_json;
  struct sbx_image *image; /* held while the sandbox lives; NULL: host pack */
  /* core/session_cpu.c: the sandbox cgroup's CPU charged to the tenant's
   * quota, whatever ran it (execs, background processes, contexts). */
  pthread_mutex_t cpu_lock;
  bool cpu_metered;        /* the driver reports cgroup usage */
  double cpu_seen;         /* the cgroup's CPU seconds at the last charge */
  double cpu_unrecorded;   /* charged but in no usage record yet (< 0: execs ran ahead) */
  int64_t cpu_recorded_at; /* when the last session usage record was written */
  /* Two readings of the cgroup's CPU (sbx_now_ms, seconds) at least a
   * second apart, newest first: the window a metrics sample averages over. */
  uint64_t cpu_mark_ms[2];
  double cpu_mark[2];
  struct sbx_live_session *next;
};

/* An execution being run by a worker, so cancel can reach it. */
struct sbx_running_exec {
  char id[64];
  struct sbx_cancel cancel;
  struct sbx_running_exec *next;
};

struct sbx_core {
  struct sbx_core_config cfg;
  char *state_dir;
  struct sbx_store_handle store;
  struct sbx_profile_set profiles;
  struct sbx_driver_env drv_env;
  struct sbx_driver_setting *drv_settings; /* drv_env.settings (cfg.driver_settings) */

  pthread_mutex_t sess_lock;
  struct sbx_live_session *sessions;
  size_t nsessions;

  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;       /* work available / stopping */
  pthread_cond_t done_cond;    /* an execution reached a final status */
  pthread_cond_t stored_cond;  /* a queued row was stored (or could not be) */
  struct sbx_exec_queue *exq;  /* the scheduler (core/exec_queue.h), under q_lock */
  unsigned tenant_running_cap; /* cfg.workers_per_tenant or workers-1 (at least 1) */
  struct sbx_running_exec *running;
  struct sbx_queued_row *queued_rows; /* execution.c: rows queued here, until taken */
  pthread_t *workers;
  unsigned nworkers;
  bool stopping;
  bool stopped; /* sbx_core_stop ran */

  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t reaper_lock;
  pthread_cond_t reaper_cond;

  int64_t started_at;
  atomic_ullong http_requests;
  atomic_ullong http_errors;
  struct sbx_quota *quota; /* core/quota.c */
  struct sbx_fleet *fleet; /* core/fleet.c; NULL when not in a fleet */
  bool images_ok;          /* the image store opened */
  char images_why[256];    /* why not */
};

/* core/session.c */
/* sbx_session_acquire without counting as activity (the idle timeout):
 * for looking at a session rather than using it. */
struct sbx_live_session *sbx_session_peek(struct sbx_core *core, const struct sbx_principal *who,
                                          const char *id, struct sbx_error *err);
/* Records activity in the store, at most once a minute per session: the
 * reaper works from memory, the stored value is for operators. */
void sbx_session_touch(struct sbx_core *core, struct sbx_live_session *ls);
void sbx_sessions_reap(struct sbx_core *core, int64_t now);
void sbx_sessions_shutdown(struct sbx_core *core);
/* A stored unix time as the API shows it: an RFC 3339 string, or null for
 * "not yet" (0 or less). */
json_t *sbx_time_json(int64_t t);
/* What an exec in a session checks first, buffered or streamed alike: the
 * request's fields, the tenant's CPU quota; then the held session. */
struct sbx_live_session *sbx_session_exec_acquire(struct sbx_core *core,
                                                  const struct sbx_principal *who,
                                                  const char *id, json_t *body,
                                                  struct sbx_error *err);

/* core/execution.c */
int sbx_executions_start_workers(struct sbx_core *core, struct sbx_error *err);
void sbx_executions_shutdown(struct sbx_core *core);
/* Queues a stored `queued` row again (recovery): over the tenant's queue
 * bound if need be, never over the whole queue's (-1: full). */
int sbx_executions_enqueue(struct sbx_core *core, const char *id, int64_t tenant_id);

/* core/fleet.c (the rest in core/fleet.h) */
int sbx_fleet_start(struct sbx_core *core, struct sbx_error *err);
/* Leaves the fleet: its sessions and running executions are ended in the
 * store, its taken executions go back to the queue. */
void sbx_fleet_stop(struct sbx_core *core);
void sbx_fleet_free(struct sbx_core *core);
/* One tenant's running executions fleet-wide (the claim's cap). */
int64_t sbx_fleet_tenant_cap(struct sbx_core *core);
/* A place on this node for a create no placement reserved. */
int sbx_fleet_reserve_here(struct sbx_core *core, struct sbx_error *err);
/* core/session.c, for the fleet */
bool sbx_session_is_live_here(struct sbx_core *core, const struct sbx_principal *who,
                              const char *id);
/* Ends every live session (status, why): the fleet gave them up. */
void sbx_sessions_drop(struct sbx_core *core, const char *status, enum sbx_reason why);

/* core/recovery.c */
/* The store's side of recovery, at start (no driver needed). */
void sbx_recover(struct sbx_core *core);
/* One driver's leftovers, from its probe thread once it probed usable,
 * before any of its profiles is available. */
void sbx_recover_driver(struct sbx_core *core, const struct sbx_driver *d);

/* core/core.c */
/* 0 if p can take work now; waits up to probe_wait_s while it is probing,
 * then 503 runtime_unavailable with the reason (en+fr). */
int sbx_core_profile_ready(struct sbx_core *core, const struct sbx_profile *p,
                           struct sbx_error *err);
/* Waits until p's probe has finished (or the daemon stops): for work that
 * is already accepted (queued executions).  Its final state. */
enum sbx_profile_state sbx_core_profile_settle(struct sbx_core *core,
                                               const struct sbx_profile *p);

/* core/run.c — what a session exec and an execution share. */
/* The environment of a workload: base, the image's Env, the
 * egress proxy's variables, the session env, the request env —
 * each may be NULL, later ones win. */
char **sbx_run_env(const char *const *image_env, const char *const *net_env,
                   char *const *session_env, char *const *request_env);
/* sbx_run_env for an exec in a live session (its net env and session env). */
char **sbx_session_run_env(struct sbx_live_session *ls, char *const *request_env);

/* core/image_use.c: a request's `image`, the store, the image
 * config applied to execs. */
#define SBX_IMAGE_REF_MAX 700
struct sbx_image;
void sbx_core_images_start(struct sbx_core *core);
/* ref_out: the canonical reference, "" for the host pack.  400 for a bad
 * reference or a profile whose driver lacks SBX_CAP_IMAGES. */
int sbx_core_image_check(const struct sbx_profile *p, json_t *v, char ref_out[SBX_IMAGE_REF_MAX],
                         struct sbx_error *err);
/* *out held (NULL for the host pack); pulls per the daemon's `pull`. */
int sbx_core_image_acquire(struct sbx_core *core, const char *ref, struct sbx_image **out,
                           struct sbx_error *err);
/* Fills spec's layers, digest and run_uid/gid (the image's User; 400 when
 * it names an id the image does not define or one outside the sandbox's). */
int sbx_core_image_spec(const struct sbx_image *img, struct sbx_sandbox_spec *spec,
                        struct sbx_error *err);
/* Applies the image config to spec: Entrypoint+Cmd when use_default_command,
 * the image's interpreter for `language` (400 when it has none), WorkingDir
 * as the default cwd. */
int sbx_core_image_exec(const struct sbx_image *img, struct sbx_exec_spec *spec,
                        bool use_default_command, struct sbx_error *err);
const char *const *sbx_core_image_env(const struct sbx_image *img);

/* core/archive_extract.c: the check of every entry of a tar before
 * anything is written (sbx_archive_extract's first pass; the fuzzer's). */
int sbx_archive_validate(const void *data, size_t len, const struct sbx_archive_limits *lim,
                         struct sbx_error *err);

/* core/network.c: the net module's life with the daemon's, and
 * the fail-closed checks of an allowlist request. */
struct sbx_net_policy;
struct sbx_net_attachment;
void sbx_core_net_start(struct sbx_core *core);
void sbx_core_net_stop(struct sbx_core *core);
/* 0 for none; 400 if the profile's driver cannot enforce an allowlist,
 * 503 if this host cannot (the net module did not start). */
int sbx_core_net_check(const struct sbx_profile *profile, const struct sbx_net_policy *policy,
                       struct sbx_error *err);
/* A sandbox linked while its driver creates it (SBX_CAP_EGRESS_AT_START,
 * gvisor): the ctx of spec.net_prepare; att is the link it made. */
struct sbx_core_net_prep {
  const char *sandbox_id;
  int64_t tenant_id;
  const struct sbx_net_policy *policy;
  struct sbx_net_attachment *att;
};
/* Fills spec's net_* hook from prep when the profile's driver links at
 * start and policy is an allowlist; leaves them NULL otherwise. */
void sbx_core_net_prepare(struct sbx_core_net_prep *prep, const struct sbx_profile *profile,
                          const char *sandbox_id, int64_t tenant_id,
                          const struct sbx_net_policy *policy, struct sbx_sandbox_spec *spec);
/* Detaches a link the hook made that nobody took (create failed). */
void sbx_core_net_prep_drop(struct sbx_core_net_prep *prep);
/* Links sb to the host under policy (*out NULL and nothing done for none).
 * prep (may be NULL): a link the driver's create already made is taken
 * from it instead. */
int sbx_core_net_attach(const char *sandbox_id, int64_t tenant_id, struct sbx_sandbox *sb,
                        const struct sbx_net_policy *policy, struct sbx_core_net_prep *prep,
                        struct sbx_net_attachment **out, struct sbx_error *err);
/* core/sandbox_up.c: one sandbox up and down, for sessions and executions. */
/* The request fields every sandbox-building call shares. */
struct sbx_sandbox_req {
  const struct sbx_profile *profile;
  struct sbx_limits limits;
  struct sbx_net_policy *policy; /* owned; must outlive the sandbox it built */
  json_t *metadata;              /* borrowed from the body, checked */
  char image[SBX_IMAGE_REF_MAX]; /* canonical reference; "" for the host pack */
};
/* profile, image, limits, network, metadata of body (other fields are the
 * caller's).  On failure nothing is left to free. */
int sbx_core_sandbox_parse(struct sbx_core *core, json_t *body, struct sbx_sandbox_req *rq,
                           struct sbx_error *err);
void sbx_core_sandbox_req_free(struct sbx_sandbox_req *rq);
/* What a sandbox holds while it lives; down releases it in reverse. */
struct sbx_core_box {
  struct sbx_image *image; /* NULL: host pack */
  struct sbx_sandbox *sb;
  struct sbx_net_attachment *net; /* NULL on the none path */
};
struct sbx_box_want {
  const char *id;
  int64_t tenant_id;
  const struct sbx_sandbox_req *rq;
  struct sbx_exec_spec *exec; /* an execution's command gets the image's config; may be NULL */
  bool default_command;       /* exec: the image's Entrypoint+Cmd */
};
/* The step an up failed at, for the caller's reason. */
enum sbx_box_stage {
  SBX_BOX_NONE,
  SBX_BOX_IMAGE,   /* not in the store, not pullable */
  SBX_BOX_REQUEST, /* the image cannot run this request */
  SBX_BOX_CREATE,  /* the driver could not create it */
  SBX_BOX_ATTACH,  /* its network link could not be made */
};
int sbx_core_sandbox_up(struct sbx_core *core, const struct sbx_box_want *want,
                        struct sbx_core_box *box, enum sbx_box_stage *failed,
                        struct sbx_error *err);
void sbx_core_sandbox_down(struct sbx_core_box *box);

/* Runs spec in sb (writes long code to a file first), upgrading a kill by
 * the OOM killer to oom_killed/memory. */
int sbx_run_spec(struct sbx_sandbox *sb, const struct sbx_exec_spec *spec, char *const *env,
                 uint64_t timeout_ms, uint64_t output_cap, struct sbx_cancel *cancel,
                 struct sbx_exec_result *res, struct sbx_error *err);
/* Like sbx_run_spec, with the request's other fields (timeout_ms,
 * output_cap, cancel, on_output, live) taken from tmpl. */
int sbx_run_spec_ex(struct sbx_sandbox *sb, const struct sbx_exec_spec *spec, char *const *env,
                    const struct sbx_exec_request *tmpl, struct sbx_exec_result *res,
                    struct sbx_error *err);
/* Result object of DESIGN §4 (status, reason, exit_code, …). */
json_t *sbx_result_json(const struct sbx_exec_result *res);
/* The result's reason name, never "": a result whose runtime named no
 * cause gets its status's own (exit, signal, timeout, memory; internal for
 * a service error), so every final result says why it ended. */
const char *sbx_result_reason(const struct sbx_exec_result *res);
/* Adds "<name>" and "<name>_encoding" to o: a JSON string if valid UTF-8,
 * else base64. */
void sbx_json_set_output(json_t *o, const char *name, const char *buf, size_t len);
/* Error for a profile whose driver cannot run here (503, en+fr). */
int sbx_err_runtime_unavailable(struct sbx_error *err, const struct sbx_profile *p);

/* ---- Streaming exec, background processes ---- */
/* core/session.c: an exec slot (cancel token) registered on a live session,
 * so delete/expiry/shutdown cancel it and the reaper counts it as
 * activity.  slot_add fires the token at once if the session is dying. */
struct sbx_exec_slot *sbx_session_slot_add(struct sbx_core *core, struct sbx_live_session *ls);
void sbx_session_slot_remove(struct sbx_core *core, struct sbx_live_session *ls,
                             struct sbx_exec_slot *s);
/* core/process.c: frees a session's process table (after every process
 * thread ended: each holds a session reference). */
void sbx_procs_free(struct sbx_proc_table *t);
/* core/process.c: waits (bounded) until no process or streamed-exec thread
 * is left (daemon shutdown, after the sessions were killed). */
void sbx_procs_drain(void);
/* Counts a thread sbx_procs_drain() must wait for (streamed execs). */
void sbx_procs_thread_enter(void);
void sbx_procs_thread_leave(void);

/* core/session_cpu.c: CPU accounting from the sandbox's cgroup.  A
 * session's cgroup CPU is charged to its tenant's cpu_seconds_per_day as
 * it accrues (the reaper's tick, the end of each exec, the session's end);
 * usage records split it into the execs' own records (kind "exec", their
 * rusage) and "session" records for the rest (background processes,
 * contexts, what an exec's rusage missed), so their sum is what the
 * cgroup measured and a restart re-seeds the same total.  Drivers without
 * cgroup usage fall back to each exec's rusage. */
void sbx_session_cpu_start(struct sbx_live_session *ls);
/* The cgroup's CPU seconds now and the cores it used on average since a
 * reading at least a second old (or the start); -1 if not metered. */
int sbx_session_cpu_sample(struct sbx_live_session *ls, double *cpu_seconds, double *cores);
/* Charges the cgroup's CPU since the last charge; final at the end. */
void sbx_session_cpu_charge(struct sbx_core *core, struct sbx_live_session *ls, bool final);
/* After an exec of ls ended; recorded: its usage record (res->cpu_seconds)
 * was stored. */
void sbx_session_cpu_exec_done(struct sbx_core *core, struct sbx_live_session *ls,
                               int64_t tenant, const struct sbx_exec_result *res, bool recorded);
/* The one place an exec of a live session is finished (buffered, streamed,
 * background): its span's status, its metrics and usage record (ran: a
 * result the command produced, not a failure to start it), the session's
 * CPU against the tenant's quota. */
void sbx_session_exec_done(struct sbx_core *core, struct sbx_live_session *ls,
                           const struct sbx_principal *who, const struct sbx_exec_result *res,
                           bool ran, struct sbx_span *span);
/* A copy of ls's metadata as stored (NULL: none, or out of memory). */
char *sbx_session_metadata(struct sbx_live_session *ls);
/* Charges every live session and stops the background processes and
 * contexts of tenants whose quota is used up (the reaper's tick). */
void sbx_sessions_cpu_tick(struct sbx_core *core);
/* The `end` reason a follower of the session's streams gets: session_deleted,
 * session_expired, sandbox_lost, daemon_shutdown. */
const char *sbx_session_end_reason(enum sbx_reason why);

/* core/process.c: every running process of the table is killed with result
 * reason `why` (the CPU quota; returns how many); and the followers of each are told the
 * session ended (`end` {reason}). */
unsigned sbx_procs_stop(struct sbx_proc_table *t, const char *why);
void sbx_procs_session_end(struct sbx_proc_table *t, const char *reason);
/* core/context.c: kills the interpreters of ls's contexts (the CPU quota;
 * returns how many);
 * a later run or restart is refused while the quota is used up. */
unsigned sbx_contexts_quota_stop(struct sbx_live_session *ls);

/* ---- Contexts (core/context*.c) ---- */
/* Waits (bounded) until every context thread has ended (daemon shutdown,
 * after the sessions were killed: contexts end with their session). */
void sbx_contexts_drain(void);

/* ---- core/spans.c — begins and enters the span of a
 * session exec (tenant, profile, session id, the session's GenAI metadata);
 * end it with sbx_trace_op_end. ---- */
struct sbx_span *sbx_exec_span_begin(struct sbx_core *core, const struct sbx_principal *who,
                                     struct sbx_live_session *ls);

/* ---- core/obs_hooks.c — metrics gauges, the FinOps
 * outbox, and the hooks called when a run finishes (metrics + usage). ---- */
int sbx_obs_core_start(struct sbx_core *core, struct sbx_error *err);
void sbx_obs_core_stop(struct sbx_core *core);
/* A session exec finished (buffered or streamed). */
void sbx_obs_exec_done(struct sbx_core *core, const struct sbx_principal *who,
                       struct sbx_live_session *ls, const struct sbx_exec_result *res);
/* An execution's final row was stored with its usage record (only the
 * call that stored it): its metrics, and the outbox woken for the record. */
void sbx_obs_execution_done(struct sbx_core *core, const struct sbx_execution_row *row,
                            const struct sbx_usage_row *usage);
/* The usage record of an execution's final row, to be stored with it. */
void sbx_obs_execution_usage(const struct sbx_execution_row *row, struct sbx_usage_row *out);

#endif
