/* context_io.c — the daemon's end of the driver protocol (see
 * core/contexts/python_driver.py): requests are JSON lines on the
 * interpreter's stdin; replies are "<nonce> <json>\n" frames on its stdout.
 *
 * Everything the interpreter prints is hostile input: a frame is found only
 * by this interpreter's random nonce, is bounded (SBX_CTX_MAX_FRAME), must
 * be a JSON object, and is taken only as the reply to the run in progress
 * (same seq).  Bytes outside frames — a subprocess writing to the inherited
 * descriptors, say — are kept (bounded) as the run's own output.  A
 * streamed run's progress frames ({seq, stream, text}) and its stray bytes
 * are also queued, in arrival order, for the run's thread to hand on. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "core/context_int.h"

/* Queues output of a streamed run for its thread (idx 0 stdout, 1 stderr):
 * into the last chunk when it is of the same stream and has room, else
 * into a new one whose cost (header, malloc's own, unused room) comes out
 * of live_left[idx] until it is delivered.  False if it was dropped. */
static bool live_add(struct sbx_context *c, int idx, const char *data, size_t len)
{
  struct sbx_ctx_chunk *ch = c->live_tail;
  if (len == 0)
    return true;
  if (!ch || ch->stream != idx + 1 || ch->cap - ch->len < len) {
    size_t cap = len < SBX_CTX_CHUNK_MIN ? SBX_CTX_CHUNK_MIN : len;
    uint64_t cost = sizeof *ch + 2 * sizeof(void *) + (cap - len);
    if (cost > c->live_left[idx] || !(ch = malloc(sizeof *ch + cap)))
      return false;
    c->live_left[idx] -= cost;
    *ch = (struct sbx_ctx_chunk){.stream = idx + 1, .cap = cap, .cost = cost};
    if (c->live_tail)
      c->live_tail->next = ch;
    else
      c->live_head = ch;
    c->live_tail = ch;
  }
  memcpy(ch->data + ch->len, data, len);
  ch->len += len;
  pthread_cond_broadcast(&c->cond);
  return true;
}

/* Keeps non-frame output of the run in progress (idx 0 stdout, 1 stderr). */
static void stray_add(struct sbx_context *c, int idx, const char *data, size_t len)
{
  if (c->state != SBX_CTX_BUSY || len == 0)
    return; /* between runs nobody asked for it */
  if (!c->stray[idx] && !(c->stray[idx] = malloc(SBX_CTX_STRAY_CAP)))
    return;
  size_t room = SBX_CTX_STRAY_CAP - c->stray_len[idx];
  size_t n = len < room ? len : room;
  memcpy(c->stray[idx] + c->stray_len[idx], data, n);
  c->stray_len[idx] += n;
  c->stray_dropped[idx] += len - n;
  if (c->live)
    live_add(c, idx, data, n);
}

/* A streamed run's progress frame: its text, within the stream's budget. */
static void on_progress(struct sbx_context *c, json_t *j)
{
  const char *s = json_string_value(json_object_get(j, "stream"));
  json_t *t = json_object_get(j, "text");
  int idx = s && !strcmp(s, "stdout") ? 0 : s && !strcmp(s, "stderr") ? 1 : -1;
  if (!c->live || idx < 0 || !json_is_string(t))
    return;
  size_t n = json_string_length(t);
  if (n > c->live_left[idx])
    n = (size_t)c->live_left[idx]; /* may cut a UTF-8 sequence: the watcher copes */
  c->live_left[idx] -= n;
  if (!live_add(c, idx, json_string_value(t), n))
    c->live_left[idx] += n; /* not queued: not spent */
}

static void on_frame(struct sbx_context *c, const char *text, size_t len)
{
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    return;
  }
  if (json_is_true(json_object_get(j, "hello"))) {
    if (c->state == SBX_CTX_STARTING) {
      const char *v = json_string_value(json_object_get(j, "version"));
      snprintf(c->version, sizeof c->version, "%s", v ? v : "");
      c->state = SBX_CTX_READY;
      pthread_cond_broadcast(&c->cond);
    }
    json_decref(j);
    return;
  }
  json_t *seq = json_object_get(j, "seq");
  bool ours = c->state == SBX_CTX_BUSY && !c->reply && json_is_integer(seq) &&
              (uint64_t)json_integer_value(seq) == c->seq;
  if (ours && json_object_get(j, "stream")) {
    on_progress(c, j);
  } else if (ours) {
    c->reply = j;
    pthread_cond_broadcast(&c->cond);
    return;
  }
  json_decref(j); /* stale or forged: ignored */
}

