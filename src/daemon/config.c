/* config.c — see config.h. */
#include "daemon/config.h"

#include <errno.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/quantity.h"
#include "common/util.h"
#include "core/core.h" /* struct sbx_core_setting */

void sbx_config_defaults(struct sbx_config *c)
{
  memset(c, 0, sizeof *c);
  snprintf(c->listen, sizeof c->listen, "127.0.0.1:8080");
  snprintf(c->state_dir, sizeof c->state_dir, "/var/lib/sandboxd");
  snprintf(c->default_profile, sizeof c->default_profile, "container");
  snprintf(c->runsc_path, sizeof c->runsc_path, "runsc");
  c->log_level = SBX_LOG_INFO;
  c->log_json = -1;
  c->max_body = 32ULL << 20;
  c->workers = 4;
  c->queue_max = 1024;
  c->queue_max_per_tenant = 256;
  c->session_ttl_s = 3600;
  c->session_max_ttl_s = 7 * 24 * 3600;
  c->idle_timeout_s = 0;
  c->max_sessions_per_tenant = 1000;
  c->probe_timeout_s = 10;
  c->probe_wait_s = 5;
  c->gvisor_kvm_timeout_s = 2;
  c->max_connections = 4096;
  c->node_slots = -1; /* from the host */
  c->max_connections_per_client = 64;
  c->request_head_timeout_s = 10;
  sbx_quota_config_defaults(&c->quota);
}

static int parse_bool(const char *v, bool *out)
{
  if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
    *out = true;
  else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") ||
           !strcasecmp(v, "off"))
    *out = false;
  else
    return -1;
  return 0;
}

static int parse_uint(const char *v, uint64_t max, uint64_t *out)
{
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-' || n > max)
    return -1;
  *out = n;
  return 0;
}

/* --resolve NAME=ADDR (curl's idea): adds pins; "a=1,b=2" adds two.  The
 * net module validates names and addresses when it starts. */
static int add_resolve(struct sbx_config *c, const char *v, struct sbx_error *err)
{
  _cleanup_free_ char *copy = strdup(v);
  if (!copy)
    return sbx_err_sys(err, ENOMEM, "resolve");
  char *save = NULL;
  for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    const char *eq = strchr(tok, '=');
    if (!eq || eq == tok || !eq[1])
      return sbx_err_set(err, SBX_E_INVALID, 0, "resolve: '%s' is not NAME=ADDR", tok);
    if (c->nresolve + 1 >= sizeof c->resolve / sizeof c->resolve[0])
      return sbx_err_set(err, SBX_E_INVALID, 0, "resolve: 64 pins at most");
    if (!(c->resolve[c->nresolve] = strdup(tok)))
      return sbx_err_sys(err, ENOMEM, "resolve");
    c->nresolve++;
  }
  return 0;
}

void sbx_config_release(struct sbx_config *c)
{
  for (size_t i = 0; i < c->nresolve; i++)
    free(c->resolve[i]);
  c->nresolve = 0;
}

/* A driver setting whose value is an absolute path (no newline). */
#define PATH_VALUE "/"

/* The drivers' settings, by config key and environment variable; their
 * values are checked here, the drivers read them (sbx_driver_setting). */
