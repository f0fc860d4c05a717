/* driver.c — the driver registry (ABI and MUST members checked when a
 * table is registered), the driver settings accessor, and the sbx_sandbox
 * allocation helpers every driver uses (runtime/driver.h). */
#include "runtime/driver.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "isolation/iso.h" /* sbx_iso_set_resolv_conf */
#include "runtime/chan.h"  /* struct sbx_sandbox_client, sbx_fdin_discard */

#define MAX_DRIVERS 16

static const struct sbx_driver *registered[MAX_DRIVERS + 1];
static size_t nregistered;

/* Refused tables by name, so their profiles can say why. */
static struct {
  char name[32];
  char why[192];
} refused[MAX_DRIVERS];
static size_t nrefused;

static const struct sbx_driver *const builtins[] = {
    &sbx_drv_container, &sbx_drv_gvisor, &sbx_drv_microvm, &sbx_drv_wasm, &sbx_drv_process,
};

static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static int register_one(const struct sbx_driver *drv, struct sbx_error *err);

static void register_builtins(void)
{
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
    struct sbx_error err = {0};
    (void)register_one(builtins[i], &err); /* logged when refused */
  }
}

static const struct sbx_driver *find_registered(const char *name)
{
  for (size_t i = 0; name && i < nregistered; i++)
    if (!strcmp(registered[i]->name, name))
      return registered[i];
  return NULL;
}

/* The first MUST member drv leaves NULL, or NULL. */
static const char *missing_must(const struct sbx_driver *drv)
{
  if (!drv->name || !*drv->name)
    return "name";
  if (!drv->klass)
    return "klass";
  if (!drv->probe)
    return "probe";
  if (!drv->create)
    return "create";
  if (!drv->destroy)
    return "destroy";
  return NULL;
}

/* Why drv cannot be registered ("" if it can). */
static void check(const struct sbx_driver *drv, char *why, size_t len)
{
  const char *miss;
  why[0] = '\0';
  if (drv->abi < SBX_DRIVER_ABI_MIN || drv->abi > SBX_DRIVER_ABI)
    snprintf(why, len, "built for driver ABI %u, this daemon runs ABI %d to %d", drv->abi,
             SBX_DRIVER_ABI_MIN, SBX_DRIVER_ABI);
  else if ((miss = missing_must(drv)))
    snprintf(why, len, "MUST member '%s' is NULL", miss);
  else if (find_registered(drv->name) || sbx_driver_refusal(drv->name))
    snprintf(why, len, "a driver of that name is already registered");
  else if (nregistered >= MAX_DRIVERS)
    snprintf(why, len, "more than %d drivers", MAX_DRIVERS);
}

static void remember_refusal(const char *name, const char *why)
{
  if (nrefused >= MAX_DRIVERS || sbx_driver_refusal(name))
    return;
  snprintf(refused[nrefused].name, sizeof refused[nrefused].name, "%s", name);
  snprintf(refused[nrefused].why, sizeof refused[nrefused].why, "driver refused: %s", why);
  nrefused++;
}

/* abi and name come first in every ABI (the bump rule never moves them),
 * so a table of any ABI can be named in its refusal. */
static int register_one(const struct sbx_driver *drv, struct sbx_error *err)
{
  if (!drv)
    return sbx_err_set(err, SBX_E_INVALID, EINVAL, "driver: no table");
  bool named = drv->name && *drv->name;
  const char *name = named ? drv->name : "(unnamed)";
  char why[160];
  check(drv, why, sizeof why);
  if (why[0]) {
    sbx_warn("runtime", "driver %s refused: %s", name, why);
    if (named)
      remember_refusal(name, why);
    return sbx_err_set(err, SBX_E_INVALID, 0, "driver %s refused: %s", name, why);
  }
  registered[nregistered++] = drv;
  return 0;
}

int sbx_driver_register(const struct sbx_driver *drv, struct sbx_error *err)
{
  pthread_once(&builtins_once, register_builtins);
  return register_one(drv, err);
}

