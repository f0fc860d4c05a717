/* capture.c — see capture.h. */
#include "common/capture.h"

#include <stdlib.h>
#include <string.h>

int sbx_capture_init(struct sbx_capture *c, size_t cap)
{
  memset(c, 0, sizeof *c);
  c->cap = cap;
  c->head_cap = cap / 2;
  c->tail_cap = cap - c->head_cap;
  c->head = malloc(c->head_cap ? c->head_cap : 1);
  c->tail = malloc(c->tail_cap ? c->tail_cap : 1);
  if (!c->head || !c->tail) {
    sbx_capture_free(c);
    return -1;
  }
  return 0;
}

void sbx_capture_free(struct sbx_capture *c)
{
  free(c->head);
  free(c->tail);
  c->head = c->tail = NULL;
}

void sbx_capture_release(struct sbx_capture *c)
{
  sbx_capture_free(c);
  c->cap = c->head_cap = c->tail_cap = 0;
  c->head_len = c->tail_len = c->tail_start = 0;
}

static void tail_push(struct sbx_capture *c, const char *p, size_t len)
{
  if (c->tail_cap == 0)
    return;
  if (len >= c->tail_cap) { /* only the last tail_cap bytes can survive */
    memcpy(c->tail, p + len - c->tail_cap, c->tail_cap);
    c->tail_start = 0;
    c->tail_len = c->tail_cap;
    return;
  }
  size_t end = (c->tail_start + c->tail_len) % c->tail_cap;
  size_t first = c->tail_cap - end < len ? c->tail_cap - end : len;
  memcpy(c->tail + end, p, first);
  memcpy(c->tail, p + first, len - first);
  c->tail_len += len;
  if (c->tail_len > c->tail_cap) { /* overwrote the oldest bytes */
    c->tail_start = (c->tail_start + c->tail_len - c->tail_cap) % c->tail_cap;
    c->tail_len = c->tail_cap;
  }
}

void sbx_capture_feed(struct sbx_capture *c, const void *data, size_t len)
{
  const char *p = data;
  c->total += len;
  size_t room = c->head_cap - c->head_len;
  size_t take = len < room ? len : room;
  memcpy(c->head + c->head_len, p, take);
  c->head_len += take;
  if (len > take)
    tail_push(c, p + take, len - take);
}

bool sbx_capture_truncated(const struct sbx_capture *c)
{
  return c->total > c->head_len + c->tail_len;
}

uint64_t sbx_capture_dropped(const struct sbx_capture *c)
{
  return c->total - c->head_len - c->tail_len;
}

char *sbx_capture_flatten(const struct sbx_capture *c, size_t *len)
{
  size_t n = c->head_len + c->tail_len;
  char *out = malloc(n + 1);
  if (!out)
    return NULL;
  out[n] = '\0';
  *len = n;
  if (n == 0) /* released: no buffers at all */
    return out;
  memcpy(out, c->head, c->head_len);
  size_t first =
      c->tail_cap - c->tail_start < c->tail_len ? c->tail_cap - c->tail_start : c->tail_len;
  memcpy(out + c->head_len, c->tail + c->tail_start, first);
  memcpy(out + c->head_len + first, c->tail, c->tail_len - first);
  out[n] = '\0';
  *len = n;
  return out;
}

int sbx_capture_output(const struct sbx_capture *c, struct sbx_output *o)
{
  o->truncated = sbx_capture_truncated(c);
  o->dropped = sbx_capture_dropped(c);
  o->len = 0;
  o->buf = sbx_capture_flatten(c, &o->len);
  return o->buf ? 0 : -1;
}
