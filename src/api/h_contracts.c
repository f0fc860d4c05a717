/* h_contracts.c — /v1/contracts: the JSON Schema contracts by name, and a
 * document validated against one with every violation listed
 * (docs/contracts.md).  Any tenant's key; nothing is stored. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/envelope.h"
#include "api/handlers.h"
#include "core/core.h"

int sbx_h_contract_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)r;
  (void)err;
  sbx_resp_json(out, 200, json_pack("{s:o}", "contracts", sbx_core_contract_names()));
  return 0;
}

int sbx_h_contract_get(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  const char *text;
  size_t len;
  if (sbx_core_contract_get(r->params[0], &text, &len, err) < 0)
    return -1;
  char *copy = malloc(len);
  if (!copy)
    return sbx_err_sys(err, ENOMEM, "contract %s", r->params[0]);
  memcpy(copy, text, len);
  sbx_resp_bytes(out, 200, copy, len, "application/schema+json");
  return 0;
}

int sbx_h_contract_validate(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *result = sbx_core_contract_validate(r->core, r->params[0], r->body ? r->body : "",
                                              r->body_len, err);
  if (!result)
    return -1;
  sbx_envelope_localise(json_object_get(result, "violations"), r->lang);
  sbx_resp_json(out, 200, result);
  return 0;
}