const char *sbx_driver_refusal(const char *name)
{
  for (size_t i = 0; name && i < nrefused; i++)
    if (!strcmp(refused[i].name, name))
      return refused[i].why;
  return NULL;
}

const struct sbx_driver *const *sbx_drivers_all(void)
{
  pthread_once(&builtins_once, register_builtins);
  return registered;
}

const struct sbx_driver *sbx_driver_find(const char *name)
{
  pthread_once(&builtins_once, register_builtins);
  return find_registered(name);
}

const char *sbx_driver_setting(const struct sbx_driver_env *env, const char *key)
{
  for (size_t i = 0; env && env->settings && i < env->nsettings; i++)
    if (env->settings[i].key && !strcmp(env->settings[i].key, key))
      return env->settings[i].value;
  return NULL;
}

unsigned sbx_driver_setting_uint(const struct sbx_driver_env *env, const char *key, unsigned def,
                                 unsigned max)
{
  const char *v = sbx_driver_setting(env, key);
  if (!v || !*v)
    return def;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (*end || v[0] == '-' || errno) {
    sbx_warn("runtime", "setting %s: '%s' is not a whole number; using %u", key, v, def);
    return def;
  }
  return n > max ? max : (unsigned)n;
}

const char *sbx_cap_name(uint32_t bit)
{
  switch (bit) {
  case SBX_CAP_EXEC:
    return "exec";
  case SBX_CAP_FILES:
    return "files";
  case SBX_CAP_TERMINAL:
    return "terminal";
  case SBX_CAP_WATCH:
    return "watch";
  case SBX_CAP_UPSTREAM:
    return "upstream";
  case SBX_CAP_ARCHIVE:
    return "archive";
  case SBX_CAP_CONTEXTS:
    return "contexts";
  case SBX_CAP_EGRESS:
    return "egress_allowlist";
  case SBX_CAP_IMAGES:
    return "images";
  default:
    return NULL;
  }
}

/* The sandbox and its client state in one allocation. */
struct sandbox_alloc {
  struct sbx_sandbox sb;
  struct sbx_sandbox_client client;
};

struct sbx_sandbox *sbx_sandbox_alloc(const struct sbx_driver *drv,
                                      const struct sbx_sandbox_spec *spec)
{
  struct sandbox_alloc *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  struct sbx_sandbox *sb = &a->sb;
  sb->driver = drv;
  sb->init_fd = -1;
  sb->init_pid = -1;
  sb->client = &a->client;
  if (spec) {
    if (spec->id)
      snprintf(sb->id, sizeof sb->id, "%s", spec->id);
    sb->limits = spec->limits;
  }
  pthread_mutex_init(&a->client.chan_lock, NULL);
  pthread_mutex_init(&a->client.pending_lock, NULL);
  atomic_init(&a->client.users, 1);
  return sb;
}

void sbx_sandbox_hold(struct sbx_sandbox *sb) { atomic_fetch_add(&sb->client->users, 1); }

void sbx_sandbox_release(struct sbx_sandbox *sb)
{
  if (atomic_fetch_sub(&sb->client->users, 1) != 1)
    return;
  pthread_mutex_destroy(&sb->client->chan_lock);
  pthread_mutex_destroy(&sb->client->pending_lock);
  free(sb->spool_dir);
  free((struct sandbox_alloc *)sb); /* sb is the first member */
}

void sbx_sandbox_free(struct sbx_sandbox *sb)
{
  if (!sb)
    return;
  /* Under the channel lock, so an exec still running on another thread
   * never has this fd number in a call when it closes. */
  pthread_mutex_lock(&sb->client->chan_lock);
  if (sb->init_fd >= 0)
    close(sb->init_fd);
  sb->init_fd = -1;
  pthread_mutex_unlock(&sb->client->chan_lock);
  sbx_fdin_discard(sb);
  sbx_sandbox_release(sb);
}

void sbx_drivers_set_resolv_conf(const char *text) { sbx_iso_set_resolv_conf(text); }
