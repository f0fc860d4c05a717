/* h_cluster.c — GET /v1/cluster/nodes (admin): the fleet's nodes as the
 * shared database has them (core/fleet.h); {"cluster": false, "items": []}
 * on a daemon that is not in a fleet. */
#include "api/handlers.h"
#include "core/fleet.h"

int sbx_h_cluster_nodes(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res;
  if (sbx_fleet_nodes_json(r->core, &res, err) < 0)
    return -1;
  sbx_resp_json(out, 200, res);
  return 0;
}
