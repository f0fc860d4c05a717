/* profile.c — see profile.h. */
#include "core/profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/quantity.h"
#include "common/util.h"

/* One probe thread: a driver and the set whose profiles it serves. */
struct sbx_prober {
  struct sbx_profile_set *set;
  const struct sbx_driver *driver;
  const struct sbx_driver_env *env;
  struct sbx_probe_hooks hooks;
  pthread_t thread;
  bool started;
};

/* Stands in for a driver the registry refused (runtime/driver.h), so a
 * profile always has a table: it is never probed, its profiles are
 * unavailable with the refusal, and a create that got past that fails. */
static int refused_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                          struct sbx_error *err)
{
  (void)spec;
  *out = NULL;
  return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "the profile's driver was refused");
}

static int refused_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  (void)env;
  snprintf(why, whylen, "driver refused");
  return -1;
}

static void refused_destroy(struct sbx_sandbox *sb) { (void)sb; }

static const struct sbx_driver refused_driver = {.abi = SBX_DRIVER_ABI,
                                                 .name = "(refused)",
                                                 .klass = "",
                                                 .probe = refused_probe,
                                                 .create = refused_create,
                                                 .destroy = refused_destroy};

/* A profile naming a refused driver: unavailable now, with the reason. */
static void set_refused(struct sbx_profile *p, const char *why)
{
  p->driver = &refused_driver;
  snprintf(p->reason, sizeof p->reason, "%s", why);
  atomic_store(&p->state, SBX_PROFILE_UNAVAILABLE);
}

/* Built-in maxima.  CPUs: all online ones (a quota above that buys
 * nothing).  Memory: half the host's RAM, so one sandbox can never push
 * the host (and the daemon, and every other tenant) into the OOM killer.
 * Disk: a quarter of the RAM, because a sandbox's /tmp, /work and image
 * upper layer are tmpfs — its "disk" is memory.  pids 4096 and 16 MiB of
 * captured output per stream (held in daemon memory) are fixed. */
void sbx_limits_host_max(long ncpu, uint64_t ram, struct sbx_limits *out)
{
  memset(out, 0, sizeof *out);
  out->cpu_millis = (uint64_t)(ncpu > 0 ? ncpu : 1) * 1000;
  uint64_t mem = ram ? ram : 1ULL << 30, mib = (1ULL << 20) - 1;
  out->memory_bytes = (mem / 2) & ~mib; /* whole MiB: shown as "12052Mi" */
  out->disk_bytes = (mem / 4) & ~mib;
  out->pids = 4096;
  out->timeout_s = 3600;
  out->output_bytes = 16ULL << 20;
}

static void host_max(struct sbx_limits *out)
{
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
  sbx_limits_host_max(sysconf(_SC_NPROCESSORS_ONLN), ram, out);
}

void sbx_profile_defaults(struct sbx_profile *p, const char *name, const char *driver)
{
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  snprintf(p->driver_name, sizeof p->driver_name, "%s", driver);
  snprintf(p->image, sizeof p->image, "host");
  p->defaults.cpu_millis = 1000;
  p->defaults.memory_bytes = 512ULL << 20;
  p->defaults.disk_bytes = 256ULL << 20;
  p->defaults.pids = 256;
  p->defaults.timeout_s = 30;
  p->defaults.output_bytes = 1ULL << 20;
  host_max(&p->max);
  p->default_timeout_s = 30;
  p->pool_size = 2;
}

/* How many profiles add_builtins makes. */
#define NBUILTIN 7

static void add_builtins(struct sbx_profile *out, size_t *n)
{
  sbx_profile_defaults(&out[(*n)++], "container", "container");
  sbx_profile_defaults(&out[(*n)++], "gvisor", "gvisor");
  struct sbx_profile *small = &out[(*n)++];
  sbx_profile_defaults(small, "gvisor-small", "gvisor");
  small->defaults.cpu_millis = small->max.cpu_millis = 500;
  small->defaults.memory_bytes = small->max.memory_bytes = 256ULL << 20;
  /* A dedicated kernel: microvm, and kata for seed 003's name of the same
   * class.  Cold by default (a guest costs ~200 MB of host memory). */
  sbx_profile_defaults(&out[(*n)++], "microvm", "microvm");
  out[*n - 1].pool_size = 0;
  sbx_profile_defaults(&out[(*n)++], "kata", "microvm");
  out[*n - 1].pool_size = 0;
  /* WebAssembly in an engine inside the container wall (runtime/drivers/wasm.c). */
  sbx_profile_defaults(&out[(*n)++], "wasm", "wasm");
  sbx_profile_defaults(&out[(*n)++], "process", "process");
  out[*n - 1].pool_size = 0;
}

