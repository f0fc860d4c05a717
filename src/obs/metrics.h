/* metrics.h — the daemon's Prometheus metrics (DESIGN §7, docs/metrics.md):
 * a process-wide registry of counters and histograms with bounded label
 * sets (profiles, statuses, route names from the route table, HTTP codes),
 * gauges read at scrape time from the state's owner through callbacks (so
 * obs never links the core or the isolation layer), and the text
 * exposition format 0.0.4.  Every function is thread-safe. */
#ifndef SBX_OBS_METRICS_H
#define SBX_OBS_METRICS_H

#include <stdbool.h>
#include <stddef.h>

/* One finished exec or execution: sandbox_executions_total{profile,status},
 * sandbox_cpu_seconds_total{profile}, sandbox_duration_seconds{profile}. */
void sbx_metrics_execution(const char *profile, const char *status, double cpu_seconds,
                           double duration_seconds);
/* A session created (sandbox_session_create_seconds{profile}). */
void sbx_metrics_session_create(const char *profile, double seconds);
/* One HTTP request: route is the route table's name ("unmatched" if none). */
void sbx_metrics_http(const char *route, int code, double seconds);
/* A network policy decision: "allow" or "deny". */
void sbx_metrics_network_decision(const char *decision, const char *proto);
/* Audit and FinOps bookkeeping. */
void sbx_metrics_audit_event(const char *action);
void sbx_metrics_audit_suppressed(void);
void sbx_metrics_audit_failure(void);
void sbx_metrics_finops(bool delivered);
/* The fleet (core/fleet.c, api/forward.c). */
void sbx_metrics_fleet_nodes(unsigned alive, unsigned not_alive);
void sbx_metrics_fleet_node_dead(void);
void sbx_metrics_fleet_placement(bool here, double seconds);
/* result: ok, unreachable, refused; seconds < 0: not timed. */
void sbx_metrics_fleet_forward(const char *result, double seconds);
void sbx_metrics_fleet_claim(const char *outcome); /* taken, lease_expired, lost */
void sbx_metrics_fleet_queue(double depth, double oldest_age_s);

/* Gauges by profile, read at scrape time.  emit(ectx, profile, value) once
 * per profile.  The callbacks run under the registry's gauge lock: they
 * must not call sbx_metrics_set_gauges. */
typedef void (*sbx_metrics_emit_fn)(void *ectx, const char *profile, double value);
struct sbx_metrics_gauges {
  void (*sessions_active)(void *ctx, sbx_metrics_emit_fn emit, void *ectx);
  void (*pool_idle)(void *ctx, sbx_metrics_emit_fn emit, void *ectx);
  void *ctx;
};
/* Installs the gauge source (NULL removes it; returns once no scrape uses
 * the old one). */
void sbx_metrics_set_gauges(const struct sbx_metrics_gauges *g);

/* The exposition text (malloc'd) and its length. */
char *sbx_metrics_render(size_t *len);

#endif
