/* metrics.c — the registry behind metrics.h and its text exposition.
 *
 * Families are fixed at compile time; a family's series are created on
 * first use, keyed by their label values, up to MAX_SERIES (label values
 * come from bounded sets — profiles, statuses, route names, HTTP codes —
 * so the cap is a guard, not a policy; past it updates are dropped and
 * counted in sandboxd_metrics_dropped_total).  One mutex guards the
 * series: an update is a short lookup and an add, far cheaper than the
 * request it describes. */
#include "common/buf.h"
#include "obs/metrics.h"
#include "obs/trace.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 512
#define MAX_BUCKETS 16
#define LABEL_MAX 80

enum ftype { COUNTER, HISTOGRAM, GAUGE }; /* a GAUGE series is set, not added to */

struct series {
  char l[2][LABEL_MAX];
  double value; /* counters */
  double sum;   /* histograms */
  uint64_t count;
  uint64_t b[MAX_BUCKETS]; /* non-cumulative; cumulated when rendered */
};

struct family {
  const char *name;
  const char *help;
  enum ftype type;
  const char *labels[2];
  int nlabels;
  const double *bounds;
  int nbounds;
  struct series *s;
  size_t n, cap;
};

/* Runs: from a trivial command (ms) to the longest timeouts (minutes). */
static const double run_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1,     2.5,  5,     10,   30,  60,   300};
/* Session creation: a pooled hand-over (ms) to a cold build (seconds). */
static const double create_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,  0.5,    1,     2.5,  5,     10};
/* HTTP: most requests are fast; execs and long-polls are not. */
/* Fleet: a placement is a view read and one row update (µs to ms). */
static const double place_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                      0.01,   0.025,   0.05,   0.1,   0.5};
static const double http_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,    0.25,  0.5,    1,     2.5,  10,    60};
#define NB(a) (int)(sizeof(a) / sizeof(a)[0])

enum {
  F_EXECS,
  F_CPU,
  F_DURATION,
  F_CREATE,
  F_HTTP,
  F_HTTP_DUR,
  F_NET,
  F_AUDIT,
  F_AUDIT_SUPP,
  F_AUDIT_FAIL,
  F_FINOPS,
  F_DROPPED,
  F_NODES,
  F_NODE_DEATHS,
  F_PLACE,
  F_PLACE_DUR,
  F_FORWARD,
  F_FORWARD_DUR,
  F_CLAIMS,
  F_QUEUE,
  F_COUNT
};

