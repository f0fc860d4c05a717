/* store.h — the storage seam: a table of domain operations (tenants, API
 * keys, sessions, executions and their collected files, tools), so the SQLite
 * backend (store/sqlite/) and the PostgreSQL backend (a later issue) are
 * interchangeable.  Every query that touches a tenant's objects takes the
 * tenant id and filters by it: another tenant's object is "not found".
 *
 * Rows are plain structs.  String members that may be long (JSON documents,
 * output) are malloc'd and released with the matching *_row_free(); fixed
 * buffers are used for ids and enums.  Functions return 0, or -1 with err
 * (SBX_E_NOT_FOUND, SBX_E_CONFLICT, SBX_E_NOT_READY for a store that is
 * down, SBX_E_INTERNAL).  A store handle is safe to share between threads
 * (the backend serialises or pools connections). */
#ifndef SBX_STORE_STORE_H
#define SBX_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/capture.h"
#include "common/err.h"

struct sbx_store;

struct sbx_tenant_row {
  int64_t id;
  char name[128];
  int64_t created_at;
};

struct sbx_key_row {
  char key_id[40]; /* public part of the key, "k" + 16 hex */
  int64_t tenant_id;
  char tenant_name[128];
  unsigned char hash[32]; /* SHA-256 of the secret part */
  bool admin;
  int64_t created_at;
};

struct sbx_session_row {
  char id[64];
  int64_t tenant_id;
  char status[16]; /* ready | terminated | expired | failed | lost */
  char reason[32]; /* why it left ready ("" while ready) */
  char profile[64];
  char runtime[32]; /* driver name */
  char image[256];
  char *limits_json;   /* malloc'd JSON object */
  char *network_json;  /* malloc'd JSON object */
  char *metadata_json; /* malloc'd JSON object */
  char *env_json;      /* malloc'd JSON object: session default env */
  int64_t ttl_s;
  int64_t created_at;
  int64_t updated_at;
  int64_t expires_at;   /* created/last-patched + ttl */
  int64_t last_used_at; /* for idle expiry */
  char node_id[64];     /* the daemon that runs its sandbox ("" before fleets) */
};

struct sbx_exec_file_row {
  char path[4096];
  uint64_t size;
  char sha256[65];
};

struct sbx_execution_row {
  char id[64];
  int64_t tenant_id;
  char status[16]; /* queued | running | succeeded | failed | timeout | … */
  char reason[32];
  char profile[64];
  char *request_json;  /* malloc'd: the validated request, as accepted */
  char *metadata_json; /* malloc'd */
  int exit_code;       /* -1 when none */
  int signal;
  struct sbx_output std_out, std_err; /* buf malloc'd, len bytes (+NUL) */
  double cpu_seconds;
  double memory_mb_seconds;
  double duration_seconds;
  uint64_t memory_peak_bytes;
  char *error_json;                /* malloc'd JSON object or NULL */
  struct sbx_exec_file_row *files; /* malloc'd array (get only) */
  size_t nfiles;
  int64_t created_at;
  int64_t started_at;  /* 0 until running */
  int64_t finished_at; /* 0 until final */
  int64_t updated_at;
  char node_id[64];   /* the daemon that took it ("" while nobody has) */
  uint64_t oom_kills; /* in its sandbox while it ran */
};

/* A collected file with its content, handed to execution_finish(). */
struct sbx_exec_file_blob {
  const char *path;
  const void *data;
  size_t size;
  char sha256[65];
};

/* List callbacks.  The row is borrowed for the duration of the call (copy
 * what you keep).  Return 0 to go on, > 0 to stop early (the list op then
 * returns 0), < 0 to stop with an error (the list op returns -1).  Callbacks
 * run with no store lock held, so they may call the store again.
 * Execution rows handed to list callbacks are summaries: std_out.buf and
 * std_err.buf are NULL (lengths 0; truncated and dropped are set)
 * and files is empty; execution_get returns the output and files. */
