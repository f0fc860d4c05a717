/* buf.h — the bounded growable buffer every module appends into: bytes
 * (sbx_buf) and arrays of fixed-size elements (sbx_array_grow).  Each
 * buffer is given its ceiling when it is set up, by a named constant of the
 * module that owns it, so no buffer grows without a stated limit.  libc
 * only: sbx-init (static, PID 1 in the sandbox) compiles buf.c in.
 *
 * Allocation failure and the ceiling are reported the same way, as a value
 * the caller must handle (docs/architecture.md, "Allocation failure"):
 * -1 with errno ENOMEM or E2BIG, and the buffer left as it was. */
#ifndef SBX_COMMON_BUF_H
#define SBX_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct sbx_buf {
  char *data; /* NUL-terminated after every append (the NUL is not in len) */
  size_t len, cap;
  size_t max; /* ceiling on len */
};
#define SBX_BUF_INIT(ceiling)                                                                   \
  {                                                                                             \
    .data = NULL, .len = 0, .cap = 0, .max = (ceiling)                                          \
  }

/* Appends n bytes.  0, or -1 with errno E2BIG (len would pass max) or
 * ENOMEM; either way nothing is appended. */
int sbx_buf_append(struct sbx_buf *b, const void *p, size_t n);
/* Room for n more bytes (and the NUL) without a further allocation. */
int sbx_buf_reserve(struct sbx_buf *b, size_t n);
/* Hands the bytes on (caller frees; NULL if nothing was appended) and
 * leaves b empty with the same ceiling. */
char *sbx_buf_steal(struct sbx_buf *b, size_t *len);
void sbx_buf_free(struct sbx_buf *b);
/* Empties b, keeping its memory (data reads "" if it has any). */
static inline void sbx_buf_clear(struct sbx_buf *b)
{
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
}

/* Room in the array *v (capacity *cap elements of elem bytes) for need
 * elements, at most max: doubles from 16.  0, or -1 with errno E2BIG
 * (need > max) or ENOMEM, *v and *cap unchanged. */
int sbx_array_grow(void *v, size_t *cap, size_t need, size_t elem, size_t max);

static inline void sbx_buf_freep(struct sbx_buf *b) { sbx_buf_free(b); }
#define _cleanup_buf_ __attribute__((cleanup(sbx_buf_freep)))

#endif
