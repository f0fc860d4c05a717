/* resources.c — what the daemon itself holds on behalf of tenants, with a
 * budget each (struct sbx_res_config, docs/configuration.md):
 *
 *   retained output  the bytes of output kept in daemon memory: the capture
 *                    buffers of background processes (running or ended),
 *                    of buffered execs and executions while they run, and
 *                    the output queues of streamed context runs and of E2B
 *                    /execute streams, overall and per tenant;
 *   file descriptors the daemon's fds that live with a session (process
 *                    pipes and control sockets, pty masters, watch pipes,
 *                    stream connections), per session and per tenant.
 *
 * Both are charged before the thing exists and given back when it goes, so
 * one tenant running into its budget is refused (429 quota_exceeded) while
 * the others keep theirs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/resources.h"

struct tres {
  int64_t tenant;
  uint64_t mem;
  unsigned fds;
  struct tres *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tres *tenants;
static uint64_t mem_total;

static struct tres *tres_locked(int64_t tenant)
{
  struct tres *t = tenants;
  while (t && t->tenant != tenant)
    t = t->next;
  if (!t && (t = calloc(1, sizeof *t))) {
    t->tenant = tenant;
    t->next = tenants;
    tenants = t;
  }
  return t;
}

/* Forgets a tenant that holds nothing (lock held). */
static void tres_gc_locked(struct tres *t)
{
  if (t->mem || t->fds)
    return;
  for (struct tres **pp = &tenants; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      free(t);
      return;
    }
}

static const struct sbx_res_config *conf(struct sbx_core *core) { return &core->cfg.quota.res; }

uint64_t sbx_res_output_memory(struct sbx_core *core)
{
  return conf(core)->output_memory ? conf(core)->output_memory : SBX_RES_OUTPUT_MEMORY;
}

uint64_t sbx_res_output_memory_per_tenant(struct sbx_core *core)
{
  uint64_t v = conf(core)->output_memory_per_tenant;
  return v ? v : SBX_RES_OUTPUT_MEMORY_PER_TENANT;
}

static unsigned fds_per_session(struct sbx_core *core)
{
  return conf(core)->fds_per_session ? conf(core)->fds_per_session : SBX_RES_FDS_PER_SESSION;
}

static unsigned fds_per_tenant(struct sbx_core *core)
{
  return conf(core)->fds_per_tenant ? conf(core)->fds_per_tenant : SBX_RES_FDS_PER_TENANT;
}

static int exceeded(struct sbx_error *err, const char *limit, uint64_t value)
{
  snprintf(err->field, sizeof err->field, "%s:%llu", limit, (unsigned long long)value);
  return -1;
}

/* Room left for tenant in both budgets (lock held). */
static uint64_t room_locked(struct sbx_core *core, const struct tres *t)
{
  uint64_t glim = sbx_res_output_memory(core), tlim = sbx_res_output_memory_per_tenant(core);
  uint64_t troom = t && t->mem < tlim ? tlim - t->mem : 0;
  uint64_t groom = mem_total < glim ? glim - mem_total : 0;
  if (!t)
    troom = tlim;
  return troom < groom ? troom : groom;
}

uint64_t sbx_res_mem_room(struct sbx_core *core, int64_t tenant)
{
  pthread_mutex_lock(&lock);
  struct tres *t = tenants;
  while (t && t->tenant != tenant)
    t = t->next;
  uint64_t r = room_locked(core, t);
  pthread_mutex_unlock(&lock);
  return r;
}

uint64_t sbx_res_mem_take(struct sbx_core *core, int64_t tenant, uint64_t want, uint64_t min)
{
  pthread_mutex_lock(&lock);
  struct tres *t = tres_locked(tenant);
  if (!t) { /* out of memory: still counted overall, so the give balances */
    mem_total += min;
    pthread_mutex_unlock(&lock);
    return min;
  }
  /* An eighth of what is left at most: the room shrinks geometrically, so
   * the sixty-fourth process still gets a useful buffer instead of the
   * first ones taking everything. */
  uint64_t n = room_locked(core, t) / 8;
  n = n < want ? n : want;
  n = n > min ? n : min;
  t->mem += n;
  mem_total += n;
  pthread_mutex_unlock(&lock);
  return n;
}

