/* h_platform.c — /healthz, /readyz and /v1/sandbox/profiles.  /healthz
 * never waits on drivers (their probes run in the background); /readyz
 * and the profiles list say which profiles are still probing. */
#include <string.h>

#include "api/handlers.h"
#include "core/core.h"

int sbx_h_healthz(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)r;
  (void)err;
  sbx_resp_json(out, 200, json_pack("{s:s}", "status", "ok"));
  return 0;
}

int sbx_h_readyz(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)err;
  bool ready;
  json_t *body = sbx_core_readiness(r->core, &ready);
  sbx_resp_json(out, ready ? 200 : 503, body);
  return 0;
}

int sbx_h_profiles(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)err;
  const struct sbx_profile_set *set = sbx_core_profiles(r->core);
  json_t *arr = json_array();
  for (size_t i = 0; i < set->count; i++)
    json_array_append_new(arr,
                          sbx_profile_json(set, &set->items[i],
                                           strcmp(set->items[i].name, set->default_name) == 0));
  sbx_resp_json(out, 200,
                json_pack("{s:o, s:s}", "profiles", arr, "default", set->default_name));
  return 0;
}
