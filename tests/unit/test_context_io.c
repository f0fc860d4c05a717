/* test_context_io.c — a streamed context run's output queue
 * (core/context_io.c) against forged progress frames: code in the sandbox
 * can read the frame nonce and send any number of 1-byte frames.  Tiny
 * frames of one stream share a chunk instead of allocating one each, and
 * what the queue holds (text, headers, unused room) stays within the
 * run's per-stream budget however the frames alternate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/context_int.h"

#define NONCE "0123456789abcdef0123456789abcdef"
#define BUDGET (1u << 20)

static struct sbx_context *busy_context(void)
{
  struct sbx_context *c = calloc(1, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  memcpy(c->nonce, NONCE, SBX_CTX_NONCE_LEN);
  c->state = SBX_CTX_BUSY;
  c->seq = 7;
  c->live = true;
  c->live_left[0] = c->live_left[1] = BUDGET;
  return c;
}

static void context_free(struct sbx_context *c)
{
  sbx_ctx_reset_run_locked(c);
  free(c->frame);
  free(c->stray[0]);
  free(c->stray[1]);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* n forged frames of one byte each, stderr every other one if alternate,
 * fed in pipe-sized pieces as the interpreter's stdout would come. */
static void forge(struct sbx_context *c, size_t n, bool alternate)
{
  char buf[4096];
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    const char *s = alternate && i % 2 ? "stderr" : "stdout";
    len += (size_t)snprintf(buf + len, sizeof buf - len,
                            NONCE " {\"seq\":7,\"stream\":\"%s\",\"text\":\"x\"}\n", s);
    if (len > sizeof buf - 128 || i + 1 == n) {
      sbx_ctx_feed_locked(c, 1, buf, len);
      len = 0;
    }
  }
}

static void tiny_frames_share_chunks(void)
{
  struct sbx_context *c = busy_context();
  forge(c, 100000, false);
  size_t chunks = 0, text = 0;
  for (struct sbx_ctx_chunk *ch = c->live_head; ch; ch = ch->next) {
    chunks++;
    text += ch->len;
    CHECK(ch->stream == 1);
  }
  CHECK(text == 100000); /* nothing lost within the budget */
  CHECK(chunks <= 100000 / SBX_CTX_CHUNK_MIN + 1);
  context_free(c);
}

static void alternating_frames_stay_in_budget(void)
{
  struct sbx_context *c = busy_context();
  forge(c, 400000, true);
  uint64_t held[2] = {0, 0};
  size_t chunks = 0;
  for (struct sbx_ctx_chunk *ch = c->live_head; ch; ch = ch->next) {
    chunks++;
    held[ch->stream - 1] += sizeof *ch + ch->cap;
  }
  CHECK(chunks > 0);
  CHECK(held[0] <= BUDGET && held[1] <= BUDGET);
  CHECK(c->live_left[0] <= BUDGET && c->live_left[1] <= BUDGET);
  context_free(c);
}

static void honest_frames_pass_whole(void)
{
  struct sbx_context *c = busy_context();
  const char f[] = NONCE " {\"seq\":7,\"stream\":\"stdout\",\"text\":\"hello\\n\"}\n" NONCE
                         " {\"seq\":7,\"stream\":\"stderr\",\"text\":\"oops\\n\"}\n"
                         "plain\n";
  sbx_ctx_feed_locked(c, 1, f, sizeof f - 1);
  struct sbx_ctx_chunk *a = c->live_head, *b = a ? a->next : NULL, *d = b ? b->next : NULL;
  CHECK(a && a->stream == 1 && a->len == 6 && !memcmp(a->data, "hello\n", 6));
  CHECK(b && b->stream == 2 && b->len == 5 && !memcmp(b->data, "oops\n", 5));
  CHECK(d && d->stream == 1 && d->len == 6 && !memcmp(d->data, "plain\n", 6) && !d->next);
  context_free(c);
}

int main(void)
{
  CHECK_CASE(tiny_frames_share_chunks);
  CHECK_CASE(alternating_frames_stay_in_budget);
  CHECK_CASE(honest_frames_pass_whole);
  return check_finish("context_io");
}
