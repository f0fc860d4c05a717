/* config.c — see config.h. */
#include "daemon/config.h"

#include <errno.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
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

/* One server setting by name; shared by file, env and flags. */
static int set_server(struct sbx_config *c, const char *key, const char *v,
                      struct sbx_error *err)
{
  uint64_t n;
  bool b;
#define STR(name, field)                                                                        \
  if (!strcmp(key, name)) {                                                                     \
    if (strlen(v) >= sizeof c->field)                                                           \
      return sbx_err_set(err, SBX_E_INVALID, 0, "%s: value too long", key);                     \
    snprintf(c->field, sizeof c->field, "%s", v);                                               \
    return 0;                                                                                   \
  }
  STR("listen", listen)
  STR("state_dir", state_dir)
  STR("database", database_url)
  STR("sbx_init", init_path)
  STR("runsc", runsc_path)
  STR("default_profile", default_profile)
  STR("finops_url", finops_url)
  STR("dns_upstream", dns_upstream)
  STR("net_pool4", net_pool4)
  STR("net_pool6", net_pool6)
  STR("e2b_templates", e2b_templates)
#undef STR
  if (!strcmp(key, "pull")) { /* pull images a request names when missing? */
    c->image_pull = !strcmp(v, "missing") ? 0 : !strcmp(v, "never") ? 1 : -1;
    return c->image_pull < 0 ? sbx_err_set(err, SBX_E_INVALID, 0, "pull: missing or never") : 0;
  }
  if (!strcmp(key, "resolve")) /* repeatable; a comma list from the environment */
    return add_resolve(c, v, err);
  if (!strcmp(key, "log_level"))
    return sbx_log_parse_level(v, &c->log_level) < 0
               ? sbx_err_set(err, SBX_E_INVALID, 0, "log_level: debug, info, warn or error")
               : 0;
  if (!strcmp(key, "log_format")) {
    c->log_json = !strcmp(v, "json") ? 1 : !strcmp(v, "text") ? 0 : !strcmp(v, "auto") ? -1 : -2;
    return c->log_json == -2
               ? sbx_err_set(err, SBX_E_INVALID, 0, "log_format: auto, text or json")
               : 0;
  }
  if (!strcmp(key, "max_body"))
    return sbx_parse_bytes(v, &c->max_body) < 0 || c->max_body == 0
               ? sbx_err_set(err, SBX_E_INVALID, 0, "max_body: a size like 32Mi")
               : 0;
  if (!strcmp(key, "metrics_auth"))
    return parse_bool(v, &c->metrics_auth) < 0
               ? sbx_err_set(err, SBX_E_INVALID, 0, "%s: true or false", key)
               : 0;
  if (!strcmp(key, "gvisor_kvm")) { /* off: never try runsc's KVM platform */
    if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0)
      return sbx_err_set(err, SBX_E_INVALID, 0, "gvisor_kvm: auto or off");
    c->gvisor_kvm_off = !strcmp(v, "off");
    return 0;
  }
  if (!strcmp(key, "image_layer_idmap")) { /* off: image layers as shifted copies */
    if (strcmp(v, "auto") != 0 && strcmp(v, "off") != 0)
      return sbx_err_set(err, SBX_E_INVALID, 0, "image_layer_idmap: auto or off");
    c->image_layer_idmap_off = !strcmp(v, "off");
    return 0;
  }
  if (!strcmp(key, "enable_unsafe_process_driver"))
    return parse_bool(v, &c->unsafe_process_driver) < 0
               ? sbx_err_set(err, SBX_E_INVALID, 0, "%s: true or false", key)
               : 0;
  struct {
    const char *name;
    uint64_t max;
    void *field;
    int is64;
  } nums[] = {
      {"workers", 256, &c->workers, 0},
      {"queue_max", 1000000, &c->queue_max, 0},
      {"queue_max_per_tenant", 1000000, &c->queue_max_per_tenant, 0},
      {"workers_per_tenant", 256, &c->workers_per_tenant, 0},
      {"max_sessions_per_tenant", 1000000, &c->max_sessions_per_tenant, 0},
      {"session_ttl", 365 * 86400, &c->session_ttl_s, 1},
      {"session_max_ttl", 365 * 86400, &c->session_max_ttl_s, 1},
      {"idle_timeout", 365 * 86400, &c->idle_timeout_s, 1},
      {"probe_timeout", 600, &c->probe_timeout_s, 0},
      {"probe_wait", 600, &c->probe_wait_s, 0},
      {"gvisor_kvm_timeout", 600, &c->gvisor_kvm_timeout_s, 0},
      {"max_connections", 1000000, &c->max_connections, 0},
      {"max_connections_per_client", 1000000, &c->max_connections_per_client, 1}, /* 0: none */
      {"request_head_timeout", 3600, &c->request_head_timeout_s, 1},              /* 0: none */
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    if (strcmp(key, nums[i].name) != 0)
      continue;
    if (parse_uint(v, nums[i].max, &n) < 0 || (n == 0 && !nums[i].is64))
      return sbx_err_set(err, SBX_E_INVALID, 0, "%s: a whole number up to %llu", key,
                         (unsigned long long)nums[i].max);
    if (nums[i].is64)
      *(int64_t *)nums[i].field = (int64_t)n;
    else
      *(unsigned *)nums[i].field = (unsigned)n;
    return 0;
  }
  (void)b;
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

