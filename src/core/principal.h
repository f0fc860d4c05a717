/* principal.h — who calls core: the tenant an API key belongs to, the key
 * and whether it is an admin key.  Core decides every operation by it; the
 * API only fills it in (api/auth.c) and hands it down. */
#ifndef SBX_CORE_PRINCIPAL_H
#define SBX_CORE_PRINCIPAL_H

#include <stdbool.h>
#include <stdint.h>

struct sbx_principal {
  int64_t tenant_id;
  char tenant[128];
  char key_id[40];
  bool admin;
};

#endif