static const struct {
  const char *key, *env;
  uint64_t max; /* a whole number up to max; 0: a word from `words` */
  const char *words;
} driver_keys[SBX_CONFIG_DRIVER_KEYS] = {
    {"container_pool_size", "SANDBOXD_POOL_SIZE", 64, NULL},
    {"gvisor_pool_size", "SANDBOXD_GVISOR_POOL_SIZE", 8, NULL},
    {"gvisor_platform", "SANDBOXD_GVISOR_PLATFORM", 0, NULL}, /* runsc --platform */
    {"cgroup_parent", "SANDBOXD_CGROUP_PARENT", 0, NULL},
    {"uid_base", "SANDBOXD_UID_BASE", 4000000000u, NULL},
    {"uid_slots", "SANDBOXD_UID_SLOTS", 4096, NULL},
    {"overlay_layers", "SANDBOXD_OVERLAY_LAYERS", 0, " auto append string "},
    /* the microvm driver (docs/microvm.md) */
    {"microvm_accel", "SANDBOXD_MICROVM_ACCEL", 0, " auto kvm tcg off "},
    {"microvm_pool_size", "SANDBOXD_MICROVM_POOL_SIZE", 8, NULL},
    {"microvm_snapshot", "SANDBOXD_MICROVM_SNAPSHOT", 0, " on off "},
    {"microvm_qemu", "SANDBOXD_MICROVM_QEMU", 0, PATH_VALUE},
    {"microvm_kernel", "SANDBOXD_MICROVM_KERNEL", 0, PATH_VALUE},
    {"microvm_initrd", "SANDBOXD_MICROVM_INITRD", 0, PATH_VALUE},
    {"microvm_rootfs", "SANDBOXD_MICROVM_ROOTFS", 0, PATH_VALUE},
    {"microvm_helper", "SANDBOXD_MICROVM_HELPER", 0, PATH_VALUE},
    /* the wasm driver (docs/wasm.md): its engine and the engine's packages */
    {"wasm_node", "SANDBOXD_WASM_NODE", 0, PATH_VALUE},
    {"wasm_modules", "SANDBOXD_WASM_MODULES", 0, PATH_VALUE},
};

/* A name (cgroup directory, runsc platform): no path, no option syntax. */
static bool is_plain_name(const char *v)
{
  if (!*v || v[0] == '-' || v[0] == '.')
    return false;
  for (const char *p = v; *p; p++)
    if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && !(*p >= '0' && *p <= '9') &&
        !strchr("-_.", *p))
      return false;
  return true;
}

static bool driver_value_ok(size_t k, const char *v)
{
  uint64_t n;
  char word[40];
  if (driver_keys[k].max)
    return parse_uint(v, driver_keys[k].max, &n) == 0;
  if (!driver_keys[k].words)
    return is_plain_name(v);
  if (!strcmp(driver_keys[k].words, PATH_VALUE))
    return v[0] == '/' && !strchr(v, '\n');
  snprintf(word, sizeof word, " %.30s ", v);
  return *v && !strchr(v, ' ') && strstr(driver_keys[k].words, word);
}

static int set_driver(struct sbx_config *c, const char *key, const char *v,
                      struct sbx_error *err)
{
  for (size_t k = 0; k < SBX_CONFIG_DRIVER_KEYS; k++) {
    if (strcmp(key, driver_keys[k].key) != 0)
      continue;
    if (strlen(v) >= sizeof c->driver_values[k] || !driver_value_ok(k, v))
      return sbx_err_set(err, SBX_E_INVALID, 0, "[driver] %s: bad value '%.100s'", key, v);
    snprintf(c->driver_values[k], sizeof c->driver_values[k], "%s", v);
    return 0;
  }
  return sbx_err_set(err, SBX_E_INVALID, 0, "[driver]: unknown setting '%s'", key);
}

size_t sbx_config_driver_settings(const struct sbx_config *c, struct sbx_core_setting *out,
                                  size_t max)
{
  size_t n = 0;
  for (size_t k = 0; k < SBX_CONFIG_DRIVER_KEYS && n < max; k++)
    if (c->driver_values[k][0])
      out[n++] = (struct sbx_core_setting){driver_keys[k].key, c->driver_values[k]};
  if (c->image_layer_idmap_off && n < max)
    out[n++] = (struct sbx_core_setting){"image_layer_idmap", "off"};
  return n;
}

/* ---- [server] settings ---- */

/* One [server] setting: its name in the config file, its environment
 * variable and its flag (NULL: none), and set, which parses a value into
 * the field at off (size bytes; a number up to max).  set NULL: a quota
 * setting (core/quota_config.c parses it) listed for its variable. */
