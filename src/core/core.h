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
#include "core/principal.h"
#include "core/profile.h"
#include "core/quota.h"
#include "runtime/sandbox.h"

struct sbx_core;
struct sbx_store_handle; /* store/store.h: core's own, and the daemon's key command's */

/* One driver setting as the daemon read it: "gvisor_pool_size" = "2". */
struct sbx_core_setting {
  const char *key;
  const char *value;
};

struct sbx_core_config {
  const char *state_dir;    /* absolute */
  const char *database_url; /* NULL/"" → SQLite under state_dir */
  const char *init_path;    /* sbx-init binary */
  const char *runsc_path;
  bool unsafe_process_driver;
  const char *default_profile;   /* "container" */
  unsigned workers;              /* execution workers */
  unsigned queue_max;            /* queued executions before 429 */
  unsigned queue_max_per_tenant; /* one tenant's queued executions before 429 (0: 256) */
  unsigned workers_per_tenant;   /* one tenant's running executions (0: workers-1, min 1) */
  int64_t default_ttl_s;         /* session TTL when the request gives none */
  int64_t max_ttl_s;
  int64_t idle_timeout_s; /* 0: no idle expiry */
  unsigned reaper_interval_ms;
  unsigned max_sessions_per_tenant;
  struct sbx_profile *profiles; /* operator-defined, merged over built-ins */
  size_t nprofiles;
  struct sbx_quota_config quota; /* per-tenant quotas (core/quota.h) */
  const char *finops_url;        /* FinOps endpoint for usage records (NULL: none) */
  bool metrics_auth;             /* GET /metrics needs an admin key */
  /* Egress policy (net/net.h sbx_net_config) */
  const char *const *resolve;        /* "NAME=ADDR" pins, NULL-terminated (may be NULL) */
  const char *dns_upstream;          /* NULL/"": pinned names only */
  const char *net_pool4, *net_pool6; /* NULL/"": the net module's defaults */
  /* Pull an image a request names when it is not in the store
   * (SBX_IMAGE_PULL_MISSING, 0) or answer 404 (SBX_IMAGE_PULL_NEVER) */
  int image_pull;
  /* Start probes run in the background (core/profile.h): each driver's
   * probe command is bounded by probe_timeout_s (runsc's KVM platform by
   * gvisor_kvm_timeout_s; gvisor_kvm_off skips it), and a request for a
   * profile still probing waits up to probe_wait_s, then 503s.  0: 10, 5, 2. */
  unsigned probe_timeout_s, probe_wait_s, gvisor_kvm_timeout_s;
  bool gvisor_kvm_off;
  /* The drivers' own settings ([driver] in the config file), handed to
   * them in sbx_driver_env (the array is copied; the strings must outlive
   * the core). */
  const struct sbx_core_setting *driver_settings;
  size_t ndriver_settings;
  /* The fleet (core/fleet.h, docs/fleet.md): this daemon one node of
   * several sharing database_url (PostgreSQL only). */
  bool cluster;
  const char *node_id;         /* unique in the fleet */
  const char *advertise;       /* http://HOST:PORT the other nodes reach it at */
  unsigned placement_k;        /* best-of-K (0: 3) */
  int64_t node_slots;          /* sandboxes this node offers (< 0: from the host; 0: none,
                                * an API node: it places, forwards, runs nothing) */
  unsigned node_dead_after_ms; /* silence before it is declared dead (0: 6000) */
};

int sbx_core_start(const struct sbx_core_config *cfg, struct sbx_core **out,
                   struct sbx_error *err);
/* Ends all work (running execs, sessions, pools) but keeps the store and
 * the struct, so HTTP requests still in flight can finish safely. */
void sbx_core_stop(struct sbx_core *core);
/* True once shutdown began: the API refuses new work with 503 not_ready. */
bool sbx_core_is_stopping(struct sbx_core *core);
/* Closes the store and frees; after the HTTP server has stopped. */
void sbx_core_free(struct sbx_core *core);
/* An API thread that outlives its request and calls the core (an E2B
 * /execute run): entered before it starts, left as its last act, so the
 * shutdown (sbx_core_stop) waits for it, bounded, before sbx_core_free. */
void sbx_core_thread_enter(void);
void sbx_core_thread_leave(void);

const struct sbx_profile_set *sbx_core_profiles(struct sbx_core *core);
/* The JSON Schema contracts (core/contracts.c, docs/contracts.md): their
 * names (a new array), the exact bytes of one (static, borrowed), and a
 * document validated against one: {"valid", "violations":[{"path",
 * "message_i18n":{"en","fr"}}]} listing every violation (new reference).
 * An unknown name is SBX_E_NOT_FOUND; a body that is not JSON or nests
 * deeper than 64 levels is SBX_E_INVALID. */