typedef int (*sbx_session_cb)(void *ctx, const struct sbx_session_row *row);
typedef int (*sbx_execution_cb)(void *ctx, const struct sbx_execution_row *row);

/* ---- audit events and usage records. ---- */

/* prev_hash of the first event: 64 '0' characters. */
#define SBX_AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* One audit event.  Hashes are 64 lowercase hex characters (SHA-256; the
 * canonical encoding is in obs/audit.c and docs/audit.md). */
struct sbx_audit_row {
  int64_t seq;        /* 1, 2, 3… without gaps */
  int64_t time_ms;    /* milliseconds since the epoch */
  int64_t tenant_id;  /* 0: no tenant (auth failure, system) */
  char actor[64];     /* key id, "cli", "system", "anonymous" */
  char action[64];    /* "sandbox.session.create", "auth.denied", … */
  char target[256];   /* the object acted on ("" if none) */
  char outcome[32];   /* "ok" or an error code ("forbidden", …) */
  char *details_json; /* a JSON object; malloc'd in rows handed to
                           * callbacks (borrowed there), caller's on append */
  char prev_hash[65];
  char hash[65];
};
typedef int (*sbx_audit_hash_fn)(void *ctx, struct sbx_audit_row *row);
typedef int (*sbx_audit_cb)(void *ctx, const struct sbx_audit_row *row);

/* One usage record (one per exec or execution) = one outbox entry. */
struct sbx_usage_row {
  char id[64]; /* "use_…": also the FinOps Idempotency-Key */
  int64_t tenant_id;
  char tenant[128];   /* name, for the FinOps payload */
  char kind[16];      /* "exec" | "execution" */
  char source_id[64]; /* session id (exec) or execution id */
  char profile[64];
  char status[16];   /* the run's final status */
  char project[128]; /* metadata keys ("" if absent) */
  char agent[128];
  char run[128];
  double cpu_seconds;
  double memory_mb_seconds;
  double duration_seconds;
  int64_t created_at; /* seconds */
  /* Outbox state. */
  char delivery[12]; /* "none" | "pending" | "delivered" */
  int attempts;
  int64_t next_attempt_at;
  int64_t delivered_at;
  char last_error[256];
};
typedef int (*sbx_usage_cb)(void *ctx, const struct sbx_usage_row *row);

/* A tool applied from a tool manifest (core/tools.c): the tenant's own
 * namespace of names. */
struct sbx_tool_row {
  int64_t tenant_id;
  char name[64];
  char profile[64];
  char image[2048];    /* spec.image: at most 512 characters of UTF-8 */
  char digest[72];     /* "sha256:" + 64 hex of manifest_json */
  char *manifest_json; /* malloc'd in rows the store returns; the caller's on put */
  int64_t generation;  /* 1 when created, + 1 at each change */
  int64_t created_at;
  int64_t updated_at;
};
typedef int (*sbx_tool_cb)(void *ctx, const struct sbx_tool_row *row);
/* What tool_put did to one row. */
enum sbx_tool_action { SBX_TOOL_CREATED, SBX_TOOL_UPDATED, SBX_TOOL_UNCHANGED };

/* One group of usage_query. */
struct sbx_usage_group {
  char key[128];
  int64_t records;
  double cpu_seconds;
  double memory_mb_seconds;
  double duration_seconds;
};
typedef int (*sbx_usage_group_cb)(void *ctx, const struct sbx_usage_group *g);

/* ---- the fleet: daemons on several hosts sharing one database
 * (core/fleet.c, docs/fleet.md).  Only a shared database has it. ---- */