struct server_setting {
  const char *key, *env, *flag;
  int (*set)(struct sbx_config *c, const struct server_setting *s, const char *v,
             struct sbx_error *err);
  size_t off, size;
  uint64_t max;
};

static void *field(struct sbx_config *c, const struct server_setting *s)
{
  return (char *)c + s->off;
}

static int set_string(struct sbx_config *c, const struct server_setting *s, const char *v,
                      struct sbx_error *err)
{
  if (strlen(v) >= s->size)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s: value too long", s->key);
  snprintf(field(c, s), s->size, "%s", v);
  return 0;
}

/* A whole number from 1 to max. */
static int set_count(struct sbx_config *c, const struct server_setting *s, const char *v,
                     struct sbx_error *err)
{
  uint64_t n;
  if (parse_uint(v, s->max, &n) < 0 || n == 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s: a whole number up to %llu", s->key,
                       (unsigned long long)s->max);
  *(unsigned *)field(c, s) = (unsigned)n;
  return 0;
}

/* A whole number from 0 to max (seconds, or a limit where 0 is none). */
static int set_int64(struct sbx_config *c, const struct server_setting *s, const char *v,
                     struct sbx_error *err)
{
  uint64_t n;
  if (parse_uint(v, s->max, &n) < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s: a whole number up to %llu", s->key,
                       (unsigned long long)s->max);
  *(int64_t *)field(c, s) = (int64_t)n;
  return 0;
}

static int set_bool(struct sbx_config *c, const struct server_setting *s, const char *v,
                    struct sbx_error *err)
{
  return parse_bool(v, field(c, s)) < 0
             ? sbx_err_set(err, SBX_E_INVALID, 0, "%s: true or false", s->key)
             : 0;
}

/* auto or off, into a bool that says off. */
static int set_off(struct sbx_config *c, const struct server_setting *s, const char *v,
                   struct sbx_error *err)
{
  if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s: auto or off", s->key);
  *(bool *)field(c, s) = !strcmp(v, "off");
  return 0;
}

/* Pull the images a request names when they are missing, or never. */
static int set_pull(struct sbx_config *c, const struct server_setting *s, const char *v,
                    struct sbx_error *err)
{
  c->image_pull = !strcmp(v, "missing") ? 0 : !strcmp(v, "never") ? 1 : -1;
  return c->image_pull < 0 ? sbx_err_set(err, SBX_E_INVALID, 0, "pull: missing or never") : 0;
}

/* Repeatable; a comma list from the environment. */
static int set_resolve(struct sbx_config *c, const struct server_setting *s, const char *v,
                       struct sbx_error *err)
{
  return add_resolve(c, v, err);
}

static int set_log_level(struct sbx_config *c, const struct server_setting *s, const char *v,
                         struct sbx_error *err)
{
  return sbx_log_parse_level(v, &c->log_level) < 0
             ? sbx_err_set(err, SBX_E_INVALID, 0, "log_level: debug, info, warn or error")
             : 0;
}

static int set_log_format(struct sbx_config *c, const struct server_setting *s, const char *v,
                          struct sbx_error *err)
{
  c->log_json = !strcmp(v, "json") ? 1 : !strcmp(v, "text") ? 0 : !strcmp(v, "auto") ? -1 : -2;
  return c->log_json == -2 ? sbx_err_set(err, SBX_E_INVALID, 0, "log_format: auto, text or json")
                           : 0;
}

static int set_max_body(struct sbx_config *c, const struct server_setting *s, const char *v,
                        struct sbx_error *err)
{
  return sbx_parse_bytes(v, &c->max_body) < 0 || c->max_body == 0
             ? sbx_err_set(err, SBX_E_INVALID, 0, "max_body: a size like 32Mi")
             : 0;
}

/* The field f of struct sbx_config as (off, size), checked to be of type T
 * (an array as a pointer) so that a row cannot write the wrong width. */
#define CFG(f) (((struct sbx_config *)0)->f)
#define FIELD(f, T) _Generic(CFG(f), T : offsetof(struct sbx_config, f)), sizeof CFG(f)

