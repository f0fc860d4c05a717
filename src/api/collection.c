/* collection.c — see collection.h. */
#include "api/collection.h"

#include <stdio.h>

#include "api/pagination.h"

int sbx_api_create(const struct sbx_api_collection *c, struct sbx_req *r, struct sbx_resp *out,
                   struct sbx_error *err)
{
  json_t *body = sbx_req_json(r, c->empty_body, err), *res = NULL;
  if (!body)
    return -1;
  int rc = c->create(r->core, &r->who, body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  snprintf(out->location, sizeof out->location, "%s/%s", c->path,
           json_string_value(json_object_get(res, "id")));
  sbx_resp_json(out, c->created, res);
  return 0;
}

int sbx_api_list(const struct sbx_api_collection *c, struct sbx_req *r, struct sbx_resp *out,
                 struct sbx_error *err)
{
  int limit;
  const char *cursor;
  json_t *res;
  if (sbx_api_page(r, &limit, &cursor, err) < 0 ||
      c->list(r->core, &r->who, sbx_req_query(r, "status"), cursor, limit, &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
