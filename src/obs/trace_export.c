/* trace_export.c — the OTLP/HTTP JSON exporter: a bounded queue of ended
 * spans, one background thread that sends them in batches with libcurl,
 * short timeouts and a couple of retries.  Requests only ever take the
 * queue's lock for an O(1) push; when the queue is full the span is dropped
 * and counted, so a dead or slow collector never slows the API. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "obs/trace_int.h"

#define STOP_BUDGET_MS 2000 /* what shutdown may spend flushing */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;      /* spans queued past a batch, or stopping */
  pthread_cond_t stop_cond; /* stopping (ends a retry's backoff) */
  struct sbx_span **ring;
  size_t cap, head, len;
  bool running, stopping;
  uint64_t stop_deadline_ms;
  pthread_t thread;
  char url[2048];
  char service[128];
  json_t *resource_extra; /* OTEL_RESOURCE_ATTRIBUTES as [key, value] pairs */
  char instance[64];      /* service.instance.id: the fleet node's id ("" alone) */
  struct curl_slist *headers;
  unsigned batch_max, delay_ms, timeout_ms, retries;
} ex = {.lock = PTHREAD_MUTEX_INITIALIZER,
        .cond = PTHREAD_COND_INITIALIZER,
        .stop_cond = PTHREAD_COND_INITIALIZER};

static atomic_bool exporting;
static atomic_ullong n_dropped, n_failed, n_exported;

bool sbx_trace_exporting(void) { return atomic_load(&exporting); }
uint64_t sbx_trace_dropped(void) { return atomic_load(&n_dropped); }
uint64_t sbx_trace_export_failed(void) { return atomic_load(&n_failed); }
uint64_t sbx_trace_exported(void) { return atomic_load(&n_exported); }

void sbx_trace_export_span(struct sbx_span *s)
{
  pthread_mutex_lock(&ex.lock);
  if (!ex.running || ex.stopping) {
    pthread_mutex_unlock(&ex.lock);
    sbx_span_free(s);
    return;
  }
  if (ex.len == ex.cap) {
    pthread_mutex_unlock(&ex.lock);
    atomic_fetch_add(&n_dropped, 1);
    sbx_span_free(s);
    return;
  }
  ex.ring[(ex.head + ex.len) % ex.cap] = s;
  if (++ex.len >= ex.batch_max)
    pthread_cond_signal(&ex.cond);
  pthread_mutex_unlock(&ex.lock);
}

/* ---- OTLP JSON ---- */

static json_t *kv_str(const char *key, const char *v)
{
  return json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue", v);
}

static json_t *attrs_json(const struct sbx_span *s)
{
  json_t *a = json_array();
  for (int i = 0; i < s->nattrs; i++) {
    const struct sbx_span_attr *at = &s->attrs[i];
    json_t *kv;
    if (at->is_int) { /* proto3 JSON: int64 as a decimal string */
      char n[24];
      snprintf(n, sizeof n, "%lld", (long long)at->i);
      kv = json_pack("{s:s, s:{s:s}}", "key", at->key, "value", "intValue", n);
    } else {
      kv = kv_str(at->key, at->s ? at->s : "");
    }
    if (kv) /* NULL only for invalid UTF-8 in a value: leave it out */
      json_array_append_new(a, kv);
  }
  return a;
}

static json_t *span_json(const struct sbx_span *s)
{
  char tid[33], sid[17], pid[17], t0[24], t1[24];
  sbx_hex(s->ctx.trace_id, 16, tid);
  sbx_hex(s->ctx.span_id, 8, sid);
  snprintf(t0, sizeof t0, "%llu", (unsigned long long)s->start_ns);
  snprintf(t1, sizeof t1, "%llu", (unsigned long long)s->end_ns);
  json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o}", "traceId", tid, "spanId", sid,
                        "name", s->name, "kind", (int)s->kind, "startTimeUnixNano", t0,
                        "endTimeUnixNano", t1, "attributes", attrs_json(s));
  if (!o)
    return NULL;
  if (s->has_parent) {
    sbx_hex(s->parent_id, 8, pid);
    json_object_set_new(o, "parentSpanId", json_string(pid));
  }
  if (s->status_code) {
    json_t *st = json_pack("{s:i}", "code", s->status_code);
    json_t *msg = s->status_msg ? json_string(s->status_msg) : NULL; /* NULL if not UTF-8 */
    if (msg)
      json_object_set_new(st, "message", msg);
    json_object_set_new(o, "status", st);
  }
  return o;
}