/* The environment is read in this order (the first bad variable is the
 * one reported); a key not here is a quota's (sbx_quota_config_set). */
static const struct server_setting server_settings[] = {
    {"listen", "SANDBOXD_LISTEN", "--listen", set_string, FIELD(listen, char *)},
    {"state_dir", "SANDBOXD_STATE_DIR", "--state-dir", set_string, FIELD(state_dir, char *)},
    {"database", "SANDBOXD_DATABASE_URL", "--database", set_string, FIELD(database_url, char *)},
    {"sbx_init", "SANDBOXD_INIT", "--sbx-init", set_string, FIELD(init_path, char *)},
    {"runsc", "SANDBOXD_RUNSC", NULL, set_string, FIELD(runsc_path, char *)},
    {"log_level", "SANDBOXD_LOG_LEVEL", "--log-level", set_log_level},
    {"log_format", "SANDBOXD_LOG_FORMAT", "--log-format", set_log_format},
    {"default_profile", "SANDBOXD_DEFAULT_PROFILE", "--default-profile", set_string,
     FIELD(default_profile, char *)},
    {"workers", "SANDBOXD_WORKERS", "--workers", set_count, FIELD(workers, unsigned), 256},
    {"idle_timeout", "SANDBOXD_IDLE_TIMEOUT", "--idle-timeout", set_int64,
     FIELD(idle_timeout_s, int64_t), 365 * 86400},
    /* the flag alone turns it on (sbx_config_flag) */
    {"enable_unsafe_process_driver", "SANDBOXD_ENABLE_UNSAFE_PROCESS_DRIVER",
     "--enable-unsafe-process-driver", set_bool, FIELD(unsafe_process_driver, bool)},
    {"finops_url", "SANDBOXD_FINOPS_URL", NULL, set_string, FIELD(finops_url, char *)},
    {"metrics_auth", "SANDBOXD_METRICS_AUTH", NULL, set_bool, FIELD(metrics_auth, bool)},
    {"resolve", "SANDBOXD_RESOLVE", "--resolve", set_resolve},
    {"dns_upstream", "SANDBOXD_DNS_UPSTREAM", "--dns-upstream", set_string,
     FIELD(dns_upstream, char *)},
    {"net_pool4", "SANDBOXD_NET_POOL4", "--net-pool4", set_string, FIELD(net_pool4, char *)},
    {"net_pool6", "SANDBOXD_NET_POOL6", "--net-pool6", set_string, FIELD(net_pool6, char *)},
    {"pull", "SANDBOXD_PULL", "--pull", set_pull},
    {"probe_timeout", "SANDBOXD_PROBE_TIMEOUT", "--probe-timeout", set_count,
     FIELD(probe_timeout_s, unsigned), 600},
    {"probe_wait", "SANDBOXD_PROBE_WAIT", "--probe-wait", set_count,
     FIELD(probe_wait_s, unsigned), 600},
    /* off: never try runsc's KVM platform */
    {"gvisor_kvm", "SANDBOXD_GVISOR_KVM", "--gvisor-kvm", set_off, FIELD(gvisor_kvm_off, bool)},
    {"gvisor_kvm_timeout", "SANDBOXD_GVISOR_KVM_TIMEOUT", "--gvisor-kvm-timeout", set_count,
     FIELD(gvisor_kvm_timeout_s, unsigned), 600},
    /* off: image layers as shifted copies */
    {"image_layer_idmap", "SANDBOXD_IMAGE_LAYER_IDMAP", "--image-layer-idmap", set_off,
     FIELD(image_layer_idmap_off, bool)},
    {"workers_per_tenant", "SANDBOXD_WORKERS_PER_TENANT", "--workers-per-tenant", set_count,
     FIELD(workers_per_tenant, unsigned), 256},
    {"queue_max_per_tenant", "SANDBOXD_QUEUE_MAX_PER_TENANT", "--queue-max-per-tenant",
     set_count, FIELD(queue_max_per_tenant, unsigned), 1000000},
    {"output_memory", "SANDBOXD_OUTPUT_MEMORY"}, /* core/resources.c */
    {"output_memory_per_tenant", "SANDBOXD_OUTPUT_MEMORY_PER_TENANT"},
    {"fds_per_session", "SANDBOXD_FDS_PER_SESSION"},
    {"fds_per_tenant", "SANDBOXD_FDS_PER_TENANT"},
    /* the fleet; the flag alone turns --cluster on */
    {"cluster", "SANDBOXD_CLUSTER", "--cluster", set_bool, FIELD(cluster, bool)},
    {"node_id", "SANDBOXD_NODE_ID", "--node-id", set_string, FIELD(node_id, char *)},
    {"advertise", "SANDBOXD_ADVERTISE", "--advertise", set_string, FIELD(advertise, char *)},
    {"cluster_secret_file", "SANDBOXD_CLUSTER_SECRET_FILE", "--cluster-secret-file", set_string,
     FIELD(cluster_secret_file, char *)},
    {"placement_k", "SANDBOXD_PLACEMENT_K", "--placement-k", set_count,
     FIELD(placement_k, unsigned), 64},
    /* 0: an API node that places and forwards but runs no sandbox */
    {"node_slots", "SANDBOXD_NODE_SLOTS", "--node-slots", set_int64, FIELD(node_slots, int64_t),
     1000000},
    {"node_dead_after_ms", "SANDBOXD_NODE_DEAD_AFTER_MS", "--node-dead-after-ms", set_count,
     FIELD(node_dead_after_ms, unsigned), 10000},
    {"max_connections", "SANDBOXD_MAX_CONNECTIONS", "--max-connections", set_count,
     FIELD(max_connections, unsigned), 1000000},
    /* these two: 0 is none */
    {"max_connections_per_client", "SANDBOXD_MAX_CONNECTIONS_PER_CLIENT",
     "--max-connections-per-client", set_int64, FIELD(max_connections_per_client, int64_t),
     1000000},
    {"request_head_timeout", "SANDBOXD_REQUEST_HEAD_TIMEOUT", "--request-head-timeout",
     set_int64, FIELD(request_head_timeout_s, int64_t), 3600},
    {"e2b_templates", "SANDBOXD_E2B_TEMPLATES", "--e2b-templates", set_string,
     FIELD(e2b_templates, char *)},
    {"max_body", NULL, "--max-body", set_max_body},
    {"queue_max", NULL, NULL, set_count, FIELD(queue_max, unsigned), 1000000},
    {"max_sessions_per_tenant", NULL, NULL, set_count, FIELD(max_sessions_per_tenant, unsigned),
     1000000},
    {"session_ttl", NULL, NULL, set_int64, FIELD(session_ttl_s, int64_t), 365 * 86400},
    {"session_max_ttl", NULL, NULL, set_int64, FIELD(session_max_ttl_s, int64_t), 365 * 86400},
};
#undef FIELD
#undef CFG