/* One daemon of the fleet. */
struct sbx_node_row {
  char id[64];
  char advertise[256]; /* base URL other nodes reach it at */
  char state[12];      /* alive | dead | left */
  int64_t slots;       /* sandboxes it offers */
  int64_t used;        /* live sessions + placements reserved on it */
  int ncpu;
  double load1;
  int64_t mem_total, mem_avail; /* bytes */
  char *info_json;              /* profiles and pools; malloc'd in rows the store returns */
  int64_t started_at;
  int64_t heartbeat_age_ms; /* since its last heartbeat, on the database's clock */
  int64_t joins;            /* times it registered */
};
typedef int (*sbx_node_cb)(void *ctx, const struct sbx_node_row *row);
/* A node node_reap declared dead, and what that did to its work. */
struct sbx_node_reaped {
  char id[64];
  int64_t sessions; /* ready → lost (node_lost) */
  int64_t failed;   /* running executions → error (node_lost) */
  int64_t requeued; /* taken but not started: back in the queue */
};
typedef int (*sbx_reap_cb)(void *ctx, const struct sbx_node_reaped *r);

struct sbx_store_fleet_ops {
  /* Registers (or re-registers) row->id as alive with nothing used. */
  int (*node_join)(struct sbx_store *st, const struct sbx_node_row *row, struct sbx_error *err);
  /* Heartbeat: load, capacity and info; *alive false (nothing written)
   * when the fleet declared the node dead meanwhile. */
  int (*node_beat)(struct sbx_store *st, const struct sbx_node_row *row, bool *alive,
                   struct sbx_error *err);
  int (*node_leave)(struct sbx_store *st, const char *id, struct sbx_error *err);
  /* Every node ever registered, by id. */
  int (*node_list)(struct sbx_store *st, sbx_node_cb cb, void *ctx, struct sbx_error *err);
  /* used += delta, atomically; for delta > 0 only while the node is alive
   * and used + delta <= slots (*ok false otherwise, nothing changed). */
  int (*node_reserve)(struct sbx_store *st, const char *id, int64_t delta, bool *ok,
                      struct sbx_error *err);
  /* Declares dead every alive node silent for dead_after_ms (one reaper
   * fleet-wide at a time: a call that finds another reaping does
   * nothing); cb once per node declared dead. */
  int (*node_reap)(struct sbx_store *st, int64_t dead_after_ms, sbx_reap_cb cb, void *ctx,
                   struct sbx_error *err);
  /* A node's own work, at its start (reason daemon_restarted) or clean
   * leave (node_left): ready sessions → lost, running executions → error,
   * taken unstarted ones back to the queue. */
  int (*node_release)(struct sbx_store *st, const char *id, const char *reason,
                      struct sbx_node_reaped *out, struct sbx_error *err);
  /* The shared execution queue: takes the next execution for node (fair
   * between tenants, at most cap running or taken per tenant, 0 = no cap)
   * with a lease of lease_ms.  1: id/tenant filled (lease_expired: a node
   * had taken it and let its lease run out); 0: nothing to take. */
  int (*exec_claim)(struct sbx_store *st, const char *node, int64_t cap, int64_t lease_ms,
                    char id[64], int64_t *tenant, bool *lease_expired, struct sbx_error *err);
  /* The shared queue: executions queued, and the oldest one's age (s). */
  int (*queue_stats)(struct sbx_store *st, int64_t *depth, int64_t *oldest_age_s,
                     struct sbx_error *err);
  /* Renews the lease of everything node holds. */
  int (*exec_renew)(struct sbx_store *st, const char *node, int64_t lease_ms,
                    struct sbx_error *err);
  /* execution_insert, refused with SBX_E_QUOTA (*count filled) when the
   * tenant has limit (> 0) or more executions queued or running
   * fleet-wide; counted and inserted under one per-tenant lock. */
  int (*exec_insert_capped)(struct sbx_store *st, const struct sbx_execution_row *row,
                            int64_t limit, int64_t *count, struct sbx_error *err);
  /* A place in the tenant's fleet-wide session quota while a session is
   * built: refused with SBX_E_QUOTA (*count filled) when ready sessions +
   * live holds reach limit; the hold lapses after ttl_s. */
  int (*session_hold)(struct sbx_store *st, int64_t tenant_id, const char *hold_id,
                      const char *node, int64_t limit, int64_t ttl_s, int64_t *count,
                      struct sbx_error *err);
  int (*session_unhold)(struct sbx_store *st, int64_t tenant_id, const char *hold_id,
                        struct sbx_error *err);
};
void sbx_node_row_free(struct sbx_node_row *row);