json_t *sbx_trace_otlp_json(struct sbx_span *const *spans, size_t n, const char *service)
{
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *j = span_json(spans[i]);
    if (j)
      json_array_append_new(arr, j);
  }
  json_t *rattrs = json_array();
  json_array_append_new(rattrs, kv_str("service.name", service));
  if (ex.instance[0]) /* the fleet node: every span says where it ran */
    json_array_append_new(rattrs, kv_str("service.instance.id", ex.instance));
  size_t i;
  json_t *pair;
  json_array_foreach(ex.resource_extra, i, pair)
  {
    json_t *kv = kv_str(json_string_value(json_array_get(pair, 0)),
                        json_string_value(json_array_get(pair, 1)));
    if (kv)
      json_array_append_new(rattrs, kv);
  }
  return json_pack("{s:[{s:{s:o}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
                   "attributes", rattrs, "scopeSpans", "scope", "name", "sandboxd", "version",
                   "0.1.0", "spans", arr);
}

/* ---- sending ---- */

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
  (void)p;
  (void)ud;
  return size * n;
}

/* Aborts a transfer once shutdown's flush budget is spent. */
static int progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
  (void)ud, (void)a, (void)b, (void)c, (void)d;
  pthread_mutex_lock(&ex.lock);
  bool late = ex.stopping && sbx_now_ms() >= ex.stop_deadline_ms;
  pthread_mutex_unlock(&ex.lock);
  return late ? 1 : 0;
}

/* 0 sent, 1 worth retrying, -1 rejected for good. */
static int post_once(CURL *h, const char *body, long *http)
{
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, ex.url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, ex.headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ex.timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(ex.timeout_ms < 1000 ? ex.timeout_ms : 1000));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  *http = 0;
  CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK)
    return 1;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
  if (*http >= 200 && *http < 300)
    return 0;
  /* OTLP/HTTP: these are the retryable answers; others are final. */
  return *http == 429 || *http == 502 || *http == 503 || *http == 504 ? 1 : -1;
}

/* Waits ms unless stopping; false if stopping. */
static bool backoff(unsigned ms)
{
  struct timespec ts;
  sbx_timespec_in(CLOCK_REALTIME, ms, &ts);
  pthread_mutex_lock(&ex.lock);
  while (!ex.stopping && pthread_cond_timedwait(&ex.stop_cond, &ex.lock, &ts) == 0)
    ;
  bool stopping = ex.stopping;
  pthread_mutex_unlock(&ex.lock);
  return !stopping;
}

static void export_batch(CURL *h, struct sbx_span **spans, size_t n)
{
  json_t *doc = sbx_trace_otlp_json(spans, n, ex.service);
  char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  int rc = 1;
  long http = 0;
  for (unsigned attempt = 0; body && h; attempt++) {
    rc = post_once(h, body, &http);
    if (rc <= 0 || attempt >= ex.retries || !backoff(100u << (2 * attempt)))
      break;
  }
  free(body);
  if (rc == 0) {
    atomic_fetch_add(&n_exported, n);
    return;
  }
  atomic_fetch_add(&n_failed, n);
  sbx_debug("trace", "exporting %zu span(s) to %s failed (HTTP %ld)", n, ex.url, http);
}

/* Takes up to batch_max spans once a batch is full, the delay passed, or
 * stopping.  Returns how many; 0 with *done when it is time to exit. */
