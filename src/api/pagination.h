/* pagination.h — ?limit= and ?cursor= for list routes. */
#ifndef SBX_API_PAGINATION_H
#define SBX_API_PAGINATION_H

#include "api/http.h"

/* limit: 1..200, default 50.  Returns -1 with err on a bad value. */
int sbx_api_page(struct sbx_req *r, int *limit, const char **cursor, struct sbx_error *err);

#endif