json_t *sbx_core_contract_names(void);
int sbx_core_contract_get(const char *name, const char **text, size_t *len,
                          struct sbx_error *err);
json_t *sbx_core_contract_validate(struct sbx_core *core, const char *name, const char *body,
                                   size_t len, struct sbx_error *err);
/* Readiness for /readyz: store reachable, the default profile probed,
 * at least one profile usable; lists the profiles still probing. */
json_t *sbx_core_readiness(struct sbx_core *core, bool *ready);
/* Counts one HTTP request (metrics). */
void sbx_core_observe_http(struct sbx_core *core, const char *route, int status, uint64_t us);
/* Whether GET /metrics needs an admin key (config metrics_auth). */
bool sbx_core_metrics_auth(struct sbx_core *core);

/* The image store (core/images.c over image/; docs/images.md): host-wide,
 * like profiles.  list: a new array {ref, digest, config, layers, size,
 * created}; ref_check: 400 naming field unless ref parses; pull: always
 * asks the registry, cb (may be NULL) reports each blob's progress from the
 * pulling thread, canonical (700 bytes) and digest (80) get what was
 * stored; gc: *out the counts of what was removed. */
typedef void (*sbx_core_progress_fn)(void *ud, const char *what, uint64_t done, uint64_t total);
int sbx_core_image_list(json_t **out, struct sbx_error *err);
int sbx_core_image_ref_check(const char *ref, const char *field, struct sbx_error *err);
int sbx_core_image_pull(const char *ref, sbx_core_progress_fn cb, void *ud, char *canonical,
                        char *digest, struct sbx_error *err);
int sbx_core_image_remove(const char *ref, struct sbx_error *err);
int sbx_core_image_gc(json_t **out, struct sbx_error *err);

/* Observability as the API shows it (core/observe.c).  Audit events with
 * seq > after, one tenant's or all (tenant < 0), at most limit: *events a
 * new array, *last_seq the last one's seq; returns how many. */
int sbx_core_audit_list(struct sbx_core *core, int64_t tenant, const char *action, int64_t after,
                        int limit, json_t **events, int64_t *last_seq, struct sbx_error *err);
/* Walks the hash chain; *out is the verdict object (docs/audit.md). */
int sbx_core_audit_verify(struct sbx_core *core, json_t **out, struct sbx_error *err);
/* The rate limiter of refusal events (obs/audit.h sbx_audit_admit). */
bool sbx_core_audit_admit(const char *source, uint64_t *suppressed);
/* Appends one event by who (its key as the actor); takes details. */
void sbx_core_audit_record(struct sbx_core *core, const struct sbx_principal *who,
                           const char *action, const char *target, const char *outcome,
                           json_t *details);
/* Remembers who's tenant name for usage records. */
void sbx_core_usage_tenant(const struct sbx_principal *who);
/* RFC 3339 or seconds since the epoch; -1 when neither. */
int sbx_core_usage_parse_time(const char *s, int64_t *out);
/* who's usage between from and to (0: open), grouped by group_by. */
int sbx_core_usage_report(struct sbx_core *core, const struct sbx_principal *who,
                          const char *group_by, int64_t from, int64_t to, json_t **out,
                          struct sbx_error *err);
/* The Prometheus text (malloc'd; NULL out of memory). */
char *sbx_core_metrics_render(size_t *len);
/* The request's server span (obs/trace.h): begun when the request
 * arrives, named by its route, tagged with the tenant once authenticated,
 * the thread's current span while core works for it, ended with the
 * status. */
struct sbx_span;
struct sbx_span *sbx_core_request_begin(const char *method, const char *traceparent);
void sbx_core_request_route(struct sbx_span *s, const char *method, const char *pattern);
void sbx_core_request_tenant(struct sbx_span *s, const char *tenant);
void sbx_core_request_enter(struct sbx_span *s);
void sbx_core_request_leave(struct sbx_span *s);
void sbx_core_request_end(struct sbx_span *s, int status);

/* Keys: create prints nothing; *key_out is "sbx_<id>_<secret>" (caller frees). */
int sbx_keys_create(struct sbx_store_handle *st, const char *tenant, bool admin, char **key_out,
                    struct sbx_error *err);
int sbx_keys_verify(struct sbx_store_handle *st, const char *token, struct sbx_principal *who,
                    struct sbx_error *err);