#define NSERVER (sizeof server_settings / sizeof server_settings[0])

/* One server setting by name; shared by file, env and flags. */
static int set_server(struct sbx_config *c, const char *key, const char *v,
                      struct sbx_error *err)
{
  for (size_t i = 0; i < NSERVER; i++)
    if (server_settings[i].set && !strcmp(key, server_settings[i].key))
      return server_settings[i].set(c, &server_settings[i], v, err);
  int q = sbx_quota_config_set(&c->quota, NULL, key, v, err); /* quotas */
  if (q != 0)
    return q < 0 ? -1 : 0;
  return sbx_err_set(err, SBX_E_INVALID, 0, "unknown setting '%s'", key);
}

static struct sbx_profile *profile_slot(struct sbx_config *c, const char *name)
{
  for (size_t i = 0; i < c->nprofiles; i++)
    if (!strcmp(c->profiles[i].name, name))
      return &c->profiles[i];
  if (c->nprofiles == sizeof c->profiles / sizeof c->profiles[0])
    return NULL;
  struct sbx_profile *p = &c->profiles[c->nprofiles++];
  sbx_profile_defaults(p, name, "container");
  return p;
}

static int set_profile(struct sbx_profile *p, const char *key, const char *v,
                       struct sbx_error *err)
{
  uint64_t n = 0;
  int bad = 0;
  if (!strcmp(key, "driver"))
    snprintf(p->driver_name, sizeof p->driver_name, "%s", v);
  else if (!strcmp(key, "image"))
    snprintf(p->image, sizeof p->image, "%s", v);
  else if (!strcmp(key, "cpu"))
    bad = sbx_parse_cpu_millis(v, &p->limits.cpu_millis);
  else if (!strcmp(key, "memory"))
    bad = sbx_parse_bytes(v, &p->limits.memory_bytes);
  else if (!strcmp(key, "disk"))
    bad = sbx_parse_bytes(v, &p->limits.disk_bytes);
  else if (!strcmp(key, "output"))
    bad = sbx_parse_bytes(v, &p->limits.output_bytes);
  else if (!strcmp(key, "pids"))
    bad = parse_uint(v, 1u << 22, &p->limits.pids);
  else if (!strcmp(key, "max_cpu"))
    bad = sbx_parse_cpu_millis(v, &p->max.cpu_millis);
  else if (!strcmp(key, "max_memory"))
    bad = sbx_parse_bytes(v, &p->max.memory_bytes);
  else if (!strcmp(key, "max_disk"))
    bad = sbx_parse_bytes(v, &p->max.disk_bytes);
  else if (!strcmp(key, "max_output"))
    bad = sbx_parse_bytes(v, &p->max.output_bytes);
  else if (!strcmp(key, "max_pids"))
    bad = parse_uint(v, 1u << 22, &p->max.pids);
  else if (!strcmp(key, "max_timeout"))
    bad = parse_uint(v, 86400 * 7, &p->max.timeout_s);
  else if (!strcmp(key, "default_timeout"))
    bad = parse_uint(v, 86400 * 7, &p->default_timeout_s);
  else if (!strcmp(key, "pool_size")) {
    bad = parse_uint(v, 1024, &n);
    p->pool_size = (int)n;
  } else
    return sbx_err_set(err, SBX_E_INVALID, 0, "profile %s: unknown setting '%s'", p->name, key);
  if (bad)
    return sbx_err_set(err, SBX_E_INVALID, 0, "profile %s: bad value for %s: '%s'", p->name, key,
                       v);
  return 0;
}