static struct family fams[F_COUNT] = {
    [F_EXECS] = {"sandbox_executions_total",
                 "Finished session execs and executions, by profile and final status.",
                 COUNTER,
                 {"profile", "status"},
                 2,
                 NULL,
                 0,
                 NULL,
                 0,
                 0},
    [F_CPU] = {"sandbox_cpu_seconds_total",
               "CPU seconds (user+sys) used by finished runs.",
               COUNTER,
               {"profile", NULL},
               1,
               NULL,
               0,
               NULL,
               0,
               0},
    [F_DURATION] = {"sandbox_duration_seconds",
                    "Wall-clock duration of finished runs.",
                    HISTOGRAM,
                    {"profile", NULL},
                    1,
                    run_bounds,
                    NB(run_bounds),
                    NULL,
                    0,
                    0},
    [F_CREATE] = {"sandbox_session_create_seconds",
                  "Time to create a session's sandbox.",
                  HISTOGRAM,
                  {"profile", NULL},
                  1,
                  create_bounds,
                  NB(create_bounds),
                  NULL,
                  0,
                  0},
    [F_HTTP] = {"sandboxd_http_requests_total",
                "HTTP requests by route name and status code.",
                COUNTER,
                {"route", "code"},
                2,
                NULL,
                0,
                NULL,
                0,
                0},
    [F_HTTP_DUR] = {"sandboxd_http_request_duration_seconds",
                    "HTTP request latency, arrival to completion, by route name.",
                    HISTOGRAM,
                    {"route", NULL},
                    1,
                    http_bounds,
                    NB(http_bounds),
                    NULL,
                    0,
                    0},
    [F_NET] = {"sandbox_network_decisions_total",
               "Network policy decisions on sandbox connections.",
               COUNTER,
               {"decision", "proto"},
               2,
               NULL,
               0,
               NULL,
               0,
               0},
    [F_AUDIT] = {"sandboxd_audit_events_total",
                 "Audit events appended to the chain.",
                 COUNTER,
                 {NULL, NULL},
                 0,
                 NULL,
                 0,
                 NULL,
                 0,
                 0},
    [F_AUDIT_SUPP] = {"sandboxd_audit_suppressed_total",
                      "Refusal events not recorded because their source exceeded its rate.",
                      COUNTER,
                      {NULL, NULL},
                      0,
                      NULL,
                      0,
                      NULL,
                      0,
                      0},
    [F_AUDIT_FAIL] = {"sandboxd_audit_failures_total",
                      "Audit events that could not be stored.",
                      COUNTER,
                      {NULL, NULL},
                      0,
                      NULL,
                      0,
                      NULL,
                      0,
                      0},
    [F_FINOPS] = {"sandboxd_finops_deliveries_total",
                  "Usage record deliveries to the FinOps endpoint, by result.",
                  COUNTER,
                  {"result", NULL},
                  1,
                  NULL,
                  0,
                  NULL,
                  0,
                  0},
    [F_NODES] = {"sandboxd_fleet_nodes",
                 "Nodes of the fleet by state (alive, not alive).",
                 GAUGE,
                 {"state", NULL},
                 1},
    [F_NODE_DEATHS] = {"sandboxd_fleet_node_deaths_total",
                       "Nodes this node declared dead (missed heartbeats).",
                       COUNTER,
                       {NULL, NULL},
                       0},
    [F_PLACE] = {"sandboxd_fleet_placements_total",
                 "Session placements made here, by where they landed (here, remote).",
                 COUNTER,
                 {"target", NULL},
                 1},
    [F_PLACE_DUR] = {"sandboxd_fleet_placement_seconds",
                     "Time to place a session: best-of-K and the reservation.",
                     HISTOGRAM,
                     {NULL, NULL},
                     0,
                     place_bounds,
                     NB(place_bounds)},
    [F_FORWARD] = {"sandboxd_fleet_forwards_total",
                   "Requests forwarded to the node that owns their object, by result.",
                   COUNTER,
                   {"result", NULL},
                   1},
    [F_FORWARD_DUR] = {"sandboxd_fleet_forward_seconds",
                       "Time from forwarding a request to its owner's response head.",
                       HISTOGRAM,
                       {NULL, NULL},
                       0,
                       http_bounds,
                       NB(http_bounds)},
    [F_CLAIMS] = {"sandboxd_fleet_claims_total",
                  "Executions this node took from the shared queue, by outcome (taken; "
                  "lease_expired: taken over from a node whose lease ran out; lost: another "
                  "node held it by the time it started).",
                  COUNTER,
                  {"outcome", NULL},
                  1},
    [F_QUEUE] = {"sandboxd_fleet_queue",
                 "The shared queue as last seen: depth (executions "
                 "queued) and oldest_age_seconds.",
                 GAUGE,
                 {"what", NULL},
                 1},
    [F_DROPPED] = {"sandboxd_metrics_dropped_total",
                   "Metric updates dropped because a family reached its series cap.",
                   COUNTER,
                   {NULL, NULL},
                   0,
                   NULL,
                   0,
                   NULL,
                   0,
                   0},
};

static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sbx_metrics_gauges gauges;
static bool have_gauges;

/* The series for label values (a, b), created if new; NULL past the cap.
 * Caller holds m_lock. */
static struct series *series_get(struct family *f, const char *a, const char *b)
{
  const char *v[2] = {a ? a : "", b ? b : ""};
  for (size_t i = 0; i < f->n; i++) {
    struct series *s = &f->s[i];
    if ((f->nlabels < 1 || strcmp(s->l[0], v[0]) == 0) &&
        (f->nlabels < 2 || strcmp(s->l[1], v[1]) == 0))
      return s;
  }
  if (sbx_array_grow(&f->s, &f->cap, f->n + 1, sizeof *f->s, MAX_SERIES) < 0)
    return NULL;
  struct series *s = &f->s[f->n++];
  memset(s, 0, sizeof *s);
  for (int i = 0; i < f->nlabels; i++)
    snprintf(s->l[i], sizeof s->l[i], "%s", v[i]);
  return s;
}

static void dropped_locked(void)
{
  struct series *d = series_get(&fams[F_DROPPED], NULL, NULL);
  if (d)
    d->value++;
}

static void counter_add(int fam, const char *a, const char *b, double by)
{
  pthread_mutex_lock(&m_lock);
  struct series *s = series_get(&fams[fam], a, b);
  if (s)
    s->value += by;
  else
    dropped_locked();
  pthread_mutex_unlock(&m_lock);
}