static bool frame_reserve(struct sbx_context *c, size_t more)
{
  if (c->frame_len + more <= c->frame_cap)
    return true;
  if (c->frame_len + more > SBX_CTX_MAX_FRAME)
    return false;
  size_t cap = c->frame_cap ? c->frame_cap : 64 * 1024;
  while (cap < c->frame_len + more)
    cap *= 2;
  if (cap > SBX_CTX_MAX_FRAME)
    cap = SBX_CTX_MAX_FRAME;
  char *nb = realloc(c->frame, cap);
  if (!nb)
    return false;
  c->frame = nb;
  c->frame_cap = cap;
  return true;
}

/* Consumes n bytes from the front of the frame buffer. */
static void frame_drop(struct sbx_context *c, size_t n)
{
  memmove(c->frame, c->frame + n, c->frame_len - n);
  c->frame_len -= n;
}

/* The longest tail of buf that may still grow into the nonce. */
static size_t nonce_tail(const char *buf, size_t len, const char *nonce)
{
  size_t k = len < SBX_CTX_NONCE_LEN - 1 ? len : SBX_CTX_NONCE_LEN - 1;
  while (k > 0 && memcmp(buf + len - k, nonce, k) != 0)
    k--;
  return k;
}

static void scan(struct sbx_context *c)
{
  const size_t nl = SBX_CTX_NONCE_LEN;
  for (;;) {
    char *hit = memmem(c->frame, c->frame_len, c->nonce, nl);
    if (!hit) {
      /* What cannot be the start of a nonce any more is plain output
       * (now, so that a streamed run shows it at once). */
      size_t keep = nonce_tail(c->frame, c->frame_len, c->nonce);
      stray_add(c, 0, c->frame, c->frame_len - keep);
      frame_drop(c, c->frame_len - keep);
      return;
    }
    size_t before = (size_t)(hit - c->frame);
    stray_add(c, 0, c->frame, before);
    frame_drop(c, before);
    char *end = memchr(c->frame + nl, '\n', c->frame_len - nl);
    if (!end)
      return; /* the rest of the frame is still coming */
    size_t flen = (size_t)(end - c->frame);
    if (flen > nl && c->frame[nl] == ' ')
      on_frame(c, c->frame + nl + 1, flen - nl - 1);
    frame_drop(c, flen + 1);
  }
}

void sbx_ctx_feed_locked(struct sbx_context *c, int stream, const char *data, size_t len)
{
  if (stream == 2) {
    stray_add(c, 1, data, len);
    return;
  }
  if (!c->nonce[0])
    return;
  if (!frame_reserve(c, len)) {
    /* A frame larger than any honest reply: the run cannot be answered. */
    c->frame_len = 0;
    c->proto_error = true;
    pthread_cond_broadcast(&c->cond);
    return;
  }
  memcpy(c->frame + c->frame_len, data, len);
  c->frame_len += len;
  scan(c);
}

void sbx_ctx_reset_run_locked(struct sbx_context *c)
{
  json_decref(c->reply);
  c->reply = NULL;
  c->proto_error = false;
  for (int i = 0; i < 2; i++) {
    c->stray_len[i] = 0;
    c->stray_dropped[i] = 0;
    c->live_left[i] = 0;
  }
  c->live = false;
  for (struct sbx_ctx_chunk *ch = c->live_head, *next; ch; ch = next) {
    next = ch->next;
    free(ch);
  }
  c->live_head = c->live_tail = NULL;
}

int sbx_ctx_send_locked(struct sbx_context *c, json_t *req, unsigned timeout_ms,
                        struct sbx_error *err)
{
  char *line = json_dumps(req, JSON_COMPACT | JSON_ENSURE_ASCII);
  if (!line)
    return sbx_err_sys(err, ENOMEM, "context request");
  size_t len = strlen(line), off = 0;
  line[len] = '\n'; /* json_dumps NUL-terminates: that byte becomes the newline */
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  int e = 0;
  while (off < len + 1 && c->stdin_w >= 0) {
    ssize_t n = write(c->stdin_w, line + off, len + 1 - off);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno != EAGAIN) {
      e = errno;
      break;
    }
    uint64_t now = sbx_now_ms();
    if (now >= deadline) {
      e = ETIMEDOUT;
      break;
    }
    struct pollfd p = {.fd = c->stdin_w, .events = POLLOUT};
    poll(&p, 1, (int)(deadline - now));
  }
  free(line);
  if (off == len + 1)
    return 0;
  if (c->stdin_w < 0 || e == EPIPE)
    return sbx_err_set(err, SBX_E_CONFLICT, EPIPE, "context %s: its interpreter is gone", c->id);
  return sbx_err_set(err, SBX_E_INTERNAL, e, "context %s: cannot send the code: %s", c->id,
                     strerror(e));
}