static size_t take_batch(struct sbx_span **out, bool *done)
{
  struct timespec ts;
  sbx_timespec_in(CLOCK_REALTIME, ex.delay_ms, &ts);
  pthread_mutex_lock(&ex.lock);
  while (!ex.stopping && ex.len < ex.batch_max)
    if (pthread_cond_timedwait(&ex.cond, &ex.lock, &ts) != 0)
      break;
  size_t n = ex.len < ex.batch_max ? ex.len : ex.batch_max;
  for (size_t i = 0; i < n; i++) {
    out[i] = ex.ring[ex.head];
    ex.head = (ex.head + 1) % ex.cap;
  }
  ex.len -= n;
  *done = ex.stopping && n == 0;
  pthread_mutex_unlock(&ex.lock);
  return n;
}

static void *export_main(void *arg)
{
  (void)arg;
  CURL *h = curl_easy_init();
  struct sbx_span **batch = calloc(ex.batch_max, sizeof *batch);
  bool done = false;
  while (batch && !done) {
    size_t n = take_batch(batch, &done);
    if (n && ex.stopping && sbx_now_ms() >= ex.stop_deadline_ms)
      atomic_fetch_add(&n_failed, n); /* out of shutdown time: give up */
    else if (n)
      export_batch(h, batch, n);
    for (size_t i = 0; i < n; i++)
      sbx_span_free(batch[i]);
  }
  free(batch);
  if (h)
    curl_easy_cleanup(h);
  return NULL;
}

/* ---- configuration ---- */

static unsigned env_uint(const char *name, unsigned def, unsigned lo, unsigned hi)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return def;
  char *end;
  unsigned long n = strtoul(v, &end, 10);
  if (*end || n < lo || n > hi) {
    sbx_warn("trace", "%s=%s: expected a whole number in [%u, %u]; using %u", name, v, lo, hi,
             def);
    return def;
  }
  return (unsigned)n;
}

static const char *env_str(const char *a, const char *b)
{
  const char *v = getenv(a);
  if (v && *v)
    return v;
  v = b ? getenv(b) : NULL;
  return v && *v ? v : NULL;
}

static int resolve_url(void)
{
  const char *full = env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", NULL);
  const char *base = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
  if (full) {
    snprintf(ex.url, sizeof ex.url, "%s", full); /* the signal URL is used as is */
  } else if (base) {
    size_t n = strlen(base);
    snprintf(ex.url, sizeof ex.url, "%.*s/v1/traces", (int)(n && base[n - 1] == '/' ? n - 1 : n),
             base);
  } else {
    return 0;
  }
  if (strncmp(ex.url, "http://", 7) != 0 && strncmp(ex.url, "https://", 8) != 0) {
    sbx_warn("trace", "OTLP endpoint %s is not an http(s) URL: traces are not exported", ex.url);
    return 0;
  }
  return 1;
}

/* "k1=v1,k2=v2" (values taken verbatim, trimmed) → each pair to fn. */
static void each_pair(const char *list, void (*fn)(const char *k, const char *v))
{
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", list ? list : "");
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq)
      continue;
    *eq = '\0';
    char *k = tok, *v = eq + 1;
    while (*k == ' ')
      k++;
    while (*v == ' ')
      v++;
    for (char *e = k + strlen(k); e > k && e[-1] == ' ';)
      *--e = '\0';
    for (char *e = v + strlen(v); e > v && e[-1] == ' ';)
      *--e = '\0';
    if (*k)
      fn(k, v);
  }
}

static void add_header(const char *k, const char *v)
{
  char line[4200];
  snprintf(line, sizeof line, "%s: %s", k, v);
  struct curl_slist *l = curl_slist_append(ex.headers, line);
  if (l)
    ex.headers = l;
}

void sbx_trace_set_instance(const char *id)
{
  pthread_mutex_lock(&ex.lock);
  snprintf(ex.instance, sizeof ex.instance, "%s", id ? id : "");
  pthread_mutex_unlock(&ex.lock);
}

static void add_resource(const char *k, const char *v)
{
  if (strcmp(k, "service.name") != 0) /* OTEL_SERVICE_NAME / ours wins */
    json_array_append_new(ex.resource_extra, json_pack("[s, s]", k, v));
}