/* A default never exceeds its maximum.  A built-in default under a lower
 * maximum (max_pids = 100) follows it down; a default the operator set
 * above the maximum — the old keys (cpu, memory, …) were the ceiling too —
 * raises the maximum, so such a config keeps accepting what it did.
 * timeout_s: the default is default_timeout_s (its own key). */
static void settle_limits(struct sbx_profile *p)
{
  struct sbx_profile ref;
  sbx_profile_defaults(&ref, "", "");
  p->defaults.timeout_s = p->default_timeout_s;
  ref.defaults.timeout_s = ref.default_timeout_s;
  uint64_t *d = &p->defaults.cpu_millis, *m = &p->max.cpu_millis, *b = &ref.defaults.cpu_millis;
  for (size_t k = 0; k < sizeof p->max / sizeof(uint64_t); k++)
    if (m[k] && d[k] > m[k]) {
      if (d[k] == b[k])
        d[k] = m[k];
      else
        m[k] = d[k];
    }
  p->default_timeout_s = p->defaults.timeout_s;
}

int sbx_profiles_build(const struct sbx_profile *extra, size_t nextra, const char *default_name,
                       struct sbx_profile_set *out, struct sbx_error *err)
{
  memset(out, 0, sizeof *out);
  out->items = calloc(NBUILTIN + nextra, sizeof *out->items);
  if (!out->items)
    return sbx_err_sys(err, ENOMEM, "profiles");
  pthread_mutex_init(&out->lock, NULL);
  sbx_cond_init_monotonic(&out->cond);
  out->sync_ready = true;
  add_builtins(out->items, &out->count);
  for (size_t i = 0; i < nextra; i++) {
    size_t j = 0;
    while (j < out->count && strcmp(out->items[j].name, extra[i].name) != 0)
      j++;
    out->items[j] = extra[i];
    if (j == out->count)
      out->count++;
  }
  snprintf(out->default_name, sizeof out->default_name, "%s",
           default_name && *default_name ? default_name : "container");
  for (size_t i = 0; i < out->count; i++) {
    struct sbx_profile *p = &out->items[i];
    settle_limits(p);
    atomic_init(&p->state, SBX_PROFILE_PROBING);
    atomic_init(&p->available, false);
    p->reason[0] = p->note[0] = '\0';
    p->driver = sbx_driver_find(p->driver_name);
    const char *refusal = p->driver ? NULL : sbx_driver_refusal(p->driver_name);
    if (refusal)
      set_refused(p, refusal);
    else if (!p->driver) {
      sbx_err_set(err, SBX_E_INVALID, 0, "profile %s: unknown driver '%s'", p->name,
                  p->driver_name);
      sbx_profiles_free(out);
      return -1;
    }
  }
  if (!sbx_profile_find(out, NULL, NULL)) {
    sbx_err_set(err, SBX_E_INVALID, 0, "default profile '%s' is not defined", out->default_name);
    sbx_profiles_free(out);
    return -1;
  }
  return 0;
}

/* The driver's result goes to every profile of that driver at once. */
static void publish(struct sbx_profile_set *set, const struct sbx_driver *d, bool ok,
                    const char *why, const char *note)
{
  pthread_mutex_lock(&set->lock);
  for (size_t i = 0; i < set->count; i++) {
    struct sbx_profile *p = &set->items[i];
    if (p->driver != d)
      continue;
    snprintf(p->reason, sizeof p->reason, "%s", ok ? "" : why[0] ? why : "probe failed");
    snprintf(p->note, sizeof p->note, "%s", note ? note : "");
    atomic_store_explicit(&p->available, ok, memory_order_relaxed);
    atomic_store_explicit(&p->state, ok ? SBX_PROFILE_AVAILABLE : SBX_PROFILE_UNAVAILABLE,
                          memory_order_release);
  }
  pthread_cond_broadcast(&set->cond);
  pthread_mutex_unlock(&set->lock);
}