struct ini_ctx {
  struct sbx_config *c;
  struct sbx_error *err;
  int failed;
};

static int on_ini(void *user, const char *section, const char *key, const char *value)
{
  struct ini_ctx *ctx = user;
  if (ctx->failed)
    return 0;
  int rc;
  if (!strcmp(section, "server") || !section[0]) {
    rc = set_server(ctx->c, key, value, ctx->err);
  } else if (!strcmp(section, "driver")) {
    rc = set_driver(ctx->c, key, value, ctx->err);
  } else if (!strncmp(section, "profile.", 8) && section[8]) {
    struct sbx_profile *p = profile_slot(ctx->c, section + 8);
    rc = p ? set_profile(p, key, value, ctx->err)
           : sbx_err_set(ctx->err, SBX_E_INVALID, 0, "too many profiles (32 at most)");
  } else if (!strncmp(section, "tenant.", 7) && section[7]) { /* per-tenant quotas */
    rc = sbx_quota_config_set(&ctx->c->quota, section + 7, key, value, ctx->err);
    rc = rc == 0 ? sbx_err_set(ctx->err, SBX_E_INVALID, 0, "[%s]: unknown setting '%s'", section,
                               key)
         : rc > 0 ? 0
                  : -1;
  } else {
    rc = sbx_err_set(ctx->err, SBX_E_INVALID, 0, "unknown section [%s]", section);
  }
  if (rc < 0)
    ctx->failed = 1;
  return rc == 0;
}

