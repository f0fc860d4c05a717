/* outbox.c — delivers usage records to the FinOps endpoint.
 *
 * The store is the queue: a record is committed with delivery 'pending'
 * before anything is sent, and only an acknowledgement (2xx, or 409 "I
 * already have this key") turns it 'delivered'.  So a record survives an
 * endpoint outage and a daemon crash (kill -9 mid-POST re-sends it after the
 * restart), and the receiver de-duplicates on the Idempotency-Key header —
 * the record's id, fixed at insert — so nothing is counted twice.
 *
 * One thread per process.  A failed POST pushes that record's
 * next_attempt_at back exponentially (1 s, 2 s, 4 s … max_backoff_s) and
 * ends the round, so an endpoint that is down sees about one request per
 * second, not one per pending record. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "obs/metrics.h"
#include "obs/usage.h"

#define BATCH 32

struct outbox {
  struct sbx_store_handle *st;
  char *url;
  long timeout_s;
  unsigned max_backoff_s;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stopping;
  bool kicked;
  CURL *curl;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct outbox *g;
/* Stays true after stop: records made while the daemon shuts down are
 * still stored as pending and go out after the restart. */
static bool g_configured;

/* ---- one POST ---- */

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
  (void)p;
  (void)ctx;
  return size * n;
}

/* Aborts a transfer in flight when the daemon stops. */
static int progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
  struct outbox *ob = ctx;
  (void)a, (void)b, (void)c, (void)d;
  pthread_mutex_lock(&ob->lock);
  bool stop = ob->stopping;
  pthread_mutex_unlock(&ob->lock);
  return stop;
}

/* 1 delivered, 0 not (why in msg). */
static int post(struct outbox *ob, const struct sbx_usage_row *row, char *msg, size_t len)
{
  json_t *body = sbx_usage_payload(row);
  char *txt = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(body);
  if (!txt) {
    snprintf(msg, len, "out of memory");
    return 0;
  }
  char key[128];
  snprintf(key, sizeof key, "Idempotency-Key: %s", row->id);
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  h = curl_slist_append(h, key);
  CURL *c = ob->curl;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, ob->url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, txt);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, ob->timeout_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, ob->timeout_s);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, ob);
  CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(h);
  free(txt);
  if (rc != CURLE_OK) {
    snprintf(msg, len, "%s", curl_easy_strerror(rc));
    return 0;
  }
  if ((code >= 200 && code < 300) || code == 409)
    return 1;
  snprintf(msg, len, "HTTP %ld", code);
  return 0;
}

/* ---- the loop ---- */

struct batch {
  struct sbx_usage_row rows[BATCH];
  int n;
};

static int collect(void *ctx, const struct sbx_usage_row *row)
{
  struct batch *b = ctx;
  b->rows[b->n++] = *row;
  return b->n == BATCH;
}

static int64_t backoff(const struct outbox *ob, int attempts)
{
  int64_t d = (int64_t)1 << (attempts < 16 ? attempts : 16);
  return d > ob->max_backoff_s ? ob->max_backoff_s : d;
}

/* One round: returns true if it should run again at once (a full batch
 * went through). */
static bool round_once(struct outbox *ob)
{
  struct batch b = {.n = 0};
  struct sbx_error err = {0};
  if (ob->st->ops->outbox_due(ob->st->st, sbx_wall_s(), BATCH, collect, &b, &err) < 0) {
    sbx_warn("finops", "reading the outbox: %s", err.msg);
    return false;
  }
  for (int i = 0; i < b.n; i++) {
    const struct sbx_usage_row *row = &b.rows[i];
    char msg[256] = "";
    int ok = post(ob, row, msg, sizeof msg);
    sbx_metrics_finops(ok);
    struct sbx_error merr = {0};
    int64_t next = sbx_wall_s() + backoff(ob, row->attempts);
    if (ob->st->ops->outbox_mark(ob->st->st, row->id, ok, next, msg, &merr) < 0)
      sbx_warn("finops", "recording delivery of %s: %s", row->id, merr.msg);
    if (!ok) {
      sbx_warn("finops", "delivering %s failed (attempt %d): %s; retrying in %llds", row->id,
               row->attempts + 1, msg, (long long)(next - sbx_wall_s()));
      return false;
    }
    sbx_debug("finops", "delivered %s", row->id);
  }
  return b.n == BATCH;
}

