/* quota_config.c — the quota settings: parsing [server] and [tenant.NAME]
 * keys, and resolving the limits that apply to one tenant.  See quota.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantity.h"
#include "core/quota.h"

void sbx_quota_config_defaults(struct sbx_quota_config *c)
{
  memset(&c->res, 0, sizeof c->res);
  memset(&c->defaults, 0, sizeof c->defaults);
  c->ntenants = 0;
}

static struct sbx_quota_limits *tenant_limits(struct sbx_quota_config *c, const char *name)
{
  for (size_t i = 0; i < c->ntenants; i++)
    if (strcmp(c->tenants[i].name, name) == 0)
      return &c->tenants[i].lim;
  if (strlen(name) >= sizeof c->tenants[0].name || c->ntenants == SBX_QUOTA_MAX_TENANTS)
    return NULL;
  struct sbx_quota_tenant *t = &c->tenants[c->ntenants++];
  snprintf(t->name, sizeof t->name, "%s", name);
  memset(&t->lim, 0, sizeof t->lim);
  return &t->lim;
}

static int parse_num(const char *v, double max, bool whole, double *out)
{
  char *end;
  double d = strtod(v, &end);
  if (!*v || *end || !isfinite(d) || d < 0 || d > max || (whole && d != floor(d)))
    return -1;
  *out = d;
  return 0;
}

/* The [server] resource settings (struct sbx_res_config): 1 handled, 0 not
 * one of them, -1 bad value. */
static int res_config_set(struct sbx_res_config *r, const char *key, const char *value,
                          struct sbx_error *err)
{
  bool bytes = false;
  uint64_t *u64 = NULL;
  unsigned *u = NULL;
  if (strcmp(key, "output_memory") == 0)
    u64 = &r->output_memory, bytes = true;
  else if (strcmp(key, "output_memory_per_tenant") == 0)
    u64 = &r->output_memory_per_tenant, bytes = true;
  else if (strcmp(key, "fds_per_session") == 0)
    u = &r->fds_per_session;
  else if (strcmp(key, "fds_per_tenant") == 0)
    u = &r->fds_per_tenant;
  else
    return 0;
  uint64_t n = 0;
  double d = 0;
  bool ok = bytes ? sbx_parse_bytes(value, &n) == 0 && n <= (1ULL << 50)
                  : parse_num(value, 1 << 24, true, &d) == 0;
  if (!ok)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s: %s (0 = the default), got '%s'", key,
                       bytes ? "a size like 64Mi" : "a whole number", value);
  if (u64)
    *u64 = n;
  else if (u)
    *u = (unsigned)d;
  return 1;
}

