/* attach.c — one sandbox's link to the policy: index and addresses from
 * the pool, the veth pair, the registry entry the DNS responder and the
 * proxy look up, the nft chains, and the proxy environment.
 *
 * Every step is undone on failure (fail closed: the caller then destroys
 * the sandbox).  The attachment owns everything it made; detach undoes it
 * in reverse.  sbx_net_stop() undoes every live attachment but leaves the
 * handles to their owners, whose later detach only frees. */
#include "net/plumb.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define NENV 6

struct sbx_net_attachment {
  pthread_mutex_t mu;
  struct sbx_net_peer peer;
  struct sbx_net_slot slot;
  bool live; /* link, registry entry and rules exist */
  char env_buf[NENV][96];
  const char *env[NENV + 1];
  struct sbx_net_attachment *prev, *next;
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sbx_net_attachment *head;

static void list_add(struct sbx_net_attachment *a)
{
  pthread_mutex_lock(&list_lock);
  a->next = head;
  if (head)
    head->prev = a;
  head = a;
  pthread_mutex_unlock(&list_lock);
}

static void list_del(struct sbx_net_attachment *a)
{
  pthread_mutex_lock(&list_lock);
  if (a->prev)
    a->prev->next = a->next;
  else if (head == a)
    head = a->next;
  if (a->next)
    a->next->prev = a->prev;
  a->prev = a->next = NULL;
  pthread_mutex_unlock(&list_lock);
}

static void make_env(struct sbx_net_attachment *a)
{
  char gw[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a->slot.gw4, gw, sizeof gw);
  static const char *const names[NENV] = {"HTTP_PROXY",  "HTTPS_PROXY", "http_proxy",
                                          "https_proxy", "NO_PROXY",    "no_proxy"};
  for (int i = 0; i < NENV; i++) {
    if (i < 4)
      snprintf(a->env_buf[i], sizeof a->env_buf[i], "%s=http://%s:%u", names[i], gw,
               sbx_net_proxy_port());
    else
      snprintf(a->env_buf[i], sizeof a->env_buf[i], "%s=localhost,127.0.0.1,::1", names[i]);
    a->env[i] = a->env_buf[i];
  }
  a->env[NENV] = NULL;
}

int sbx_net_attach(const char *sandbox_id, const char *tenant, pid_t init_pid,
                   const struct sbx_net_policy *policy, struct sbx_net_attachment **out,
                   struct sbx_error *err)
{
  char why[300];
  if (!sbx_net_available(why, sizeof why))
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "%s", why);
  if (!policy || policy->egress != SBX_NET_EGRESS_ALLOWLIST || init_pid <= 0 || !sandbox_id)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "net attach: want an allowlist policy and a pid");
  struct sbx_net_attachment *a = calloc(1, sizeof *a);
  if (!a)
    return sbx_err_sys(err, ENOMEM, "net attach");
  pthread_mutex_init(&a->mu, NULL);
  if (sbx_net_pool_alloc(&a->slot, err) < 0)
    goto fail_free;
  struct sbx_net_peer *p = &a->peer;
  snprintf(p->sandbox_id, sizeof p->sandbox_id, "%s", sandbox_id);
  snprintf(p->tenant, sizeof p->tenant, "%s", tenant ? tenant : "");
  snprintf(p->ifname, sizeof p->ifname, "%s%u", sbx_net_ifprefix(), a->slot.idx);
  p->addr4 = a->slot.addr4;
  p->addr6 = a->slot.addr6;
  p->nft_id = a->slot.idx;
  if (sbx_net_link_create(p->ifname, init_pid, &a->slot, err) < 0)
    goto fail_pool;
  if (sbx_net_registry_put(p, policy) < 0) {
    sbx_err_set(err, SBX_E_INTERNAL, errno, "net: registry");
    goto fail_link;
  }
  if (sbx_net_nft_sandbox_set(p, policy, err) < 0)
    goto fail_registry;
  make_env(a);
  a->live = true;
  list_add(a);
  *out = a;
  return 0;
fail_registry:
  sbx_net_registry_remove(p->sandbox_id);
fail_link:
  sbx_net_link_delete(p->ifname);
fail_pool:
  sbx_net_pool_release(a->slot.idx);
fail_free:
  pthread_mutex_destroy(&a->mu);
  free(a);
  return sbx_err_prefix(err, "attach %s to the network", sandbox_id);
}

int sbx_net_update(struct sbx_net_attachment *a, const struct sbx_net_policy *policy,
                   struct sbx_error *err)
{
  static const struct sbx_net_policy none = {.egress = SBX_NET_EGRESS_NONE};
  if (!policy)
    policy = &none;
  pthread_mutex_lock(&a->mu);
  int r = -1;
  if (!a->live) {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "network policy support is stopped");
  } else if (sbx_net_registry_put(&a->peer, policy) < 0) {
    sbx_err_set(err, SBX_E_INTERNAL, errno, "net: registry");
  } else if (sbx_net_nft_sandbox_set(&a->peer, policy, err) < 0) {
    /* The services already see the new policy; nft still has the old one.
     * Fail closed: admit nothing rather than a mix of the two. */
    sbx_net_registry_put(&a->peer, &none);
    struct sbx_error e2;
    if (sbx_net_nft_sandbox_set(&a->peer, &none, &e2) < 0)
      sbx_error("net", "%s: cannot close the network after a failed update: %s",
                a->peer.sandbox_id, e2.msg);
  } else {
    r = 0;
  }
  pthread_mutex_unlock(&a->mu);
  return r;
}

/* Undoes what attach made; idempotent. */
static void undo(struct sbx_net_attachment *a)
{
  pthread_mutex_lock(&a->mu);
  if (a->live) {
    sbx_net_nft_sandbox_del(&a->peer);
    sbx_net_registry_remove(a->peer.sandbox_id);
    if (sbx_net_link_delete(a->peer.ifname) < 0)
      sbx_warn("net", "delete link %s: %s", a->peer.ifname, strerror(errno));
    sbx_net_pool_release(a->slot.idx);
    a->live = false;
  }
  pthread_mutex_unlock(&a->mu);
}

void sbx_net_detach(struct sbx_net_attachment *a)
{
  if (!a)
    return;
  list_del(a);
  undo(a);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

void sbx_net_detach_all(void)
{
  /* Holding list_lock across undo: an owner's concurrent detach either
   * took its attachment off the list first (never seen here) or waits in
   * list_del until this undo is done, and then only frees. */
  pthread_mutex_lock(&list_lock);
  while (head) {
    struct sbx_net_attachment *a = head;
    head = a->next;
    if (head)
      head->prev = NULL;
    a->prev = a->next = NULL;
    undo(a);
  }
  pthread_mutex_unlock(&list_lock);
}

const char *const *sbx_net_env(const struct sbx_net_attachment *a) { return a ? a->env : NULL; }

const struct sbx_net_peer *sbx_net_attachment_peer(const struct sbx_net_attachment *a)
{
  return &a->peer;
}