int sbx_config_load_file(struct sbx_config *c, struct sbx_error *err)
{
  if (!c->config_file[0])
    return 0;
  struct ini_ctx ctx = {.c = c, .err = err};
  int rc = ini_parse(c->config_file, on_ini, &ctx);
  if (rc == -1)
    return sbx_err_sys(err, errno, "cannot read config file %s", c->config_file);
  if (rc != 0)
    return sbx_err_prefix(err, "%s line %d", c->config_file, rc > 0 ? rc : 0);
  return 0;
}

int sbx_config_load_env(struct sbx_config *c, struct sbx_error *err)
{
  for (size_t i = 0; i < NSERVER; i++) {
    const struct server_setting *s = &server_settings[i];
    const char *v = s->env ? getenv(s->env) : NULL;
    if (v && *v && set_server(c, s->key, v, err) < 0)
      return sbx_err_prefix(err, "%s", s->env);
  }
  for (size_t k = 0; k < SBX_CONFIG_DRIVER_KEYS; k++) {
    const char *v = getenv(driver_keys[k].env);
    if (v && *v && set_driver(c, driver_keys[k].key, v, err) < 0)
      return sbx_err_prefix(err, "%s", driver_keys[k].env);
  }
  return 0;
}

int sbx_config_flag(struct sbx_config *c, int argc, char **argv, int i, struct sbx_error *err)
{
  const char *arg = argv[i];
  if (!strcmp(arg, "--config")) {
    if (i + 1 >= argc)
      return sbx_err_set(err, SBX_E_INVALID, 0, "--config needs a value");
    snprintf(c->config_file, sizeof c->config_file, "%s", argv[i + 1]);
    return 2;
  }
  for (size_t k = 0; k < NSERVER; k++) {
    const struct server_setting *s = &server_settings[k];
    size_t fl = s->flag ? strlen(s->flag) : 0;
    if (!fl || strncmp(arg, s->flag, fl) != 0 || (arg[fl] != '\0' && arg[fl] != '='))
      continue;
    if (s->set == set_bool) { /* a switch: present means true */
      *(bool *)field(c, s) = true;
      return 1;
    }
    if (arg[fl] == '=')
      return set_server(c, s->key, arg + fl + 1, err) < 0 ? -1 : 1;
    if (i + 1 >= argc)
      return sbx_err_set(err, SBX_E_INVALID, 0, "%s needs a value", s->flag);
    return set_server(c, s->key, argv[i + 1], err) < 0 ? -1 : 2;
  }
  return 0;
}

int sbx_config_resolve_state(struct sbx_config *c, struct sbx_error *err)
{
  if (sbx_mkdir_p(c->state_dir, 0700) < 0)
    return sbx_err_sys(err, errno, "cannot create state dir %s", c->state_dir);
  char abs[PATH_MAX];
  if (!realpath(c->state_dir, abs))
    return sbx_err_sys(err, errno, "state dir %s", c->state_dir);
  snprintf(c->state_dir, sizeof c->state_dir, "%s", abs);
  return 0;
}

int sbx_config_finish(struct sbx_config *c, struct sbx_error *err)
{
  if (sbx_config_resolve_state(c, err) < 0)
    return -1;
  if (!c->init_path[0]) {
    /* Next to the binary; in the build tree (src/daemon → src/init); or the
     * installed libexec dir. */
    static const char *const candidates[] = {"sbx-init", "../init/sbx-init",
                                             "../libexec/sandboxd/sbx-init"};
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
      return sbx_err_sys(err, errno, "readlink /proc/self/exe");
    self[n] = '\0';
    const char *dir = dirname(self);
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
      snprintf(c->init_path, sizeof c->init_path, "%s/%s", dir, candidates[i]);
      if (access(c->init_path, X_OK) == 0)
        break;
    }
  }
  if (access(c->init_path, X_OK) < 0)
    return sbx_err_sys(err, errno, "sbx-init not found at %s (set SANDBOXD_INIT or --sbx-init)",
                       c->init_path);
  return 0;
}