/* The backend table.  All members MUST be set, except fleet. */
struct sbx_store_ops {
  const char *name; /* "sqlite", "postgres" */
  /* target: a directory (sqlite: <dir>/sandboxd.db) or a URL. */
  int (*open)(const char *target, struct sbx_store **out, struct sbx_error *err);
  void (*close)(struct sbx_store *st);
  /* Cheap liveness check for /readyz. */
  int (*ping)(struct sbx_store *st, struct sbx_error *err);
  /* NULL: this backend serves one daemon (SQLite: a file on one host). */
  const struct sbx_store_fleet_ops *fleet;

  /* Tenants and keys. */
  int (*tenant_ensure)(struct sbx_store *st, const char *name, int64_t *id_out,
                       struct sbx_error *err);
  int (*key_insert)(struct sbx_store *st, const struct sbx_key_row *key, struct sbx_error *err);
  /* By key_id, any tenant (authentication).  Fills tenant_name too. */
  int (*key_get)(struct sbx_store *st, const char *key_id, struct sbx_key_row *out,
                 struct sbx_error *err);

  /* Sessions. */
  int (*session_insert)(struct sbx_store *st, const struct sbx_session_row *row,
                        struct sbx_error *err);
  int (*session_get)(struct sbx_store *st, int64_t tenant_id, const char *id,
                     struct sbx_session_row *out, struct sbx_error *err);
  /* Own tenant, newest first, ids strictly older than `after` ("" = start),
   * at most limit rows; status NULL = any.
   * Order is (created_at DESC, id DESC); `after` is the id of the last row
   * of the previous page and the page holds the rows after it in that order
   * (rows created in the same second page correctly).  An `after` that is
   * not one of the tenant's ids → SBX_E_INVALID (field "after").  limit <= 0
   * means no limit. */
  int (*session_list)(struct sbx_store *st, int64_t tenant_id, const char *status,
                      const char *after, int limit, sbx_session_cb cb, void *ctx,
                      struct sbx_error *err);
  /* All tenants, status "ready" (reaper and recovery). */
  int (*session_list_ready)(struct sbx_store *st, sbx_session_cb cb, void *ctx,
                            struct sbx_error *err);
  /* Sets status+reason (and updated_at).  NOT_FOUND if missing. */
  int (*session_set_status)(struct sbx_store *st, int64_t tenant_id, const char *id,
                            const char *status, const char *reason, struct sbx_error *err);
  /* PATCH: any of network_json/metadata_json may be NULL (unchanged);
   * ttl_s < 0 unchanged, else expires_at = now + ttl_s. */
  int (*session_update)(struct sbx_store *st, int64_t tenant_id, const char *id,
                        const char *network_json, const char *metadata_json, int64_t ttl_s,
                        int64_t expires_at, struct sbx_error *err);
  int (*session_touch)(struct sbx_store *st, int64_t tenant_id, const char *id, int64_t now,
                       struct sbx_error *err);

