/* sse.c — see sse.h. */
#include "api/sse.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

struct sse_item {
  char *text; /* "event: x\ndata: …\n\n" */
  size_t len;
  struct sse_item *next;
};

struct sbx_sse {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int refs;
  struct sse_item *head, *tail;
  size_t queued, max;
  size_t head_off; /* bytes of head already sent */
  bool finished;
  bool gone;
  bool raw; /* another framing over the same queue: no keep-alive comments */
  void (*on_gone)(void *);
  void *on_gone_ctx;
};

struct sbx_sse *sbx_sse_new(size_t max_queued_bytes)
{
  struct sbx_sse *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  pthread_mutex_init(&s->lock, NULL);
  sbx_cond_init_monotonic(&s->cond);
  s->refs = 1;
  s->max = max_queued_bytes ? max_queued_bytes : (4u << 20);
  return s;
}

static char *format_event(const char *event, json_t *data, size_t *len)
{
  char *js = json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(9));
  if (!js)
    return NULL;
  char *out = NULL;
  int n = asprintf(&out, "event: %s\ndata: %s\n\n", event, js);
  free(js);
  if (n < 0)
    return NULL;
  *len = (size_t)n;
  return out;
}

static int enqueue(struct sbx_sse *s, char *text, size_t len, unsigned wait_ms)
{
  struct timespec until;
  sbx_timespec_in(CLOCK_MONOTONIC, wait_ms, &until);
  pthread_mutex_lock(&s->lock);
  /* An event larger than the whole queue still goes out when it is empty. */
  while (!s->gone && s->queued > 0 && s->queued + len > s->max && wait_ms > 0)
    if (pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0)
      break;
  int rc = 0;
  if (s->gone)
    rc = -1;
  else if (s->queued > 0 && s->queued + len > s->max)
    rc = 1;
  if (rc != 0) {
    pthread_mutex_unlock(&s->lock);
    free(text);
    return rc;
  }
  struct sse_item *it = malloc(sizeof *it);
  if (!it) {
    pthread_mutex_unlock(&s->lock);
    free(text);
    return 1;
  }
  *it = (struct sse_item){.text = text, .len = len};
  if (s->tail)
    s->tail->next = it;
  else
    s->head = it;
  s->tail = it;
  s->queued += len;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static int push(struct sbx_sse *s, const char *event, json_t *data, unsigned wait_ms)
{
  size_t len = 0;
  char *text = format_event(event, data, &len);
  json_decref(data);
  if (!text)
    return 1;
  return enqueue(s, text, len, wait_ms);
}

int sbx_sse_push_raw(struct sbx_sse *s, char *bytes, size_t len, unsigned wait_ms)
{
  if (!bytes)
    return 1;
  return enqueue(s, bytes, len, wait_ms);
}

int sbx_sse_push(struct sbx_sse *s, const char *event, json_t *data)
{
  return push(s, event, data, 0);
}

int sbx_sse_push_wait(struct sbx_sse *s, const char *event, json_t *data, unsigned timeout_ms)
{
  return push(s, event, data, timeout_ms);
}

void sbx_sse_finish(struct sbx_sse *s)
{
  pthread_mutex_lock(&s->lock);
  s->finished = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

bool sbx_sse_gone(struct sbx_sse *s)
{
  pthread_mutex_lock(&s->lock);
  bool g = s->gone;
  pthread_mutex_unlock(&s->lock);
  return g;
}

void sbx_sse_unref(struct sbx_sse *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->lock);
  if (!last)
    return;
  for (struct sse_item *it = s->head, *next; it; it = next) {
    next = it->next;
    free(it->text);
    free(it);
  }
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->cond);
  free(s);
}

/* The connection thread pulls: blocks until there is something to send,
 * sends a keep-alive comment after 15 s of silence, ends after finish. */
static long sse_read(void *ctx, uint64_t pos, char *buf, size_t max)
{
  (void)pos;
  struct sbx_sse *s = ctx;
  pthread_mutex_lock(&s->lock);
  struct timespec until;
  sbx_timespec_in(CLOCK_MONOTONIC, 15000, &until);
  while (!s->head && !s->finished)
    if (pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0) {
      if (!s->raw)
        break;
      sbx_timespec_in(CLOCK_MONOTONIC, 15000,
                      &until); /* a raw producer sends its own keep-alives */
    }
  long n;
  if (s->head) {
    struct sse_item *it = s->head;
    size_t left = it->len - s->head_off;
    n = (long)(left < max ? left : max);
    memcpy(buf, it->text + s->head_off, (size_t)n);
    s->head_off += (size_t)n;
    if (s->head_off == it->len) {
      s->head = it->next;
      if (!s->head)
        s->tail = NULL;
      s->queued -= it->len;
      s->head_off = 0;
      free(it->text);
      free(it);
      pthread_cond_broadcast(&s->cond); /* room for a waiting producer */
    }
  } else if (s->finished) {
    n = -1;
  } else {
    static const char ping[] = ": keep-alive\n\n";
    n = (long)(sizeof ping - 1 < max ? sizeof ping - 1 : max);
    memcpy(buf, ping, (size_t)n);
  }
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* MHD frees the response: either the stream ended or the client left. */
static void sse_release(void *ctx)
{
  struct sbx_sse *s = ctx;
  pthread_mutex_lock(&s->lock);
  bool was_done = s->finished && !s->head;
  s->gone = true;
  void (*cb)(void *) = s->on_gone;
  void *cbctx = s->on_gone_ctx;
  s->on_gone = NULL;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  if (cb && !was_done)
    cb(cbctx);
  sbx_sse_unref(s);
}

void sbx_sse_respond(struct sbx_resp *out, struct sbx_sse *s, void (*on_gone)(void *ctx),
                     void *ctx)
{
  pthread_mutex_lock(&s->lock);
  s->refs++;
  s->on_gone = on_gone;
  s->on_gone_ctx = ctx;
  pthread_mutex_unlock(&s->lock);
  out->status = 200;
  out->kind = SBX_RESP_STREAM;
  out->content_type = "text/event-stream";
  out->stream = sse_read;
  out->stream_ctx = s;
  out->stream_free = sse_release;
}

void sbx_sse_unrespond(struct sbx_resp *out)
{
  if (out->stream_free)
    out->stream_free(out->stream_ctx);
  memset(out, 0, sizeof *out);
  out->fd = -1;
}

void sbx_sse_respond_raw(struct sbx_resp *out, struct sbx_sse *s, const char *content_type,
                         void (*on_gone)(void *ctx), void *ctx)
{
  pthread_mutex_lock(&s->lock);
  s->raw = true;
  pthread_mutex_unlock(&s->lock);
  sbx_sse_respond(out, s, on_gone, ctx);
  out->content_type = content_type;
}

bool sbx_req_wants_sse(struct sbx_req *r)
{
  const char *a = sbx_req_header(r, "Accept");
  return a && strstr(a, "text/event-stream") != NULL;
}
