/* fleet.h — this daemon as one node of a fleet: daemons on several hosts
 * sharing one PostgreSQL database (docs/fleet.md).
 *
 * The database is the only shared state.  Each node registers a row,
 * heartbeats it every second with its load and what it offers, and
 * deregisters on a clean stop; any node declares dead the nodes silent for
 * dead_after (one at a time, store.h node_reap).  Sessions are placed on a
 * node by best-of-K over the live nodes that offer the profile, with the
 * place reserved atomically on the node's row; their requests are then
 * forwarded to that node by the API (api/forward.c).  Executions go on
 * the shared queue: each node's workers take the next one with a lease its
 * heartbeat renews.
 *
 * Not in a fleet (no --cluster), every function here answers "this node"
 * and costs nothing. */
#ifndef SBX_CORE_FLEET_H
#define SBX_CORE_FLEET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "core/principal.h"

struct sbx_core;

#define SBX_FLEET_URL_MAX 256
#define SBX_FLEET_ID_MAX 64

/* Where a request about one object goes. */
struct sbx_fleet_target {
  char node[SBX_FLEET_ID_MAX];
  char url[SBX_FLEET_URL_MAX]; /* the node's advertised base URL */
};

bool sbx_fleet_on(struct sbx_core *core);
/* False on an API node of a fleet (no slots): it takes no execution from
 * the shared queue and no session is placed on it. */
bool sbx_fleet_runs_work(struct sbx_core *core);
/* This node's id ("" when not in a fleet). */
const char *sbx_fleet_node_id(struct sbx_core *core);

/* Whether a session's requests belong to another live node: 1 (target
 * filled), 0 handle here (ours, unknown, ended, or its node is dead: the
 * local handler answers with the stored status), -1 err (store down). */
int sbx_fleet_session_elsewhere(struct sbx_core *core, const struct sbx_principal *who,
                                const char *id, struct sbx_fleet_target *to,
                                struct sbx_error *err);
/* The same for an execution running on another live node (its cancel). */
int sbx_fleet_execution_elsewhere(struct sbx_core *core, const struct sbx_principal *who,
                                  const char *id, struct sbx_fleet_target *to,
                                  struct sbx_error *err);

/* A session create's placement: best-of-K on the load score among live
 * nodes offering profile, this node preferred when among the best; one
 * place reserved on the chosen node (released by the session's end on its
 * node, or by sbx_fleet_unplace when the create fails before reaching
 * it).  decision (new reference): {node, score, k, candidates:[{node,
 * score}], micros}.  SBX_E_RUNTIME_UNAVAILABLE when no live node offers it. */
struct sbx_fleet_placement {
  struct sbx_fleet_target to;
  bool here;
  json_t *decision;
};
int sbx_fleet_place(struct sbx_core *core, const char *profile, struct sbx_fleet_placement *out,
                    struct sbx_error *err);
void sbx_fleet_unplace(struct sbx_core *core, const char *node);
void sbx_fleet_placement_free(struct sbx_fleet_placement *p);

/* Counts one forward (api/forward.c) in the metrics: result ok,
 * unreachable or refused; seconds < 0 when not timed. */
void sbx_fleet_count_forward(const char *result, double seconds);

/* The traceparent of the thread's current span (the request being
 * forwarded), so the owner's spans continue its trace: false if none. */
bool sbx_fleet_traceparent(char out[64]);

/* GET /v1/cluster/nodes: every node ever registered, with its state,
 * load, capacity and profiles (new reference). */
int sbx_fleet_nodes_json(struct sbx_core *core, json_t **out, struct sbx_error *err);
/* Live nodes (at least 1: this one), for splitting fleet-wide rates. */
unsigned sbx_fleet_alive(struct sbx_core *core);

#endif
