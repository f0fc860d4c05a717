/* buf.c — the bounded growable buffer (buf.h).  libc only. */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The first capacity given to a buffer, and the doubling from there. */
#define BUF_FIRST 256
#define ARRAY_FIRST 16

int sbx_buf_reserve(struct sbx_buf *b, size_t n)
{
  if (n > b->max - b->len) {
    errno = E2BIG;
    return -1;
  }
  size_t need = b->len + n + 1; /* + the NUL; b->max < SIZE_MAX - 1 in practice */
  if (need <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : BUF_FIRST;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  if (cap > b->max + 1)
    cap = b->max + 1;
  char *nd = realloc(b->data, cap);
  if (!nd) {
    errno = ENOMEM;
    return -1;
  }
  b->data = nd;
  b->cap = cap;
  return 0;
}

int sbx_buf_append(struct sbx_buf *b, const void *p, size_t n)
{
  if (sbx_buf_reserve(b, n) < 0)
    return -1;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

char *sbx_buf_steal(struct sbx_buf *b, size_t *len)
{
  char *d = b->data;
  if (len)
    *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

void sbx_buf_free(struct sbx_buf *b)
{
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

int sbx_array_grow(void *v, size_t *cap, size_t need, size_t elem, size_t max)
{
  if (need <= *cap)
    return 0;
  if (need > max || elem == 0 || max > SIZE_MAX / elem) {
    errno = E2BIG;
    return -1;
  }
  size_t ncap = *cap ? *cap : ARRAY_FIRST;
  while (ncap < need)
    ncap *= 2;
  if (ncap > max)
    ncap = max;
  void **pv = v;
  void *nv = realloc(*pv, ncap * elem);
  if (!nv) {
    errno = ENOMEM;
    return -1;
  }
  *pv = nv;
  *cap = ncap;
  return 0;
}
