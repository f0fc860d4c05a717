/* conn_guard.c — see conn_guard.h.  A mutex-protected list scanned every
 * quarter of a second: even with thousands of connections that is a few
 * microseconds of work, and a deadline measured in seconds needs no finer
 * timer.  shutdown(2), not close(2): the fd still belongs to libmicrohttpd,
 * whose connection thread then sees end-of-file and cleans up as for any
 * client that left.  The slot is removed (under the same lock) before
 * libmicrohttpd closes the fd, so the watchdog never touches a reused fd. */
#include "api/conn_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define SCAN_MS 250

struct sbx_conn_slot {
  struct sbx_conn_slot *prev, *next;
  int fd;
  uint64_t due_ns; /* 0: disarmed */
};

struct sbx_conn_guard {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  bool stop;
  uint64_t timeout_ns;
  struct sbx_conn_slot *head;
};

static unsigned cut_late(struct sbx_conn_guard *g, uint64_t now)
{
  unsigned n = 0;
  for (struct sbx_conn_slot *s = g->head; s; s = s->next) {
    if (s->due_ns && s->due_ns <= now) {
      shutdown(s->fd, SHUT_RDWR);
      s->due_ns = 0; /* once is enough: the connection is on its way out */
      n++;
    }
  }
  return n;
}

static void *watchdog(void *arg)
{
  struct sbx_conn_guard *g = arg;
  pthread_mutex_lock(&g->lock);
  while (!g->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += SCAN_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
      ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&g->wake, &g->lock, &ts);
    unsigned n = g->stop ? 0 : cut_late(g, sbx_now_ns());
    if (n)
      sbx_info("http", "closed %u connection(s) that sent no complete request within %llu s", n,
               (unsigned long long)(g->timeout_ns / 1000000000ULL));
  }
  pthread_mutex_unlock(&g->lock);
  return NULL;
}

int sbx_conn_guard_new(unsigned timeout_s, struct sbx_conn_guard **out, struct sbx_error *err)
{
  struct sbx_conn_guard *g = calloc(1, sizeof *g);
  if (!g)
    return sbx_err_sys(err, ENOMEM, "connection guard");
  g->timeout_ns = (uint64_t)timeout_s * 1000000000ULL;
  pthread_mutex_init(&g->lock, NULL);
  sbx_cond_init_monotonic(&g->wake);
  if (timeout_s) {
    int e = pthread_create(&g->thread, NULL, watchdog, g);
    if (e) {
      free(g);
      return sbx_err_sys(err, e, "starting the request-head watchdog");
    }
  }
  *out = g;
  return 0;
}

void sbx_conn_guard_free(struct sbx_conn_guard *g)
{
  if (!g)
    return;
  if (g->timeout_ns) {
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
  }
  pthread_cond_destroy(&g->wake);
  pthread_mutex_destroy(&g->lock);
  free(g);
}

struct sbx_conn_slot *sbx_conn_guard_add(struct sbx_conn_guard *g, int fd)
{
  if (!g->timeout_ns || fd < 0)
    return NULL;
  struct sbx_conn_slot *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->fd = fd;
  pthread_mutex_lock(&g->lock);
  s->due_ns = sbx_now_ns() + g->timeout_ns;
  s->next = g->head;
  if (g->head)
    g->head->prev = s;
  g->head = s;
  pthread_mutex_unlock(&g->lock);
  return s;
}

void sbx_conn_guard_remove(struct sbx_conn_guard *g, struct sbx_conn_slot *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&g->lock);
  if (s->prev)
    s->prev->next = s->next;
  else
    g->head = s->next;
  if (s->next)
    s->next->prev = s->prev;
  pthread_mutex_unlock(&g->lock);
  free(s);
}

void sbx_conn_guard_arm(struct sbx_conn_guard *g, struct sbx_conn_slot *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&g->lock);
  s->due_ns = sbx_now_ns() + g->timeout_ns;
  pthread_mutex_unlock(&g->lock);
}

void sbx_conn_guard_disarm(struct sbx_conn_guard *g, struct sbx_conn_slot *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&g->lock);
  s->due_ns = 0;
  pthread_mutex_unlock(&g->lock);
}