  /* Executions. */
  int (*execution_insert)(struct sbx_store *st, const struct sbx_execution_row *row,
                          struct sbx_error *err);
  /* Fills files[] too. */
  int (*execution_get)(struct sbx_store *st, int64_t tenant_id, const char *id,
                       struct sbx_execution_row *out, struct sbx_error *err);
  /* Same order, cursor and limit rules as session_list; summary rows. */
  int (*execution_list)(struct sbx_store *st, int64_t tenant_id, const char *status,
                        const char *after, int limit, sbx_execution_cb cb, void *ctx,
                        struct sbx_error *err);
  /* queued → running with started_at, owned by node_id.  CONFLICT if not
   * queued (cancelled) or, node_id given, if another node holds it (its
   * lease ran out and someone else took it); node_id NULL: any holder. */
  int (*execution_start)(struct sbx_store *st, int64_t tenant_id, const char *id,
                         const char *node_id, int64_t started_at, struct sbx_error *err);
  /* Writes the final result, the collected files and the usage record
   * (NULL: none) in one transaction, only if the row is not final yet
   * (CONFLICT otherwise), so a result is never stored without its usage.
   * Uses row's tenant_id, id, status (must be final), reason, exit_code,
   * signal, outputs, usage, error_json; started_at if > 0; finished_at
   * (0 = now).  Files are stored with their content (size = blob size);
   * a duplicate path → CONFLICT and nothing is written.  usage is
   * inserted as usage_insert would. */
  int (*execution_finish)(struct sbx_store *st, const struct sbx_execution_row *row,
                          const struct sbx_exec_file_blob *files, size_t nfiles,
                          const struct sbx_usage_row *usage, struct sbx_error *err);
  /* Content of one collected file; *data malloc'd. */
  int (*execution_file_get)(struct sbx_store *st, int64_t tenant_id, const char *id,
                            const char *path, void **data, size_t *size, struct sbx_error *err);
  /* All tenants, rows in status (recovery: "running" and "queued"). */
  int (*execution_list_status)(struct sbx_store *st, const char *status, sbx_execution_cb cb,
                               void *ctx, struct sbx_error *err);

  /* Added after the first cut of the seam (store module): */
  /* Number of the tenant's sessions / executions in status (NULL = any),
   * for per-tenant quotas that must survive a restart. */
  int (*session_count)(struct sbx_store *st, int64_t tenant_id, const char *status,
                       int64_t *count, struct sbx_error *err);
  int (*execution_count)(struct sbx_store *st, int64_t tenant_id, const char *status,
                         int64_t *count, struct sbx_error *err);

  /* ---- audit chain, usage records, FinOps outbox.
   * Tables audit_events and usage_records (migration 0002_audit_usage.sql).
   * Every row has tenant_id; events with no tenant (an auth failure, a
   * system action) use tenant 0, which is never a real tenant (ids start
   * at 1).  Row types and callbacks are declared below the table. ---- */
  /* Appends one event to the chain, serialised: in ONE write transaction
   * (SQLite: BEGIN IMMEDIATE; PostgreSQL: a lock that serialises appenders,
   * e.g. LOCK TABLE audit_events IN EXCLUSIVE MODE or an advisory xact
   * lock) it reads the last row's (seq, hash) — none: seq 0 and
   * SBX_AUDIT_GENESIS — sets row->seq = last + 1 and row->prev_hash = that
   * hash, calls hash(ctx, row) which fills row->hash (0, or -1 to abort
   * with nothing written), and inserts the row.  So two appenders never
   * chain to the same predecessor.  row->time_ms 0 = now.  On return
   * row->seq, time_ms, prev_hash and hash hold what was stored. */
  int (*audit_append)(struct sbx_store *st, struct sbx_audit_row *row, sbx_audit_hash_fn hash,
                      void *ctx, struct sbx_error *err);
  /* Events in seq order with seq > after_seq, at most limit (<= 0: no
   * limit); tenant_id < 0 = every tenant (admin), else that tenant only;
   * action NULL = any, else exactly that action. */
  int (*audit_list)(struct sbx_store *st, int64_t tenant_id, const char *action,
                    int64_t after_seq, int limit, sbx_audit_cb cb, void *ctx,
                    struct sbx_error *err);
  /* Every event with seq > after_seq in seq order, all tenants (verify).
   * The backend pages internally: memory stays bounded on a long chain. */
  int (*audit_scan)(struct sbx_store *st, int64_t after_seq, sbx_audit_cb cb, void *ctx,
                    struct sbx_error *err);
  /* Inserts a usage record; it is also an outbox entry: row->delivery
   * "pending" (to be sent to FinOps) or "none" (no FinOps endpoint).
   * A duplicate id → CONFLICT. */
  int (*usage_insert)(struct sbx_store *st, const struct sbx_usage_row *row,
                      struct sbx_error *err);
  /* The tenant's records with from <= created_at < to (seconds; to <= 0:
   * no upper bound), summed per group_by value ("profile", "project",
   * "agent"; a record without that metadata key groups under ""), groups
   * in ascending key order. */
  int (*usage_query)(struct sbx_store *st, int64_t tenant_id, const char *group_by, int64_t from,
                     int64_t to, sbx_usage_group_cb cb, void *ctx, struct sbx_error *err);
  /* Outbox: records with delivery "pending" and next_attempt_at <= now,
   * oldest first, at most limit. */
  int (*outbox_due)(struct sbx_store *st, int64_t now, int limit, sbx_usage_cb cb, void *ctx,
                    struct sbx_error *err);
  /* After a delivery attempt of record id: delivered → delivery
   * "delivered", delivered_at = now; else attempts + 1, next_attempt_at,
   * last_error (truncated to 255 bytes).  NOT_FOUND if no such record. */
  int (*outbox_mark)(struct sbx_store *st, const char *id, bool delivered,
                     int64_t next_attempt_at, const char *error, struct sbx_error *err);

