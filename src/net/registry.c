/* registry.c — which attached sandbox a source address belongs to, and the
 * policy in force for it.  The DNS responder and the egress proxy ask on
 * every query/connection; attach.c writes on attach, PATCH and detach.
 *
 * One mutex over a small array: lookups are a linear scan of a few hundred
 * entries at most, cheaper than the packet that caused them.  Every lookup
 * returns a copy of the policy, so a PATCH that replaces it never frees
 * memory a service is still reading. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "net/net_int.h"

/* Sandboxes with a network policy at once: far above what a host runs. */
#define REGISTRY_MAX 65536

struct entry {
  struct sbx_net_peer peer;
  struct sbx_net_policy *policy;
};

static struct {
  pthread_mutex_t mu;
  struct entry *v;
  size_t n, cap;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct entry *by_id_locked(const char *id)
{
  for (size_t i = 0; i < R.n; i++)
    if (strcmp(R.v[i].peer.sandbox_id, id) == 0)
      return &R.v[i];
  return NULL;
}

int sbx_net_registry_put(const struct sbx_net_peer *peer, const struct sbx_net_policy *policy)
{
  struct sbx_net_policy *copy = sbx_net_policy_dup(policy);
  if (!copy)
    return -1;
  pthread_mutex_lock(&R.mu);
  struct entry *e = by_id_locked(peer->sandbox_id);
  if (!e) {
    if (sbx_array_grow(&R.v, &R.cap, R.n + 1, sizeof *R.v, REGISTRY_MAX) < 0) {
      pthread_mutex_unlock(&R.mu);
      sbx_net_policy_free(copy);
      return -1;
    }
    e = &R.v[R.n++];
    e->policy = NULL;
  }
  e->peer = *peer;
  e->peer.sandbox_id[sizeof e->peer.sandbox_id - 1] = '\0';
  e->peer.tenant[sizeof e->peer.tenant - 1] = '\0';
  e->peer.ifname[sizeof e->peer.ifname - 1] = '\0';
  struct sbx_net_policy *old = e->policy;
  e->policy = copy;
  pthread_mutex_unlock(&R.mu);
  sbx_net_policy_free(old);
  return 0;
}

void sbx_net_registry_remove(const char *sandbox_id)
{
  struct sbx_net_policy *old = NULL;
  pthread_mutex_lock(&R.mu);
  struct entry *e = by_id_locked(sandbox_id);
  if (e) {
    old = e->policy;
    *e = R.v[--R.n];
  }
  pthread_mutex_unlock(&R.mu);
  sbx_net_policy_free(old);
}

static bool any(const void *p, size_t n)
{
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return true;
  return false;
}

int sbx_net_registry_find(int family, const void *addr, struct sbx_net_peer *peer,
                          struct sbx_net_policy **policy)
{
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (policy)
    *policy = NULL;
  /* A dual-stack socket reports v4 peers as ::ffff:a.b.c.d. */
  if (family == AF_INET6 && memcmp(addr, mapped, 12) == 0) {
    family = AF_INET;
    addr = (const uint8_t *)addr + 12;
  }
  if ((family != AF_INET && family != AF_INET6) || !any(addr, family == AF_INET ? 4 : 16))
    return -1;
  int rc = -1;
  pthread_mutex_lock(&R.mu);
  for (size_t i = 0; i < R.n && rc < 0; i++) {
    const struct sbx_net_peer *p = &R.v[i].peer;
    bool hit =
        family == AF_INET ? memcmp(&p->addr4, addr, 4) == 0 : memcmp(&p->addr6, addr, 16) == 0;
    if (!hit)
      continue;
    struct sbx_net_policy *copy = NULL;
    if (policy && !(copy = sbx_net_policy_dup(R.v[i].policy)))
      break; /* out of memory: unknown, which fails closed */
    if (peer)
      *peer = *p;
    if (policy)
      *policy = copy;
    rc = 0;
  }
  pthread_mutex_unlock(&R.mu);
  return rc;
}

unsigned sbx_net_registry_count(void)
{
  pthread_mutex_lock(&R.mu);
  unsigned n = (unsigned)R.n;
  pthread_mutex_unlock(&R.mu);
  return n;
}
