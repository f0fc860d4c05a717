/* auth.h — Authorization: Bearer <key> → the request's principal. */
#ifndef SBX_API_AUTH_H
#define SBX_API_AUTH_H

#include <stdbool.h>

#include "api/http.h"

int sbx_api_authenticate(struct sbx_req *r, bool need_admin, struct sbx_error *err);

#endif