static void *prober_main(void *arg)
{
  struct sbx_prober *pr = arg;
  struct sbx_profile_set *set = pr->set;
  char why[256] = "";
  uint64_t t0 = sbx_now_ms();
  bool ok = pr->driver->probe(pr->env, why, sizeof why) == 0;
  bool stop = atomic_load(&set->stopping);
  if (ok && stop) {
    ok = false;
    snprintf(why, sizeof why, "the daemon is stopping");
  }
  if (!stop && pr->hooks.probed)
    pr->hooks.probed(pr->hooks.ctx, pr->driver, ok);
  const char *note = ok && sbx_driver_has(pr->driver, note) ? pr->driver->note() : NULL;
  publish(set, pr->driver, ok, why, note);
  if (ok)
    sbx_info("core", "driver %s available (probed in %llu ms)%s%s", pr->driver->name,
             (unsigned long long)(sbx_now_ms() - t0), note && *note ? ": " : "",
             note ? note : "");
  else
    sbx_info("core", "driver %s unavailable (probed in %llu ms): %s", pr->driver->name,
             (unsigned long long)(sbx_now_ms() - t0), why);
  for (size_t i = 0; ok && !atomic_load(&set->stopping) && pr->hooks.ready && i < set->count;
       i++)
    if (set->items[i].driver == pr->driver)
      pr->hooks.ready(pr->hooks.ctx, &set->items[i]);
  return NULL;
}

int sbx_profiles_probe_start(struct sbx_profile_set *set, struct sbx_driver_env *env,
                             const struct sbx_probe_hooks *hooks, struct sbx_error *err)
{
  set->probers = calloc(set->count, sizeof *set->probers);
  if (!set->probers)
    return sbx_err_sys(err, ENOMEM, "probes");
  env->cancel = &set->stopping;
  set->probe_t0_ms = sbx_now_ms();
  for (size_t i = 0; i < set->count; i++) {
    const struct sbx_driver *d = set->items[i].driver;
    if (d == &refused_driver)
      continue; /* unavailable since the registry refused it */
    size_t j = 0;
    while (j < set->nprobers && set->probers[j].driver != d)
      j++;
    if (j < set->nprobers)
      continue; /* one probe per driver */
    struct sbx_prober *pr = &set->probers[set->nprobers++];
    *pr = (struct sbx_prober){.set = set, .driver = d, .env = env};
    if (hooks)
      pr->hooks = *hooks;
    int e = pthread_create(&pr->thread, NULL, prober_main, pr);
    if (e)
      return sbx_err_sys(err, e, "starting the %s probe", d->name);
    pr->started = true;
  }
  return 0;
}

void sbx_profiles_probe_stop(struct sbx_profile_set *set)
{
  atomic_store(&set->stopping, true);
  if (set->sync_ready) {
    pthread_mutex_lock(&set->lock);
    pthread_cond_broadcast(&set->cond);
    pthread_mutex_unlock(&set->lock);
  }
  for (size_t i = 0; i < set->nprobers; i++)
    if (set->probers[i].started) {
      pthread_join(set->probers[i].thread, NULL);
      set->probers[i].started = false;
    }
}

void sbx_profiles_free(struct sbx_profile_set *set)
{
  if (set->probers)
    sbx_profiles_probe_stop(set);
  free(set->probers);
  set->probers = NULL;
  set->nprobers = 0;
  if (set->sync_ready) {
    pthread_mutex_destroy(&set->lock);
    pthread_cond_destroy(&set->cond);
    set->sync_ready = false;
  }
  free(set->items);
  set->items = NULL;
  set->count = 0;
}

enum sbx_profile_state sbx_profile_state(const struct sbx_profile *p)
{
  return (enum sbx_profile_state)atomic_load_explicit(&p->state, memory_order_acquire);
}

enum sbx_profile_state sbx_profile_wait(struct sbx_profile_set *set, const struct sbx_profile *p,
                                        uint64_t timeout_ms)
{
  enum sbx_profile_state st = sbx_profile_state(p);
  if (st != SBX_PROFILE_PROBING || !timeout_ms)
    return st;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (timeout_ms % 1000) * 1000000ULL;
  ts.tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000ULL);
  ts.tv_nsec = (long)(ns % 1000000000ULL);
  pthread_mutex_lock(&set->lock);
  while ((st = sbx_profile_state(p)) == SBX_PROFILE_PROBING && !atomic_load(&set->stopping))
    if (pthread_cond_timedwait(&set->cond, &set->lock, &ts) == ETIMEDOUT)
      break;
  st = sbx_profile_state(p);
  pthread_mutex_unlock(&set->lock);
  return st;
}