uint64_t sbx_res_output_take(struct sbx_core *core, int64_t tenant, uint64_t per_stream,
                             uint64_t *held)
{
  uint64_t floor = per_stream < SBX_RES_OUTPUT_FLOOR ? per_stream : SBX_RES_OUTPUT_FLOOR;
  *held = sbx_res_mem_take(core, tenant, 2 * per_stream, 2 * floor);
  return *held / 2;
}

void sbx_res_mem_give(int64_t tenant, uint64_t n)
{
  if (!n)
    return;
  pthread_mutex_lock(&lock);
  struct tres *t = tres_locked(tenant);
  if (t) {
    t->mem = t->mem > n ? t->mem - n : 0;
    tres_gc_locked(t);
  }
  mem_total = mem_total > n ? mem_total - n : 0;
  pthread_mutex_unlock(&lock);
}

uint64_t sbx_res_mem_of(int64_t tenant)
{
  pthread_mutex_lock(&lock);
  uint64_t v = 0;
  for (struct tres *t = tenants; t; t = t->next)
    if (t->tenant == tenant)
      v = t->mem;
  pthread_mutex_unlock(&lock);
  return v;
}

static int fd_error(struct sbx_error *err, bool session, unsigned limit)
{
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: %s holds %u of the daemon's file "
              "descriptors (its limit: background processes, watches, streams and contexts "
              "each use some); end some first",
              session ? "this session" : "this tenant", limit);
  sbx_err_fr(err,
             "Quota dépassé : %s détient %u descripteurs de fichiers du démon (sa limite "
             ": processus en arrière-plan, surveillances, flux et contextes en utilisent) ; "
             "terminez-en d'abord",
             session ? "cette session" : "ce locataire", limit);
  return exceeded(err, session ? "fds_per_session" : "fds_per_tenant", limit);
}

/* The fds charged to one session (by id: a stream may outlive the live
 * session's struct by a moment). */
struct sres {
  int64_t tenant;
  char id[64];
  unsigned fds;
  struct sres *next;
};
static struct sres *sessions;

static struct sres *sres_locked(int64_t tenant, const char *sid)
{
  struct sres *r = sessions;
  while (r && !(r->tenant == tenant && strcmp(r->id, sid) == 0))
    r = r->next;
  if (!r && (r = calloc(1, sizeof *r))) {
    r->tenant = tenant;
    snprintf(r->id, sizeof r->id, "%s", sid);
    r->next = sessions;
    sessions = r;
  }
  return r;
}

static void sres_gc_locked(struct sres *r)
{
  if (r->fds)
    return;
  for (struct sres **pp = &sessions; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      free(r);
      return;
    }
}

int sbx_res_fds_take(struct sbx_core *core, int64_t tenant, const char *sid, unsigned n,
                     struct sbx_error *err)
{
  unsigned slim = fds_per_session(core), tlim = fds_per_tenant(core);
  pthread_mutex_lock(&lock);
  struct tres *t = tres_locked(tenant);
  struct sres *r = t ? sres_locked(tenant, sid) : NULL;
  if (!t || !r) {
    if (t)
      tres_gc_locked(t);
    pthread_mutex_unlock(&lock);
    return sbx_err_sys(err, ENOMEM, "resources");
  }
  bool session = r->fds + n > slim, tenant_full = t->fds + n > tlim;
  if (!session && !tenant_full) {
    r->fds += n;
    t->fds += n;
  }
  sres_gc_locked(r);
  tres_gc_locked(t);
  pthread_mutex_unlock(&lock);
  if (session)
    return fd_error(err, true, slim);
  return tenant_full ? fd_error(err, false, tlim) : 0;
}

void sbx_res_fds_give(int64_t tenant, const char *sid, unsigned n)
{
  if (!n)
    return;
  pthread_mutex_lock(&lock);
  struct tres *t = tres_locked(tenant);
  struct sres *r = t ? sres_locked(tenant, sid) : NULL;
  if (r) {
    r->fds = r->fds > n ? r->fds - n : 0;
    sres_gc_locked(r);
  }
  if (t) {
    t->fds = t->fds > n ? t->fds - n : 0;
    tres_gc_locked(t);
  }
  pthread_mutex_unlock(&lock);
}