/* The principal of the daemon's own store for token (sbx_keys_verify). */
int sbx_core_keys_verify(struct sbx_core *core, const char *token, struct sbx_principal *who,
                         struct sbx_error *err);
/* The principal a key id (no secret) belongs to; SBX_E_NOT_FOUND once it
 * is revoked.  For tokens the daemon itself signed (the E2B sandbox token). */
int sbx_core_key_principal(struct sbx_core *core, const char *key_id, struct sbx_principal *who,
                           struct sbx_error *err);

/* Sessions (core/session.c).  `body` is the parsed request body (borrowed);
 * *out is a new JSON reference on success. */
int sbx_session_create(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                       json_t **out, struct sbx_error *err);
/* The same on a node a fleet placement chose: placed, its place there is
 * already reserved (core/fleet.h sbx_fleet_place). */
int sbx_session_create_placed(struct sbx_core *core, const struct sbx_principal *who,
                              json_t *body, bool placed, json_t **out, struct sbx_error *err);
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
void sbx_session_release(struct sbx_core *core, struct sbx_live_session *ls);

/* What a live session uses now (core/session_metrics.c), one reading:
 * {timestamp (unix s), cpu_count, cpu_limit (cores), cpu_used_pct (of the
 * limit, averaged over the last second or two), cpu_seconds (so far),
 * memory_used_bytes (charged to its cgroup, page cache and tmpfs files
 * included), memory_cache_bytes (of which those), memory_limit_bytes,
 * disk_used_bytes, disk_total_bytes (its writable filesystems; absent when
 * the sandbox could not say)}.  404 unknown or another tenant's, 409 ended
 * or on a runtime that measures no CPU or memory.  Not activity: it does
 * not hold off the idle timeout. */
int sbx_session_metrics(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                        json_t **out, struct sbx_error *err);

/* Files and ports of a held session (core/files.c): the sandbox client's
 * operations (runtime/sandbox.h: same path rules, errors and ownership of
 * what they return), the only way the API reaches a sandbox. */
int sbx_files_write(struct sbx_live_session *ls, const char *path, const void *data, size_t len,
                    struct sbx_error *err);
int sbx_files_open_read(struct sbx_live_session *ls, const char *path, int *fd_out,
                        uint64_t *size_out, struct sbx_error *err);
int sbx_files_stat(struct sbx_live_session *ls, const char *path, struct sbx_stat *out,
                   struct sbx_error *err);
int sbx_files_list(struct sbx_live_session *ls, const char *dir, struct sbx_dirent **out,
                   size_t *count, size_t max, struct sbx_error *err);
int sbx_files_list_tree(struct sbx_live_session *ls, const char *dir, unsigned max_depth,
                        struct sbx_dirent **out, size_t *count, size_t max,
                        struct sbx_error *err);
int sbx_files_mkdir(struct sbx_live_session *ls, const char *path, unsigned mode, unsigned flags,
                    struct sbx_error *err);
int sbx_files_move(struct sbx_live_session *ls, const char *from, const char *to, bool overwrite,
                   struct sbx_error *err);
int sbx_files_remove(struct sbx_live_session *ls, const char *path, struct sbx_error *err);
/* A TCP connection to port on the sandbox's own loopback (sbx_sandbox_connect). */
int sbx_ports_connect(struct sbx_live_session *ls, unsigned port, unsigned timeout_ms,
                      int *fd_out, struct sbx_error *err);

/* Tools (core/tools.c, docs/tools.md).  apply and invoke answer NULL
 * with err; for a 400 that lists JSON Schema violations, *violations is
 * also set (each {index?, path, message_i18n}; the caller's to release). */
json_t *sbx_tools_apply(struct sbx_core *core, const struct sbx_principal *who, const char *body,
                        size_t len, bool dry_run, json_t **violations, struct sbx_error *err);
json_t *sbx_tool_get(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                     struct sbx_error *err);
/* limit >= 1; cursor: the last name of the previous page, NULL to start. */
json_t *sbx_tool_list(struct sbx_core *core, const struct sbx_principal *who, const char *cursor,
                      int limit, struct sbx_error *err);
int sbx_tool_delete(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                    struct sbx_error *err);
/* Queues the execution: {id, status, profile, tool, generation}. */
json_t *sbx_tool_invoke(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                        const char *body, size_t len, json_t **violations,
                        struct sbx_error *err);

/* Executions (core/execution.c). */
/* The checks create makes of a request's own fields (profile, image,
 * limits against the profile's ceilings, network, files, command),
 * without admitting or storing anything. */
int sbx_execution_check(struct sbx_core *core, json_t *body, struct sbx_error *err);
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

