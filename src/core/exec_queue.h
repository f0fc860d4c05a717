/* exec_queue.h — the execution scheduler's state: which queued execution a
 * free worker runs next, fair between tenants.
 *
 * Policy: round robin between the tenants that have work queued and are
 * under their running cap; FIFO within one tenant.  A free worker takes the
 * head of the next such tenant after the one served last.  Each tenant has
 * at most `running_cap` executions running at once (the others stay
 * queued), and at most `tenant_max` queued; the whole queue holds at most
 * `total_max` (both bounds count reservations too, see below).
 *
 * Not thread-safe: the caller (core/execution.c) holds its queue lock
 * around every call.  Items are copied out; the queue owns its nodes. */
#ifndef SBX_CORE_EXEC_QUEUE_H
#define SBX_CORE_EXEC_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_EXEC_ID_MAX 64

struct sbx_exec_queue;

struct sbx_exec_item {
  char id[SBX_EXEC_ID_MAX];
  int64_t tenant_id;
};

/* A place in the queue reserved before the execution's row is stored, so
 * a request the queue cannot hold is refused before anything is stored,
 * and a stored one can always be queued.  Consumed by commit or cancel. */
struct sbx_exec_slot_rsv;

enum sbx_exec_queue_full {
  SBX_EXQ_OK = 0,
  SBX_EXQ_FULL_TOTAL = 1,  /* the whole queue holds total_max */
  SBX_EXQ_FULL_TENANT = 2, /* this tenant has tenant_max queued */
  SBX_EXQ_NOMEM = 3,
};

/* NULL on ENOMEM.  Both bounds at least 1. */
struct sbx_exec_queue *sbx_exec_queue_new(size_t total_max, size_t tenant_max);
void sbx_exec_queue_free(struct sbx_exec_queue *q);

/* Reserves one place for tenant; *out is NULL and the return value says
 * which bound refused it.  force (recovery re-queueing rows that were
 * admitted before a restart) ignores the per-tenant bound, never the total
 * one. */
enum sbx_exec_queue_full sbx_exec_queue_reserve(struct sbx_exec_queue *q, int64_t tenant,
                                                bool force, struct sbx_exec_slot_rsv **out);
/* Makes the reserved place the tenant's newest queued execution, id. */
void sbx_exec_queue_commit(struct sbx_exec_queue *q, struct sbx_exec_slot_rsv *r,
                           const char *id);
void sbx_exec_queue_unreserve(struct sbx_exec_queue *q, struct sbx_exec_slot_rsv *r);
/* A reservation outliving its queue (sbx_exec_queue_free does not free
 * reservations not yet committed): frees r alone. */
void sbx_exec_queue_rsv_free(struct sbx_exec_slot_rsv *r);

/* The next execution to run (round robin, see above), counted as running
 * for its tenant until sbx_exec_queue_done.  false when nothing queued is
 * runnable under running_cap (>= 1). */
bool sbx_exec_queue_pop(struct sbx_exec_queue *q, unsigned running_cap,
                        struct sbx_exec_item *out);
/* A popped execution of tenant ended (whatever its outcome). */
void sbx_exec_queue_done(struct sbx_exec_queue *q, int64_t tenant);
/* Drops a queued execution (cancelled before it started); false when it
 * is not queued (already popped, or never queued here). */
bool sbx_exec_queue_remove(struct sbx_exec_queue *q, int64_t tenant, const char *id);

/* Queued (reserved included) in total and for one tenant; running for one
 * tenant. */
size_t sbx_exec_queue_len(const struct sbx_exec_queue *q);
size_t sbx_exec_queue_tenant_queued(const struct sbx_exec_queue *q, int64_t tenant);
unsigned sbx_exec_queue_tenant_running(const struct sbx_exec_queue *q, int64_t tenant);

#endif