/* "a, b,c" → "a,b,c": names of letters, digits, '-', '_' and '.'. */
static int profiles_set(struct sbx_quota_limits *l, const char *what, const char *value,
                        struct sbx_error *err)
{
  char out[SBX_QUOTA_PROFILES_MAX];
  size_t n = 0;
  bool name_started = false;
  for (const char *p = value; *p; p++) {
    char ch = *p;
    if (ch == ' ' || ch == '\t')
      continue;
    bool ok = ch == ',' ? name_started
                        : (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                              (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    if (!ok || n + 1 >= sizeof out)
      return sbx_err_set(err, SBX_E_INVALID, 0,
                         "%s: profile names separated by commas (at most %d bytes), got '%s'",
                         what, SBX_QUOTA_PROFILES_MAX - 1, value);
    name_started = ch != ',';
    out[n++] = ch;
  }
  if (n && out[n - 1] == ',')
    n--;
  out[n] = '\0';
  memcpy(l->profiles, out, n + 1);
  l->set |= SBX_QUOTA_SET_PROFILES;
  return 1;
}

int sbx_quota_config_set(struct sbx_quota_config *c, const char *tenant, const char *key,
                         const char *value, struct sbx_error *err)
{
  int r = tenant ? 0 : res_config_set(&c->res, key, value, err);
  if (r != 0)
    return r;
  if (strcmp(key, "allowed_profiles") == 0 || (tenant && strcmp(key, "profiles") == 0)) {
    struct sbx_quota_limits *l = tenant ? tenant_limits(c, tenant) : &c->defaults;
    if (!l)
      return sbx_err_set(err, SBX_E_INVALID, 0, "[tenant.%s]: too many tenant sections", tenant);
    return profiles_set(l, key, value, err);
  }
  static const struct {
    const char *key, *alias;
    bool whole;
    double max;
  } keys[] = {
      {"quota_sessions", "sessions", true, 1e9},
      {"quota_executions", "executions", true, 1e9},
      {"quota_cpu_seconds_per_day", "cpu_seconds_per_day", false, 1e12},
      {"rate_limit_rps", "rps", false, 1e9},
      {"rate_limit_burst", "burst", false, 1e9},
  };
  size_t k = 0;
  for (; k < sizeof keys / sizeof keys[0]; k++)
    if (strcmp(key, keys[k].key) == 0 || (tenant && strcmp(key, keys[k].alias) == 0))
      break;
  if (k == sizeof keys / sizeof keys[0])
    return 0;
  double d;
  if (parse_num(value, keys[k].max, keys[k].whole, &d) < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s%s%s%s: %s (0 = unlimited), got '%s'",
                       tenant ? "[tenant." : "", tenant ? tenant : "", tenant ? "] " : "", key,
                       keys[k].whole ? "a whole number >= 0" : "a number >= 0", value);
  struct sbx_quota_limits *l = tenant ? tenant_limits(c, tenant) : &c->defaults;
  if (!l)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "[tenant.%s]: name too long (127 bytes) or too "
                       "many tenant sections (%d at most)",
                       tenant, SBX_QUOTA_MAX_TENANTS);
  switch (k) {
  case 0:
    l->sessions = (int64_t)d;
    break;
  case 1:
    l->executions = (int64_t)d;
    break;
  case 2:
    l->cpu_seconds_per_day = d;
    break;
  case 3:
    l->rps = d;
    break;
  default:
    l->burst = d;
    break;
  }
  l->set |= 1u << k; /* the SBX_QUOTA_SET_* bits follow keys[] */
  return 1;
}

static void overlay(struct sbx_quota_limits *to, const struct sbx_quota_limits *from)
{
  if (from->set & SBX_QUOTA_SET_SESSIONS)
    to->sessions = from->sessions;
  if (from->set & SBX_QUOTA_SET_EXECUTIONS)
    to->executions = from->executions;
  if (from->set & SBX_QUOTA_SET_CPU)
    to->cpu_seconds_per_day = from->cpu_seconds_per_day;
  if (from->set & SBX_QUOTA_SET_RPS)
    to->rps = from->rps;
  if (from->set & SBX_QUOTA_SET_BURST)
    to->burst = from->burst;
  if (from->set & SBX_QUOTA_SET_PROFILES)
    memcpy(to->profiles, from->profiles, sizeof to->profiles);
  to->set |= from->set;
}

struct sbx_quota_limits sbx_quota_config_resolve(const struct sbx_quota_config *c,
                                                 const char *tenant, int64_t legacy_sessions)
{
  /* Built-ins: only the session count is bounded (the historical
   * max_sessions_per_tenant); the rest is off until an operator sets it. */
  struct sbx_quota_limits l = {.sessions = legacy_sessions > 0 ? legacy_sessions : 0};
  overlay(&l, &c->defaults);
  for (size_t i = 0; tenant && i < c->ntenants; i++)
    if (strcmp(c->tenants[i].name, tenant) == 0)
      overlay(&l, &c->tenants[i].lim);
  if (l.burst < 1) /* unset (or 0): one second's worth, at least one request */
    l.burst = l.rps > 1 ? ceil(l.rps) : 1;
  return l;
}
