/* conn_guard.c — see conn_guard.h.  A mutex-protected list scanned every
 * quarter of a second: even with thousands of connections that is a few
 * microseconds of work, and a deadline measured in seconds needs no finer
 * timer.  shutdown(2), not close(2): the fd still belongs to libmicrohttpd,
 * whose connection thread then sees end-of-file and cleans up as for any
 * client that left.  The slot is removed (under the same lock) before
 * libmicrohttpd closes the fd, so the watchdog never touches a reused fd.
 *
 * Clients are counted at NOTIFY_STARTED and given back at NOTIFY_CLOSED,
 * which libmicrohttpd pairs for every connection it set up; an accept
 * policy callback would leak a count whenever libmicrohttpd refuses the
 * connection after it (global limit, thread creation). */
#include "api/conn_guard.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define SCAN_MS 250
#define CLIENT_BUCKETS 256

/* Open connections of one client network; freed when the last one goes. */
struct client {
  struct client *next;
  uint8_t key[SBX_CONN_KEY_LEN];
  unsigned open;
};

struct sbx_conn_slot {
  struct sbx_conn_slot *prev, *next;
  int fd;
  uint64_t due_ns;    /* 0: disarmed */
  struct client *who; /* NULL: not counted */
};

struct sbx_conn_guard {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  bool stop;
  uint64_t timeout_ns;
  unsigned per_client; /* 0: no limit */
  struct sbx_conn_slot *head;
  struct client *clients[CLIENT_BUCKETS];
};

int sbx_conn_client_key(const struct sockaddr *sa, uint8_t key[SBX_CONN_KEY_LEN])
{
  static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  memset(key, 0, SBX_CONN_KEY_LEN);
  if (sa && sa->sa_family == AF_INET) {
    key[0] = 4;
    memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 0;
  }
  if (!sa || sa->sa_family != AF_INET6)
    return -1;
  const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
  if (!memcmp(a, v4_mapped, sizeof v4_mapped)) {
    key[0] = 4; /* a dual-stack listener sees IPv4 clients this way */
    memcpy(key + 1, a + 12, 4);
  } else {
    key[0] = 6; /* a host's /64 is its own to spread over: count it as one */
    memcpy(key + 1, a, 8);
  }
  return 0;
}

static struct client **bucket(struct sbx_conn_guard *g, const uint8_t *key)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (unsigned i = 0; i < SBX_CONN_KEY_LEN; i++)
    h = (h ^ key[i]) * 16777619u;
  return &g->clients[h % CLIENT_BUCKETS];
}

/* Under the lock.  NULL when out of memory. */
static struct client *client_get(struct sbx_conn_guard *g, const uint8_t *key)
{
  struct client **b = bucket(g, key);
  for (struct client *c = *b; c; c = c->next)
    if (!memcmp(c->key, key, SBX_CONN_KEY_LEN))
      return c;
  struct client *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  memcpy(c->key, key, SBX_CONN_KEY_LEN);
  c->next = *b;
  *b = c;
  return c;
}

/* Under the lock. */
static void client_put(struct sbx_conn_guard *g, struct client *who)
{
  if (!who || --who->open)
    return;
  for (struct client **p = bucket(g, who->key); *p; p = &(*p)->next) {
    if (*p == who) {
      *p = who->next;
      break;
    }
  }
  free(who);
}

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

int sbx_conn_guard_new(unsigned timeout_s, unsigned per_client, struct sbx_conn_guard **out,
                       struct sbx_error *err)
{
  struct sbx_conn_guard *g = calloc(1, sizeof *g);
  if (!g)
    return sbx_err_sys(err, ENOMEM, "connection guard");
  g->timeout_ns = (uint64_t)timeout_s * 1000000000ULL;
  g->per_client = per_client;
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

/* Under the lock: counts the slot against its client; false when that
 * client is now over the limit. */
static bool count_client(struct sbx_conn_guard *g, struct sbx_conn_slot *s,
                         const struct sockaddr *client)
{
  uint8_t key[SBX_CONN_KEY_LEN];
  if (!g->per_client || sbx_conn_client_key(client, key) < 0)
    return true;
  s->who = client_get(g, key);
  if (!s->who)
    return true; /* out of memory: uncounted rather than refused */
  return ++s->who->open <= g->per_client;
}

struct sbx_conn_slot *sbx_conn_guard_add(struct sbx_conn_guard *g, int fd,
                                         const struct sockaddr *client)
{
  if ((!g->timeout_ns && !g->per_client) || fd < 0)
    return NULL;
  struct sbx_conn_slot *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->fd = fd;
  pthread_mutex_lock(&g->lock);
  if (g->timeout_ns)
    s->due_ns = sbx_now_ns() + g->timeout_ns;
  s->next = g->head;
  if (g->head)
    g->head->prev = s;
  g->head = s;
  bool within = count_client(g, s, client);
  if (!within) {
    /* As the watchdog does: libmicrohttpd's thread sees end-of-file, cleans
     * up, and NOTIFY_CLOSED gives the count back. */
    shutdown(fd, SHUT_RDWR);
    s->due_ns = 0;
  }
  pthread_mutex_unlock(&g->lock);
  if (!within)
    sbx_debug("http", "refused a connection: over %u open from one client address",
              g->per_client);
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
  client_put(g, s->who);
  pthread_mutex_unlock(&g->lock);
  free(s);
}

void sbx_conn_guard_arm(struct sbx_conn_guard *g, struct sbx_conn_slot *s)
{
  if (!s || !g->timeout_ns)
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