static void observe(int fam, const char *a, double v)
{
  struct family *f = &fams[fam];
  pthread_mutex_lock(&m_lock);
  struct series *s = series_get(f, a, NULL);
  if (s) {
    int i = 0;
    while (i < f->nbounds && v > f->bounds[i])
      i++;
    if (i < f->nbounds)
      s->b[i]++;
    s->sum += v;
    s->count++;
  } else {
    dropped_locked();
  }
  pthread_mutex_unlock(&m_lock);
}

void sbx_metrics_execution(const char *profile, const char *status, double cpu_seconds,
                           double duration_seconds)
{
  counter_add(F_EXECS, profile, status, 1);
  counter_add(F_CPU, profile, NULL, cpu_seconds > 0 ? cpu_seconds : 0);
  observe(F_DURATION, profile, duration_seconds);
}

void sbx_metrics_session_create(const char *profile, double seconds)
{
  observe(F_CREATE, profile, seconds);
}

void sbx_metrics_http(const char *route, int code, double seconds)
{
  char c[16];
  snprintf(c, sizeof c, "%d", code);
  counter_add(F_HTTP, route, c, 1);
  observe(F_HTTP_DUR, route, seconds);
}

void sbx_metrics_network_decision(const char *decision, const char *proto)
{
  counter_add(F_NET, decision, proto, 1);
}
void sbx_metrics_audit_event(const char *action)
{
  (void)action; /* one series: actions are many, the chain has the detail */
  counter_add(F_AUDIT, NULL, NULL, 1);
}
static void gauge_set(int fam, const char *a, double v)
{
  pthread_mutex_lock(&m_lock);
  struct series *s = series_get(&fams[fam], a, NULL);
  if (s)
    s->value = v;
  else
    dropped_locked();
  pthread_mutex_unlock(&m_lock);
}
void sbx_metrics_fleet_nodes(unsigned alive, unsigned not_alive)
{
  gauge_set(F_NODES, "alive", alive);
  gauge_set(F_NODES, "not_alive", not_alive);
}
void sbx_metrics_fleet_node_dead(void) { counter_add(F_NODE_DEATHS, NULL, NULL, 1); }
void sbx_metrics_fleet_placement(bool here, double seconds)
{
  counter_add(F_PLACE, here ? "here" : "remote", NULL, 1);
  observe(F_PLACE_DUR, NULL, seconds);
}
void sbx_metrics_fleet_forward(const char *result, double seconds)
{
  counter_add(F_FORWARD, result, NULL, 1);
  if (seconds >= 0)
    observe(F_FORWARD_DUR, NULL, seconds);
}
void sbx_metrics_fleet_claim(const char *outcome) { counter_add(F_CLAIMS, outcome, NULL, 1); }
void sbx_metrics_fleet_queue(double depth, double oldest_age_s)
{
  gauge_set(F_QUEUE, "depth", depth);
  gauge_set(F_QUEUE, "oldest_age_seconds", oldest_age_s);
}
void sbx_metrics_audit_suppressed(void) { counter_add(F_AUDIT_SUPP, NULL, NULL, 1); }
void sbx_metrics_audit_failure(void) { counter_add(F_AUDIT_FAIL, NULL, NULL, 1); }
void sbx_metrics_finops(bool delivered)
{
  counter_add(F_FINOPS, delivered ? "delivered" : "failed", NULL, 1);
}

void sbx_metrics_set_gauges(const struct sbx_metrics_gauges *g)
{
  pthread_mutex_lock(&g_lock);
  have_gauges = g != NULL;
  if (g)
    gauges = *g;
  else
    memset(&gauges, 0, sizeof gauges);
  pthread_mutex_unlock(&g_lock);
}

/* ---- exposition ---- */

static void put_label_value(FILE *f, const char *v)
{
  for (; *v; v++) {
    if (*v == '\\' || *v == '"')
      fprintf(f, "\\%c", *v);
    else if (*v == '\n')
      fputs("\\n", f);
    else
      fputc(*v, f);
  }
}

/* {a="x",b="y"[,le="…"]} or nothing. */
static void put_labels(FILE *f, const struct family *fam, const struct series *s, const char *le)
{
  if (fam->nlabels == 0 && !le)
    return;
  fputc('{', f);
  for (int i = 0; i < fam->nlabels; i++) {
    fprintf(f, "%s%s=\"", i ? "," : "", fam->labels[i]);
    put_label_value(f, s->l[i]);
    fputc('"', f);
  }
  if (le)
    fprintf(f, "%sle=\"%s\"", fam->nlabels ? "," : "", le);
  fputc('}', f);
}