static const struct {
  const char *env;
  const char *key;
} env_map[] = {
    {"SANDBOXD_LISTEN", "listen"},
    {"SANDBOXD_STATE_DIR", "state_dir"},
    {"SANDBOXD_DATABASE_URL", "database"},
    {"SANDBOXD_INIT", "sbx_init"},
    {"SANDBOXD_RUNSC", "runsc"},
    {"SANDBOXD_LOG_LEVEL", "log_level"},
    {"SANDBOXD_LOG_FORMAT", "log_format"},
    {"SANDBOXD_DEFAULT_PROFILE", "default_profile"},
    {"SANDBOXD_WORKERS", "workers"},
    {"SANDBOXD_IDLE_TIMEOUT", "idle_timeout"},
    {"SANDBOXD_ENABLE_UNSAFE_PROCESS_DRIVER", "enable_unsafe_process_driver"},
    {"SANDBOXD_FINOPS_URL", "finops_url"},
    {"SANDBOXD_METRICS_AUTH", "metrics_auth"},
    {"SANDBOXD_RESOLVE", "resolve"},
    {"SANDBOXD_DNS_UPSTREAM", "dns_upstream"},
    {"SANDBOXD_NET_POOL4", "net_pool4"},
    {"SANDBOXD_NET_POOL6", "net_pool6"},
    {"SANDBOXD_PULL", "pull"},
    {"SANDBOXD_PROBE_TIMEOUT", "probe_timeout"},
    {"SANDBOXD_PROBE_WAIT", "probe_wait"},
    {"SANDBOXD_GVISOR_KVM", "gvisor_kvm"},
    {"SANDBOXD_GVISOR_KVM_TIMEOUT", "gvisor_kvm_timeout"},
    {"SANDBOXD_IMAGE_LAYER_IDMAP", "image_layer_idmap"},
    {"SANDBOXD_WORKERS_PER_TENANT", "workers_per_tenant"},
    {"SANDBOXD_QUEUE_MAX_PER_TENANT", "queue_max_per_tenant"},
    {"SANDBOXD_OUTPUT_MEMORY", "output_memory"}, /* core/resources.c */
    {"SANDBOXD_OUTPUT_MEMORY_PER_TENANT", "output_memory_per_tenant"},
    {"SANDBOXD_FDS_PER_SESSION", "fds_per_session"},
    {"SANDBOXD_FDS_PER_TENANT", "fds_per_tenant"},
    {"SANDBOXD_MAX_CONNECTIONS", "max_connections"},
    {"SANDBOXD_MAX_CONNECTIONS_PER_CLIENT", "max_connections_per_client"},
    {"SANDBOXD_REQUEST_HEAD_TIMEOUT", "request_head_timeout"},
    {"SANDBOXD_E2B_TEMPLATES", "e2b_templates"},
};

int sbx_config_load_env(struct sbx_config *c, struct sbx_error *err)
{
  for (size_t i = 0; i < sizeof env_map / sizeof env_map[0]; i++) {
    const char *v = getenv(env_map[i].env);
    if (v && *v && set_server(c, env_map[i].key, v, err) < 0)
      return sbx_err_prefix(err, "%s", env_map[i].env);
  }
  for (size_t k = 0; k < SBX_CONFIG_DRIVER_KEYS; k++) {
    const char *v = getenv(driver_keys[k].env);
    if (v && *v && set_driver(c, driver_keys[k].key, v, err) < 0)
      return sbx_err_prefix(err, "%s", driver_keys[k].env);
  }
  return 0;
}

static const struct {
  const char *flag;
  const char *key; /* NULL: boolean flag */
} flag_map[] = {
    {"--listen", "listen"},
    {"--state-dir", "state_dir"},
    {"--database", "database"},
    {"--log-level", "log_level"},
    {"--log-format", "log_format"},
    {"--default-profile", "default_profile"},
    {"--workers", "workers"},
    {"--sbx-init", "sbx_init"},
    {"--idle-timeout", "idle_timeout"},
    {"--max-body", "max_body"},
    {"--resolve", "resolve"},
    {"--dns-upstream", "dns_upstream"},
    {"--net-pool4", "net_pool4"},
    {"--net-pool6", "net_pool6"},
    {"--pull", "pull"},
    {"--probe-timeout", "probe_timeout"},
    {"--probe-wait", "probe_wait"},
    {"--gvisor-kvm", "gvisor_kvm"},
    {"--gvisor-kvm-timeout", "gvisor_kvm_timeout"},
    {"--image-layer-idmap", "image_layer_idmap"},
    {"--workers-per-tenant", "workers_per_tenant"},
    {"--queue-max-per-tenant", "queue_max_per_tenant"},
    {"--max-connections", "max_connections"},
    {"--max-connections-per-client", "max_connections_per_client"},
    {"--request-head-timeout", "request_head_timeout"},
    {"--e2b-templates", "e2b_templates"},
    {"--enable-unsafe-process-driver", NULL},
};

int sbx_config_flag(struct sbx_config *c, int argc, char **argv, int i, struct sbx_error *err)
{
  const char *arg = argv[i];
  if (!strcmp(arg, "--config")) {
    if (i + 1 >= argc)
      return sbx_err_set(err, SBX_E_INVALID, 0, "--config needs a value");
    snprintf(c->config_file, sizeof c->config_file, "%s", argv[i + 1]);
    return 2;
  }
  for (size_t k = 0; k < sizeof flag_map / sizeof flag_map[0]; k++) {
    size_t fl = strlen(flag_map[k].flag);
    if (strncmp(arg, flag_map[k].flag, fl) != 0 || (arg[fl] != '\0' && arg[fl] != '='))
      continue;
    if (!flag_map[k].key) {
      c->unsafe_process_driver = true;
      return 1;
    }
    if (arg[fl] == '=')
      return set_server(c, flag_map[k].key, arg + fl + 1, err) < 0 ? -1 : 1;
    if (i + 1 >= argc)
      return sbx_err_set(err, SBX_E_INVALID, 0, "%s needs a value", flag_map[k].flag);
    return set_server(c, flag_map[k].key, argv[i + 1], err) < 0 ? -1 : 2;
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
