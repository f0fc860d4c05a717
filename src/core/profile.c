/* profile.c — see profile.h. */
#include "core/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantity.h"

void sbx_profile_defaults(struct sbx_profile *p, const char *name, const char *driver)
{
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  snprintf(p->driver_name, sizeof p->driver_name, "%s", driver);
  snprintf(p->image, sizeof p->image, "host");
  p->limits.cpu_millis = 1000;
  p->limits.memory_bytes = 512ULL << 20;
  p->limits.disk_bytes = 256ULL << 20;
  p->limits.pids = 256;
  p->limits.timeout_s = 3600;
  p->limits.output_bytes = 1ULL << 20;
  p->default_timeout_s = 30;
  p->pool_size = 2;
}

static void add_builtins(struct sbx_profile *out, size_t *n)
{
  sbx_profile_defaults(&out[(*n)++], "container", "container");
  sbx_profile_defaults(&out[(*n)++], "gvisor", "gvisor");
  struct sbx_profile *small = &out[(*n)++];
  sbx_profile_defaults(small, "gvisor-small", "gvisor");
  small->limits.cpu_millis = 500;
  small->limits.memory_bytes = 256ULL << 20;
  sbx_profile_defaults(&out[(*n)++], "process", "process");
  out[*n - 1].pool_size = 0;
}

int sbx_profiles_build(const struct sbx_profile *extra, size_t nextra, const char *default_name,
                       struct sbx_profile_set *out, struct sbx_error *err)
{
  memset(out, 0, sizeof *out);
  out->items = calloc(4 + nextra, sizeof *out->items);
  if (!out->items)
    return sbx_err_sys(err, ENOMEM, "profiles");
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
    out->items[i].driver = sbx_driver_find(out->items[i].driver_name);
    if (!out->items[i].driver) {
      free(out->items);
      out->items = NULL;
      return sbx_err_set(err, SBX_E_INVALID, 0, "profile %s: unknown driver '%s'",
                         out->items[i].name, out->items[i].driver_name);
    }
  }
  if (!sbx_profile_find(out, NULL, NULL)) {
    sbx_err_set(err, SBX_E_INVALID, 0, "default profile '%s' is not defined", out->default_name);
    sbx_profiles_free(out);
    return -1;
  }
  return 0;
}

void sbx_profiles_probe(struct sbx_profile_set *set, const struct sbx_driver_env *env)
{
  for (size_t i = 0; i < set->count; i++) {
    struct sbx_profile *p = &set->items[i];
    size_t j = 0; /* reuse an earlier probe of the same driver */
    while (j < i && set->items[j].driver != p->driver)
      j++;
    if (j < i) {
      p->available = set->items[j].available;
      memcpy(p->reason, set->items[j].reason, sizeof p->reason);
      continue;
    }
    p->reason[0] = '\0';
    p->available = p->driver->probe(env, p->reason, sizeof p->reason) == 0;
  }
}

void sbx_profiles_free(struct sbx_profile_set *set)
{
  free(set->items);
  set->items = NULL;
  set->count = 0;
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

json_t *sbx_profile_json(const struct sbx_profile *p, bool is_default)
{
  json_t *caps = json_array();
  for (uint32_t bit = 1; bit; bit <<= 1) /* every bit the driver has a name for */
    if (p->driver && (p->driver->caps & bit) && sbx_cap_name(bit))
      json_array_append_new(caps, json_string(sbx_cap_name(bit)));
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:o, s:o, s:I, s:I, s:b}", "name", p->name,
                        "driver", p->driver_name, "class", p->driver ? p->driver->klass : "",
                        "image", p->image, "available", p->available, "capabilities", caps,
                        "limits", sbx_limits_json(&p->limits), "default_timeout_s",
                        (json_int_t)p->default_timeout_s, "pool_size", (json_int_t)p->pool_size,
                        "default", is_default);
  json_object_set_new(o, "reason", p->available ? json_null() : json_string(p->reason));
  const char *desc = p->driver && p->driver->describe ? p->driver->describe() : NULL;
  if (desc && *desc)
    json_object_set_new(o, "platform", json_string(desc));
  return o;
}
