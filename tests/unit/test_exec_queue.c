/* test_exec_queue.c — the execution scheduler's policy (core/exec_queue.c):
 * round robin between tenants, FIFO within one, the running cap, both
 * queue bounds with reservations, remove, and that a tenant arriving while
 * another is served gets the next turn. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/exec_queue.h"

static void push(struct sbx_exec_queue *q, int64_t tenant, const char *id)
{
  struct sbx_exec_slot_rsv *r = NULL;
  CHECK(sbx_exec_queue_reserve(q, tenant, false, &r) == SBX_EXQ_OK && r);
  if (r)
    sbx_exec_queue_commit(q, r, id);
}

static const char *pop(struct sbx_exec_queue *q, unsigned cap)
{
  static struct sbx_exec_item it;
  return sbx_exec_queue_pop(q, cap, &it) ? it.id : "";
}

static void round_robin_and_fifo(void)
{
  struct sbx_exec_queue *q = sbx_exec_queue_new(100, 100);
  for (int i = 0; i < 4; i++) {
    char id[8];
    snprintf(id, sizeof id, "a%d", i);
    push(q, 1, id);
  }
  push(q, 2, "b0");
  push(q, 2, "b1");
  push(q, 3, "c0");
  /* a's backlog came first; b and c still get every other worker */
  CHECK_STR(pop(q, 10), "a0");
  CHECK_STR(pop(q, 10), "b0");
  CHECK_STR(pop(q, 10), "c0");
  CHECK_STR(pop(q, 10), "a1");
  CHECK_STR(pop(q, 10), "b1");
  CHECK_STR(pop(q, 10), "a2");
  CHECK_STR(pop(q, 10), "a3");
  CHECK_STR(pop(q, 10), "");
  CHECK(sbx_exec_queue_len(q) == 0);
  sbx_exec_queue_free(q);
}

static void running_cap(void)
{
  struct sbx_exec_queue *q = sbx_exec_queue_new(100, 100);
  push(q, 1, "a0");
  push(q, 1, "a1");
  push(q, 1, "a2");
  CHECK_STR(pop(q, 2), "a0");
  CHECK_STR(pop(q, 2), "a1");
  CHECK_STR(pop(q, 2), ""); /* a2 waits: a has 2 running */
  CHECK(sbx_exec_queue_tenant_running(q, 1) == 2);
  push(q, 2, "b0");
  CHECK_STR(pop(q, 2), "b0"); /* others are served past a capped tenant */
  sbx_exec_queue_done(q, 1);
  CHECK_STR(pop(q, 2), "a2");
  sbx_exec_queue_done(q, 1);
  sbx_exec_queue_done(q, 1);
  sbx_exec_queue_done(q, 2);
  sbx_exec_queue_done(q, 2); /* more than popped: ignored */
  CHECK(sbx_exec_queue_tenant_running(q, 1) == 0 && sbx_exec_queue_tenant_running(q, 2) == 0);
  sbx_exec_queue_free(q);
}

static void late_tenant_gets_the_next_turn(void)
{
  struct sbx_exec_queue *q = sbx_exec_queue_new(100, 100);
  push(q, 1, "a0");
  push(q, 1, "a1");
  CHECK_STR(pop(q, 5), "a0");
  push(q, 2, "b0"); /* arrives after a was served: b is next, not a again */
  CHECK_STR(pop(q, 5), "b0");
  CHECK_STR(pop(q, 5), "a1");
  /* the last-served tenant leaving keeps its successor's turn */
  push(q, 3, "c0");
  push(q, 4, "d0");
  push(q, 4, "d1");
  sbx_exec_queue_done(q, 2); /* b (served before a1) leaves */
  CHECK_STR(pop(q, 5), "c0");
  sbx_exec_queue_done(q, 3); /* c, the last served, leaves: d is next */
  push(q, 1, "a2");
  CHECK_STR(pop(q, 5), "d0");
  CHECK_STR(pop(q, 5), "a2");
  CHECK_STR(pop(q, 5), "d1");
  sbx_exec_queue_free(q);
}

static void bounds_and_reservations(void)
{
  struct sbx_exec_queue *q = sbx_exec_queue_new(5, 2);
  struct sbx_exec_slot_rsv *r1 = NULL, *r2 = NULL, *r3 = NULL;
  CHECK(sbx_exec_queue_reserve(q, 1, false, &r1) == SBX_EXQ_OK);
  CHECK(sbx_exec_queue_reserve(q, 1, false, &r2) == SBX_EXQ_OK);
  CHECK(sbx_exec_queue_reserve(q, 1, false, &r3) == SBX_EXQ_FULL_TENANT && !r3);
  CHECK(sbx_exec_queue_tenant_queued(q, 1) == 2);
  sbx_exec_queue_unreserve(q, r2); /* the insert failed: room again */
  CHECK(sbx_exec_queue_tenant_queued(q, 1) == 1);
  sbx_exec_queue_commit(q, r1, "a0");
  push(q, 1, "a1");
  /* recovery may go over a tenant's bound, never over the total */
  CHECK(sbx_exec_queue_reserve(q, 1, true, &r3) == SBX_EXQ_OK);
  sbx_exec_queue_commit(q, r3, "a2");
  push(q, 2, "b0");
  push(q, 3, "c0");
  CHECK(sbx_exec_queue_len(q) == 5);
  CHECK(sbx_exec_queue_reserve(q, 4, true, &r3) == SBX_EXQ_FULL_TOTAL && !r3);
  CHECK(sbx_exec_queue_tenant_queued(q, 4) == 0);
  /* popping makes room: running ones do not count towards the queue */
  CHECK_STR(pop(q, 1), "a0");
  CHECK(sbx_exec_queue_len(q) == 4);
  CHECK(sbx_exec_queue_reserve(q, 4, false, &r3) == SBX_EXQ_OK);
  sbx_exec_queue_commit(q, r3, "d0");
  sbx_exec_queue_free(q); /* frees what is still queued (ASan: no leak) */
}

static void remove_queued(void)
{
  struct sbx_exec_queue *q = sbx_exec_queue_new(10, 3);
  push(q, 1, "a0");
  push(q, 1, "a1");
  push(q, 1, "a2");
  CHECK(sbx_exec_queue_remove(q, 1, "a1"));
  CHECK(!sbx_exec_queue_remove(q, 1, "a1"));
  CHECK(!sbx_exec_queue_remove(q, 2, "a0")); /* another tenant's id: not found */
  CHECK(sbx_exec_queue_tenant_queued(q, 1) == 2);
  CHECK(sbx_exec_queue_remove(q, 1, "a2")); /* the tail */
  push(q, 1, "a3");
  CHECK_STR(pop(q, 5), "a0");
  CHECK_STR(pop(q, 5), "a3");
  CHECK(!sbx_exec_queue_remove(q, 1, "a0")); /* running, not queued */
  CHECK(sbx_exec_queue_remove(q, 1, "nope") == false);
  sbx_exec_queue_free(q);
}

int main(void)
{
  CHECK_CASE(round_robin_and_fifo);
  CHECK_CASE(running_cap);
  CHECK_CASE(late_tenant_gets_the_next_turn);
  CHECK_CASE(bounds_and_reservations);
  CHECK_CASE(remove_queued);
  return check_finish("exec_queue");
}