int sbx_profile_require(const struct sbx_profile *p, uint32_t cap, const char *field,
                        const char *lacks_en, const char *lacks_fr, struct sbx_error *err)
{
  if (p->driver->caps & cap)
    return 0;
  sbx_err_field(err, field,
                "profile '%s' (driver %s) %s; use a profile whose capabilities list %s", p->name,
                p->driver_name, lacks_en, sbx_cap_name(cap));
  return sbx_err_fr(err,
                    "Le profil « %s » (pilote %s) %s ; choisissez un profil dont les capacités "
                    "incluent %s",
                    p->name, p->driver_name, lacks_fr, sbx_cap_name(cap));
}

const struct sbx_profile *sbx_profile_find(const struct sbx_profile_set *set, const char *name,
                                           struct sbx_error *err)
{
  const char *want = name ? name : set->default_name;
  for (size_t i = 0; i < set->count; i++)
    if (strcmp(set->items[i].name, want) == 0)
      return &set->items[i];
  sbx_err_field(err, "profile", "unknown profile '%s' (GET /v1/sandbox/profiles lists them)",
                want);
  sbx_err_fr(err, "Profil inconnu « %s » (GET /v1/sandbox/profiles les liste)", want);
  return NULL;
}

json_t *sbx_limits_json(const struct sbx_limits *l)
{
  char cpu[32], mem[32], disk[32], outb[32];
  sbx_format_cpu(l->cpu_millis, cpu, sizeof cpu);
  sbx_format_bytes(l->memory_bytes, mem, sizeof mem);
  sbx_format_bytes(l->disk_bytes, disk, sizeof disk);
  sbx_format_bytes(l->output_bytes, outb, sizeof outb);
  return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "cpu", cpu, "memory", mem, "disk", disk,
                   "pids", (json_int_t)l->pids, "timeout_s", (json_int_t)l->timeout_s,
                   "output_bytes", (json_int_t)l->output_bytes);
}

static const char *state_name(enum sbx_profile_state st)
{
  return st == SBX_PROFILE_AVAILABLE     ? "available"
         : st == SBX_PROFILE_UNAVAILABLE ? "unavailable"
                                         : "probing";
}

json_t *sbx_profile_json(const struct sbx_profile_set *set, const struct sbx_profile *p,
                         bool is_default)
{
  enum sbx_profile_state st = sbx_profile_state(p);
  bool avail = st == SBX_PROFILE_AVAILABLE;
  json_t *caps = json_array();
  for (uint32_t bit = 1; bit; bit <<= 1) /* every bit the driver has a name for */
    if (p->driver && (p->driver->caps & bit) && sbx_cap_name(bit))
      json_array_append_new(caps, json_string(sbx_cap_name(bit)));
  json_t *o =
      json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:o, s:o, s:o, s:I, s:I, s:b}", "name", p->name,
                "driver", p->driver_name, "class", p->driver ? p->driver->klass : "", "image",
                p->image, "available", avail, "state", state_name(st), "capabilities", caps,
                "limits", sbx_limits_json(&p->defaults), "max_limits", sbx_limits_json(&p->max),
                "default_timeout_s", (json_int_t)p->default_timeout_s, "pool_size",
                (json_int_t)p->pool_size, "default", is_default);
  if (st == SBX_PROFILE_PROBING) {
    char why[128];
    snprintf(why, sizeof why, "the %s driver's start probe is still running (for %llu ms)",
             p->driver_name, (unsigned long long)(sbx_now_ms() - set->probe_t0_ms));
    json_object_set_new(o, "reason", json_string(why));
    return o;
  }
  json_object_set_new(o, "reason", avail ? json_null() : json_string(p->reason));
  /* describe() and note() are read after the probe published (acquire) */
  const char *desc = avail && sbx_driver_has(p->driver, describe) ? p->driver->describe() : NULL;
  if (desc && *desc)
    json_object_set_new(o, "platform", json_string(desc));
  /* A dedicated-kernel driver's platform is its accelerator (microvm:
   * kvm or tcg), which a client choosing a wall wants by that name. */
  if (desc && *desc && !strcmp(p->driver->klass, "dedicated-kernel"))
    json_object_set_new(o, "accel", json_string(desc));
  if (avail && p->note[0])
    json_object_set_new(o, "platform_note", json_string(p->note));
  return o;
}