  /* Tools.  tool_put applies n rows of one tenant in one transaction (all
   * or none): a new name is inserted with generation 1, a known name whose
   * digest differs is updated (generation + 1), the same digest is left
   * alone.  It fills each row's generation, created_at and updated_at and
   * actions[i].  Rows need tenant_id == tenant_id, name, profile, image,
   * digest, manifest_json. */
  int (*tool_put)(struct sbx_store *st, int64_t tenant_id, struct sbx_tool_row *rows, size_t n,
                  enum sbx_tool_action *actions, struct sbx_error *err);
  int (*tool_get)(struct sbx_store *st, int64_t tenant_id, const char *name,
                  struct sbx_tool_row *out, struct sbx_error *err);
  /* Own tenant, in name order (bytewise), names after `after` ("" = from
   * the start), at most limit rows (<= 0: no limit). */
  int (*tool_list)(struct sbx_store *st, int64_t tenant_id, const char *after, int limit,
                   sbx_tool_cb cb, void *ctx, struct sbx_error *err);
  /* NOT_FOUND when the tenant has no tool of that name. */
  int (*tool_delete)(struct sbx_store *st, int64_t tenant_id, const char *name,
                     struct sbx_error *err);
  int (*tool_count)(struct sbx_store *st, int64_t tenant_id, int64_t *count,
                    struct sbx_error *err);
};

extern const struct sbx_store_ops sbx_store_sqlite;
extern const struct sbx_store_ops sbx_store_postgres; /* store/postgres/, docs/postgres.md */

/* A store handle: the ops plus the backend's state. */
struct sbx_store_handle {
  const struct sbx_store_ops *ops;
  struct sbx_store *st;
};
/* Chooses the backend: "postgres://…"/"postgresql://…" → PostgreSQL,
 * otherwise SQLite under state_dir.
 * database_url NULL or "" → SQLite at <state_dir>/sandboxd.db (directory
 * created 0700, file 0600, migrations applied); "sqlite://DIR" → SQLite
 * under DIR; postgres URLs → the PostgreSQL backend, which does NOT
 * migrate (the schema owner does, `sandboxd db init`): an uninitialised or
 * older schema, or a role that row-level security would not confine
 * (superuser, BYPASSRLS, schema owner), is refused (SBX_E_INTERNAL); a
 * server that cannot be reached → SBX_E_NOT_READY.  Any other scheme →
 * SBX_E_INVALID.  A database migrated by a newer sandboxd is refused
 * (SBX_E_INTERNAL, message says so).  Messages never quote the URL (it may
 * carry a password). */
int sbx_store_open(const char *database_url, const char *state_dir, struct sbx_store_handle *out,
                   struct sbx_error *err);
void sbx_store_close(struct sbx_store_handle *h);

void sbx_session_row_free(struct sbx_session_row *r);
void sbx_execution_row_free(struct sbx_execution_row *r);
void sbx_tool_row_free(struct sbx_tool_row *r);

#endif