/* ---- Streamed exec and background processes ---- */

/* Streamed session exec (Accept: text/event-stream).  The request is
 * validated and the exec started before this returns (errors come back as
 * usual); then the exec runs on a thread of its own, calling sink->output
 * for each chunk in the order read and sink->exit once at the end with the
 * result object (consumed), exactly as the buffered exec would return it.
 * token names the exec for sbx_exec_stream_cancel(). */
struct sbx_exec_sink {
  void (*output)(void *ctx, int stream, const char *data, size_t len, uint64_t offset);
  /* result; session_end: why the session ended under the exec (an `end`
   * reason such as "session_deleted"), NULL if it did not. */
  void (*exit)(void *ctx, json_t *result, const char *session_end);
  void *ctx;
};
int sbx_session_exec_stream(struct sbx_core *core, const struct sbx_principal *who,
                            const char *id, json_t *body, const struct sbx_exec_sink *sink,
                            uint64_t token, struct sbx_error *err);
/* A fresh token (never 0) for sbx_session_exec_stream, taken before the
 * stream is wired up so a disconnect can always name the exec. */
uint64_t sbx_exec_stream_token(void);
/* Kills a streamed exec (reason cancelled) if it still runs: its client went
 * away.  Unknown or finished tokens are ignored. */
void sbx_exec_stream_cancel(uint64_t token);

/* Background processes (core/process.c, process_io.c).  `pid` is the
 * route's text; an unknown one is 404. */
int sbx_process_start(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                      json_t *body, json_t **out, struct sbx_error *err);
int sbx_process_list(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                     json_t **out, struct sbx_error *err);
int sbx_process_get(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *pid, json_t **out, struct sbx_error *err);
/* Kept output from byte offsets from[0] (stdout) and from[1] (stderr). */
int sbx_process_output(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, const uint64_t from[2], json_t **out,
                       struct sbx_error *err);
/* Appends data to the process's stdin (its terminal with pty); eof closes
 * it (types ^D on a terminal).  A pipe still full after a bounded wait is
 * 409 conflict, saying how much was written. */
int sbx_process_stdin(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                      const char *pid, const char *data, size_t len, bool eof, json_t **out,
                      struct sbx_error *err);
int sbx_process_signal(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, json_t *body, json_t **out, struct sbx_error *err);
int sbx_process_resize(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, json_t *body, json_t **out, struct sbx_error *err);
/* "SIGINT" | "INT" | "int" → its number; -1 if unknown. */
int sbx_signal_parse(const char *name);

/* Following a process (the API's SSE follower): attach takes a reference,
 * detach drops it.  next() waits up to timeout_ms for kept output past
 * off[] and fills one chunk (1), or 0 on timeout, or -1 once the process
 * has ended and everything kept was read (*result = its result object, a
 * new reference), or -2 at once when its session ended (*result =
 * {"reason": "session_deleted" | "session_expired" | …}).  A chunk whose gap_from < offset skipped the dropped
 * bytes [gap_from, offset) of its stream. */
struct sbx_proc;
struct sbx_proc_chunk {
  int stream; /* 1 stdout, 2 stderr */
  size_t len;
  uint64_t offset;
  uint64_t gap_from;
  char data[64 * 1024];
};
struct sbx_proc *sbx_process_attach(struct sbx_core *core, const struct sbx_principal *who,
                                    const char *sid, const char *pid, struct sbx_error *err);
void sbx_process_detach(struct sbx_proc *p);
int sbx_process_next(struct sbx_proc *p, uint64_t off[2], struct sbx_proc_chunk *c,
                     unsigned timeout_ms, json_t **result);

/* ---- Archives and watch (core/archive.c,
 * core/archive_extract.c, core/watch.c). ---- */
/* sbx_session_acquire, then 409 conflict unless the session's driver has
 * capability `cap` (SBX_CAP_*). */
struct sbx_live_session *sbx_session_acquire_cap(struct sbx_core *core,
                                                 const struct sbx_principal *who, const char *id,
                                                 uint32_t cap, struct sbx_error *err);

/* Bounds of one archive; a request may lower them, never raise them. */
struct sbx_archive_limits {
  size_t max_entries; /* files + dirs + links (→ 413) */
  uint64_t max_bytes; /* sum of regular file sizes (→ 413) */
};
#define SBX_ARCHIVE_MAX_ENTRIES 100000u
#define SBX_ARCHIVE_MAX_BYTES (1ull << 30)

