/* auth.c — see auth.h.  The key resolves the tenant; everything after this
 * point is scoped by r->who.tenant_id. */
#include "api/auth.h"

#include <string.h>
#include <strings.h>

#include "core/core.h"

int sbx_api_authenticate(struct sbx_req *r, bool need_admin, struct sbx_error *err)
{
  const char *h = sbx_req_header(r, "Authorization");
  const char *token = NULL;
  if (h && strncasecmp(h, "Bearer ", 7) == 0) {
    token = h + 7;
    while (*token == ' ')
      token++;
  }
  if (sbx_core_keys_verify(r->core, token, &r->who, err) < 0)
    return -1;
  if (need_admin && !r->who.admin) {
    sbx_err_set(err, SBX_E_FORBIDDEN, 0, "this route needs an admin key");
    return sbx_err_fr(err, "Cette route demande une clé d'administration");
  }
  return 0;
}
