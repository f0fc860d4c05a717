/* collection.h — the one path of the two top-level collections,
 * /v1/sandbox/sessions and /v1/sandbox/executions: create from a JSON
 * body, answered with the new resource and its Location, and list in
 * pages (?limit, ?cursor, ?status).  The handler only names its core
 * operations. */
#ifndef SBX_API_COLLECTION_H
#define SBX_API_COLLECTION_H

#include <stdbool.h>

#include "api/http.h"

struct sbx_api_collection {
  const char *path; /* Location of a new resource: path/<id> */
  bool empty_body;  /* create accepts an empty body (all defaults) */
  int created;      /* create's status: 201, or 202 while work is pending */
  /* body borrowed; *out a new reference on success (core/core.h). */
  int (*create)(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                json_t **out, struct sbx_error *err);
  int (*list)(struct sbx_core *core, const struct sbx_principal *who, const char *status,
              const char *cursor, int limit, json_t **out, struct sbx_error *err);
};

int sbx_api_create(const struct sbx_api_collection *c, struct sbx_req *r, struct sbx_resp *out,
                   struct sbx_error *err);
int sbx_api_list(const struct sbx_api_collection *c, struct sbx_req *r, struct sbx_resp *out,
                 struct sbx_error *err);

#endif