/* GET …/archive?path=D: walks D (409 without SBX_CAP_ARCHIVE, 413 beyond
 * the limits, 404/400 as the file routes) and returns a generator of a tar
 * (pax) of it, produced entry by entry as the client reads: never the whole
 * tree in memory.  Read with sbx_archive_read (the api's stream callback
 * shape: bytes, or -1 at the end — early if the tree grew past the limits
 * meanwhile, which leaves the client a truncated tar); close frees it and
 * releases the session. */
struct sbx_archive_out;
int sbx_archive_open(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                     const char *dir, const struct sbx_archive_limits *lim,
                     struct sbx_archive_out **out, struct sbx_error *err);
long sbx_archive_read(void *ctx, uint64_t pos, char *buf, size_t max);
void sbx_archive_close(void *ctx);

/* PUT …/archive?path=D: checks every entry of the tar in data first
 * (absolute names, "..", devices/FIFOs/sockets, hard links except to an
 * earlier file of the archive, symlinks leaving D, entries through a
 * symlink of the archive, names too long → 400 naming the entry; counts →
 * 413), so a hostile archive writes nothing; then extracts it into D
 * through sbx-init.  *out = {path, entries, bytes}. */
int sbx_archive_extract(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                        const char *dir, const void *data, size_t len,
                        const struct sbx_archive_limits *lim, json_t **out,
                        struct sbx_error *err);

/* GET …/watch?path=D: a watcher thread feeding `sink` until the client
 * leaves (gone() or event() says so), the watched directory goes away, or
 * the session ends.  409 without SBX_CAP_WATCH; 429 quota_exceeded past
 * SBX_WATCH_MAX_PER_SESSION concurrent watches of one session.  Events are
 * JSON objects {type: create|modify|delete|move|overflow, path, dir
 * [, from, to] [, dropped]} with absolute sandbox paths; event() consumes
 * each.  end(why) is called once, from the thread, last: after it the
 * thread touches nothing of the sink's. */
#define SBX_WATCH_MAX_PER_SESSION 8
#define SBX_WATCH_MAX_DIRS 1024 /* inotify watches (directories) per stream */
struct sbx_watch_sink {
  int (*event)(void *ctx, const char *type, json_t *ev); /* 0 sent, 1 dropped, -1 gone */
  bool (*gone)(void *ctx);
  void (*end)(void *ctx, const char *why);
  void *ctx;
};
int sbx_session_watch(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      const char *dir, bool recursive, const struct sbx_watch_sink *sink,
                      struct sbx_error *err);
/* Waits (bounded) until no watch thread is left: for sbx_core_stop, after
 * the sessions were killed (which stops every watch within a poll). */
void sbx_watch_drain(unsigned timeout_ms);

/* ---- Contexts (core/context.c, context_run.c,
 * context_io.c; driver scripts in core/contexts/).  Every call answers 409
 * conflict when the session's driver lacks SBX_CAP_CONTEXTS, 404 for an
 * unknown context.  Results are new JSON references. ---- */
/* body {language: "python"|"node"} → the context object {id, language,
 * status, session_id, execution_count, version, error, created_at} once
 * its interpreter is ready (429 past 8 contexts per session). */
int sbx_context_create(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       json_t *body, json_t **out, struct sbx_error *err);
int sbx_context_list(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                     json_t **out, struct sbx_error *err);
int sbx_context_get(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *cid, json_t **out, struct sbx_error *err);
int sbx_context_delete(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *cid, struct sbx_error *err);
/* Kills the interpreter (state lost) and starts a fresh one, same id. */
int sbx_context_restart(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                        const char *cid, json_t **out, struct sbx_error *err);
/* body {code, timeout_s} → the run result (context_run.c). */
int sbx_context_run(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *cid, json_t *body, json_t **out, struct sbx_error *err);
/* A streamed run's watcher.  Both run on the caller's thread, with no lock
 * held, so they may block a little (the run's timeout is checked between
 * calls): started once the code went to the interpreter (a run refused
 * before that, e.g. 404 or 409, never calls it); output with each piece of
 * stdout (stream 1) or stderr (stream 2) as the code prints it, in order —
 * bytes, which may cut a UTF-8 sequence — at most the session's output
 * limit per stream of what the interpreter captured, plus what went around
 * it.  The result still holds the whole output, as for an unwatched run. */
struct sbx_run_watch {
  void (*started)(void *arg);
  void (*output)(void *arg, int stream, const char *data, size_t len);
  void *arg;
};
int sbx_context_run_watched(struct sbx_core *core, const struct sbx_principal *who,
                            const char *sid, const char *cid, json_t *body,
                            const struct sbx_run_watch *watch, json_t **out,
                            struct sbx_error *err);

#endif