static bool configure(void)
{
  const char *off = getenv("OTEL_SDK_DISABLED");
  const char *exporter = getenv("OTEL_TRACES_EXPORTER");
  if ((off && strcasecmp(off, "true") == 0) || (exporter && strcmp(exporter, "none") == 0))
    return false;
  if (!resolve_url())
    return false;
  const char *proto =
      env_str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (proto && strcmp(proto, "http/json") != 0)
    sbx_warn("trace", "OTLP protocol %s is not supported: sending http/json", proto);
  const char *svc = getenv("OTEL_SERVICE_NAME");
  snprintf(ex.service, sizeof ex.service, "%s", svc && *svc ? svc : "sandboxd");
  ex.cap = env_uint("OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, 1000000);
  ex.batch_max = env_uint("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1, 100000);
  if (ex.batch_max > ex.cap)
    ex.batch_max = (unsigned)ex.cap;
  ex.delay_ms = env_uint("OTEL_BSP_SCHEDULE_DELAY", 1000, 1, 600000);
  unsigned t = env_uint("OTEL_EXPORTER_OTLP_TIMEOUT", 3000, 1, 600000);
  ex.timeout_ms = env_uint("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", t, 1, 600000);
  ex.retries = 2;
  ex.headers = curl_slist_append(NULL, "Content-Type: application/json");
  each_pair(env_str("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"),
            add_header);
  ex.resource_extra = json_array();
  each_pair(getenv("OTEL_RESOURCE_ATTRIBUTES"), add_resource);
  return ex.headers != NULL;
}

static void unconfigure(void)
{
  curl_slist_free_all(ex.headers);
  ex.headers = NULL;
  json_decref(ex.resource_extra);
  ex.resource_extra = NULL;
  free(ex.ring);
  ex.ring = NULL;
}

int sbx_trace_start(void)
{
  pthread_mutex_lock(&ex.lock);
  bool already = ex.running;
  pthread_mutex_unlock(&ex.lock);
  if (already || !configure())
    return 0;
  curl_global_init(CURL_GLOBAL_DEFAULT); /* thread-safe since libcurl 7.84 */
  ex.ring = calloc(ex.cap, sizeof *ex.ring);
  ex.head = ex.len = 0;
  ex.stopping = false;
  if (!ex.ring || pthread_create(&ex.thread, NULL, export_main, NULL) != 0) {
    sbx_warn("trace", "cannot start the trace exporter: traces are not exported");
    unconfigure();
    return 0;
  }
  pthread_mutex_lock(&ex.lock);
  ex.running = true;
  pthread_mutex_unlock(&ex.lock);
  atomic_store(&exporting, true);
  sbx_info("trace", "exporting spans to %s (OTLP/HTTP JSON, queue %zu, batch %u, every %u ms)",
           ex.url, ex.cap, ex.batch_max, ex.delay_ms);
  return 0;
}

void sbx_trace_stop(void)
{
  pthread_mutex_lock(&ex.lock);
  if (!ex.running) {
    pthread_mutex_unlock(&ex.lock);
    return;
  }
  atomic_store(&exporting, false);
  ex.stopping = true;
  ex.stop_deadline_ms = sbx_now_ms() + STOP_BUDGET_MS;
  pthread_cond_broadcast(&ex.cond);
  pthread_cond_broadcast(&ex.stop_cond);
  pthread_mutex_unlock(&ex.lock);
  pthread_join(ex.thread, NULL);
  pthread_mutex_lock(&ex.lock);
  ex.running = false;
  for (; ex.len; ex.len--, ex.head = (ex.head + 1) % ex.cap)
    sbx_span_free(ex.ring[ex.head]);
  pthread_mutex_unlock(&ex.lock);
  sbx_info("trace", "exporter stopped: exported=%llu dropped_queue_full=%llu export_failed=%llu",
           (unsigned long long)sbx_trace_exported(), (unsigned long long)sbx_trace_dropped(),
           (unsigned long long)sbx_trace_export_failed());
  unconfigure();
}
