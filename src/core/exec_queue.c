/* exec_queue.c — the execution scheduler (see exec_queue.h): per-tenant
 * FIFOs visited round robin, a per-tenant running cap, bounded queues.
 *
 * Why round robin and not weighted fair queueing: WFQ orders work by its
 * cost, and an execution's cost is unknown until it ends (its timeout is
 * only an upper bound, most end far sooner).  Round robin needs no
 * estimate: every tenant with queued work gets the next free worker in
 * turn, so a tenant's wait for a worker grows with the number of tenants,
 * not with the length of another tenant's backlog; the running cap keeps
 * a worker free for the next tenant even when one tenant's executions are
 * all long.
 *
 * Tenants are a list in order of arrival with a cursor on the one served
 * last (a tenant arriving later is served before the turn wraps); a tenant leaves the list once it has nothing queued, reserved or
 * running, so the list is bounded by total_max plus the workers. */
#include "core/exec_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reserved place, then a queued item (exec_queue.h). */
struct sbx_exec_slot_rsv {
  struct sbx_exec_item it;
  struct tenant *t; /* stays while it holds a reservation or a queued item */
  struct sbx_exec_slot_rsv *next;
};

struct tenant {
  int64_t id;
  struct sbx_exec_slot_rsv *head, *tail; /* queued, oldest first */
  size_t queued;
  size_t reserved;
  unsigned running;
  struct tenant *prev, *next;
};

struct sbx_exec_queue {
  size_t total_max, tenant_max;
  size_t total; /* queued + reserved, all tenants */
  struct tenant *first, *last;
  struct tenant *served; /* served last; NULL: none yet, or the first is next */
};

struct sbx_exec_queue *sbx_exec_queue_new(size_t total_max, size_t tenant_max)
{
  struct sbx_exec_queue *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->total_max = total_max ? total_max : 1;
  q->tenant_max = tenant_max ? tenant_max : 1;
  return q;
}

static void nodes_free(struct sbx_exec_slot_rsv *n)
{
  while (n) {
    struct sbx_exec_slot_rsv *next = n->next;
    free(n);
    n = next;
  }
}

void sbx_exec_queue_free(struct sbx_exec_queue *q)
{
  if (!q)
    return;
  for (struct tenant *t = q->first, *n; t; t = n) {
    n = t->next;
    nodes_free(t->head);
    free(t);
  }
  free(q);
}

static struct tenant *find(const struct sbx_exec_queue *q, int64_t id)
{
  for (struct tenant *t = q->first; t; t = t->next)
    if (t->id == id)
      return t;
  return NULL;
}

static struct tenant *find_or_add(struct sbx_exec_queue *q, int64_t id)
{
  struct tenant *t = find(q, id);
  if (t || !(t = calloc(1, sizeof *t)))
    return t;
  t->id = id;
  t->prev = q->last;
  if (q->last)
    q->last->next = t;
  else
    q->first = t;
  q->last = t;
  return t;
}

/* Leaves the list once nothing of it is left in the scheduler. */
static void maybe_drop(struct sbx_exec_queue *q, struct tenant *t)
{
  if (t->head || t->reserved || t->running)
    return;
  if (q->served == t) /* its successor keeps its turn */
    q->served = t->prev;
  if (t->prev)
    t->prev->next = t->next;
  else
    q->first = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    q->last = t->prev;
  free(t);
}

enum sbx_exec_queue_full sbx_exec_queue_reserve(struct sbx_exec_queue *q, int64_t tenant,
                                                bool force, struct sbx_exec_slot_rsv **out)
{
  *out = NULL;
  if (q->total >= q->total_max)
    return SBX_EXQ_FULL_TOTAL;
  struct tenant *t = find_or_add(q, tenant);
  if (!t)
    return SBX_EXQ_NOMEM;
  enum sbx_exec_queue_full rc = SBX_EXQ_OK;
  if (!force && t->queued + t->reserved >= q->tenant_max)
    rc = SBX_EXQ_FULL_TENANT;
  else if (!(*out = calloc(1, sizeof **out)))
    rc = SBX_EXQ_NOMEM;
  if (rc != SBX_EXQ_OK) {
    maybe_drop(q, t);
    return rc;
  }
  (*out)->it.tenant_id = tenant;
  (*out)->t = t;
  t->reserved++;
  q->total++;
  return SBX_EXQ_OK;
}

void sbx_exec_queue_commit(struct sbx_exec_queue *q, struct sbx_exec_slot_rsv *r, const char *id)
{
  struct tenant *t = r->t;
  snprintf(r->it.id, sizeof r->it.id, "%s", id);
  r->next = NULL;
  if (t->tail)
    t->tail->next = r;
  else
    t->head = r;
  t->tail = r;
  t->reserved--;
  t->queued++;
}

void sbx_exec_queue_unreserve(struct sbx_exec_queue *q, struct sbx_exec_slot_rsv *r)
{
  struct tenant *t = r->t;
  free(r);
  t->reserved--;
  q->total--;
  maybe_drop(q, t);
}

void sbx_exec_queue_rsv_free(struct sbx_exec_slot_rsv *r) { free(r); }

static void take_head(struct sbx_exec_queue *q, struct tenant *t, struct sbx_exec_item *out)
{
  struct sbx_exec_slot_rsv *n = t->head;
  *out = n->it;
  if (!(t->head = n->next))
    t->tail = NULL;
  free(n);
  t->queued--;
  q->total--;
  t->running++;
}

bool sbx_exec_queue_pop(struct sbx_exec_queue *q, unsigned running_cap,
                        struct sbx_exec_item *out)
{
  struct tenant *start = q->served && q->served->next ? q->served->next : q->first;
  if (!start)
    return false;
  struct tenant *t = start;
  do {
    if (t->head && t->running < running_cap) {
      take_head(q, t, out);
      q->served = t; /* the next tenant in line gets the next worker */
      return true;
    }
    t = t->next ? t->next : q->first;
  } while (t != start);
  return false;
}

void sbx_exec_queue_done(struct sbx_exec_queue *q, int64_t tenant)
{
  struct tenant *t = find(q, tenant);
  if (!t || !t->running)
    return;
  t->running--;
  maybe_drop(q, t);
}

bool sbx_exec_queue_remove(struct sbx_exec_queue *q, int64_t tenant, const char *id)
{
  struct tenant *t = find(q, tenant);
  if (!t)
    return false;
  struct sbx_exec_slot_rsv *prev = NULL;
  for (struct sbx_exec_slot_rsv *n = t->head; n; prev = n, n = n->next) {
    if (strcmp(n->it.id, id) != 0)
      continue;
    if (prev)
      prev->next = n->next;
    else
      t->head = n->next;
    if (t->tail == n)
      t->tail = prev;
    free(n);
    t->queued--;
    q->total--;
    maybe_drop(q, t);
    return true;
  }
  return false;
}

size_t sbx_exec_queue_len(const struct sbx_exec_queue *q) { return q->total; }

size_t sbx_exec_queue_tenant_queued(const struct sbx_exec_queue *q, int64_t tenant)
{
  const struct tenant *t = find(q, tenant);
  return t ? t->queued + t->reserved : 0;
}

unsigned sbx_exec_queue_tenant_running(const struct sbx_exec_queue *q, int64_t tenant)
{
  const struct tenant *t = find(q, tenant);
  return t ? t->running : 0;
}