static void wait_for_work(struct outbox *ob, unsigned ms)
{
  struct timespec ts;
  sbx_timespec_in(CLOCK_REALTIME, ms, &ts);
  pthread_mutex_lock(&ob->lock);
  while (!ob->stopping && !ob->kicked)
    if (pthread_cond_timedwait(&ob->cond, &ob->lock, &ts) != 0)
      break;
  ob->kicked = false;
  pthread_mutex_unlock(&ob->lock);
}

static bool stopping(struct outbox *ob)
{
  pthread_mutex_lock(&ob->lock);
  bool s = ob->stopping;
  pthread_mutex_unlock(&ob->lock);
  return s;
}

static void *outbox_main(void *arg)
{
  struct outbox *ob = arg;
  while (!stopping(ob)) {
    if (!round_once(ob))
      wait_for_work(ob, 1000); /* also the poll that finds retries coming due */
  }
  return NULL;
}

/* ---- start, stop ---- */

static void outbox_free(struct outbox *ob)
{
  if (ob->curl)
    curl_easy_cleanup(ob->curl);
  pthread_mutex_destroy(&ob->lock);
  pthread_cond_destroy(&ob->cond);
  free(ob->url);
  free(ob);
}

int sbx_outbox_start(struct sbx_store_handle *st, const struct sbx_outbox_config *cfg,
                     struct sbx_error *err)
{
  if (!cfg->url || !*cfg->url)
    return 0;
  if (strncmp(cfg->url, "http://", 7) != 0 && strncmp(cfg->url, "https://", 8) != 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "finops_url must be an http:// or https:// URL");
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "finops: libcurl initialisation failed");
  struct outbox *ob = calloc(1, sizeof *ob);
  if (!ob)
    return sbx_err_sys(err, ENOMEM, "finops outbox");
  ob->st = st;
  ob->url = strdup(cfg->url);
  ob->timeout_s = cfg->timeout_s ? (long)cfg->timeout_s : 5;
  ob->max_backoff_s = cfg->max_backoff_s ? cfg->max_backoff_s : 60;
  pthread_mutex_init(&ob->lock, NULL);
  pthread_cond_init(&ob->cond, NULL);
  ob->curl = curl_easy_init();
  if (!ob->url || !ob->curl) {
    outbox_free(ob);
    return sbx_err_sys(err, ENOMEM, "finops outbox");
  }
  int rc = pthread_create(&ob->thread, NULL, outbox_main, ob);
  if (rc != 0) {
    outbox_free(ob);
    return sbx_err_sys(err, rc, "starting the finops outbox");
  }
  pthread_mutex_lock(&g_lock);
  g = ob;
  g_configured = true;
  pthread_mutex_unlock(&g_lock);
  sbx_info("finops", "delivering usage records to the FinOps endpoint");
  return 0;
}

void sbx_outbox_stop(void)
{
  pthread_mutex_lock(&g_lock);
  struct outbox *ob = g;
  g = NULL;
  pthread_mutex_unlock(&g_lock);
  if (!ob)
    return;
  pthread_mutex_lock(&ob->lock);
  ob->stopping = true;
  pthread_cond_signal(&ob->cond);
  pthread_mutex_unlock(&ob->lock);
  pthread_join(ob->thread, NULL);
  outbox_free(ob);
}

bool sbx_outbox_configured(void)
{
  pthread_mutex_lock(&g_lock);
  bool on = g_configured;
  pthread_mutex_unlock(&g_lock);
  return on;
}

void sbx_outbox_kick(void)
{
  pthread_mutex_lock(&g_lock);
  if (g) {
    pthread_mutex_lock(&g->lock);
    g->kicked = true;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
  }
  pthread_mutex_unlock(&g_lock);
}