static void put_histogram(FILE *f, const struct family *fam, const struct series *s)
{
  uint64_t cum = 0;
  char le[32];
  for (int i = 0; i < fam->nbounds; i++) {
    cum += s->b[i];
    snprintf(le, sizeof le, "%g", fam->bounds[i]);
    fprintf(f, "%s_bucket", fam->name);
    put_labels(f, fam, s, le);
    fprintf(f, " %llu\n", (unsigned long long)cum);
  }
  fprintf(f, "%s_bucket", fam->name);
  put_labels(f, fam, s, "+Inf");
  fprintf(f, " %llu\n%s_sum", (unsigned long long)s->count, fam->name);
  put_labels(f, fam, s, NULL);
  fprintf(f, " %.15g\n%s_count", s->sum, fam->name);
  put_labels(f, fam, s, NULL);
  fprintf(f, " %llu\n", (unsigned long long)s->count);
}

static void put_family(FILE *f, const struct family *fam)
{
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name,
          fam->type == COUNTER ? "counter"
          : fam->type == GAUGE ? "gauge"
                               : "histogram");
  if (fam->nlabels == 0 && fam->n == 0)
    fprintf(f, "%s 0\n", fam->name); /* a plain counter exists from the start */
  for (size_t i = 0; i < fam->n; i++) {
    const struct series *s = &fam->s[i];
    if (fam->type == HISTOGRAM) {
      put_histogram(f, fam, s);
      continue;
    }
    fputs(fam->name, f);
    put_labels(f, fam, s, NULL);
    fprintf(f, " %.15g\n", s->value);
  }
}

struct gauge_out {
  FILE *f;
  const char *name;
};

static void emit_gauge(void *ectx, const char *profile, double value)
{
  struct gauge_out *g = ectx;
  fprintf(g->f, "%s{profile=\"", g->name);
  put_label_value(g->f, profile ? profile : "");
  fprintf(g->f, "\"} %.15g\n", value);
}

static void put_gauges(FILE *f)
{
  struct gauge_out go = {.f = f};
  pthread_mutex_lock(&g_lock);
  fputs("# HELP sandbox_sessions_active Sessions whose sandbox is alive, by profile.\n"
        "# TYPE sandbox_sessions_active gauge\n",
        f);
  go.name = "sandbox_sessions_active";
  if (have_gauges && gauges.sessions_active)
    gauges.sessions_active(gauges.ctx, emit_gauge, &go);
  fputs("# HELP sandbox_pool_idle Warm sandboxes ready to hand over, by profile.\n"
        "# TYPE sandbox_pool_idle gauge\n",
        f);
  go.name = "sandbox_pool_idle";
  if (have_gauges && gauges.pool_idle)
    gauges.pool_idle(gauges.ctx, emit_gauge, &go);
  pthread_mutex_unlock(&g_lock);
}

/* Series every scrape should show even before their first event. */
static void seed_locked(void)
{
  /* Every decision/proto pair the net module can report */
  static const char *const protos[] = {"dns", "http", "tls", "tcp", "udp", NULL};
  for (const char *const *p = protos; *p; p++) {
    series_get(&fams[F_NET], "allow", *p);
    series_get(&fams[F_NET], "deny", *p);
  }
  series_get(&fams[F_FINOPS], "delivered", NULL);
  series_get(&fams[F_FINOPS], "failed", NULL);
}

char *sbx_metrics_render(size_t *len)
{
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f)
    return NULL;
  pthread_mutex_lock(&m_lock);
  seed_locked();
  for (int i = 0; i < F_COUNT; i++)
    put_family(f, &fams[i]);
  pthread_mutex_unlock(&m_lock);
  put_gauges(f); /* outside m_lock: the callbacks take the owner's locks */
  /* The span exporter keeps its own counters (obs/trace.c). */
  fprintf(f,
          "# HELP sandboxd_trace_spans_total Spans handed to the OTLP exporter, by result.\n"
          "# TYPE sandboxd_trace_spans_total counter\n"
          "sandboxd_trace_spans_total{result=\"exported\"} %llu\n"
          "sandboxd_trace_spans_total{result=\"dropped_queue_full\"} %llu\n"
          "sandboxd_trace_spans_total{result=\"export_failed\"} %llu\n",
          (unsigned long long)sbx_trace_exported(), (unsigned long long)sbx_trace_dropped(),
          (unsigned long long)sbx_trace_export_failed());
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}
