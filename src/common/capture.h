/* capture.h — bounded output capture that keeps the head and the tail.
 *
 * A stream may print gigabytes; the daemon keeps at most `cap` bytes of it:
 * the first cap/2 bytes (head) and the last cap - cap/2 bytes (tail, a ring),
 * and counts everything in between as dropped.  Memory is allocated once at
 * init (cap bytes) and never grows.  Not thread-safe: one owner feeds it. */
#ifndef SBX_COMMON_CAPTURE_H
#define SBX_COMMON_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sbx_capture {
  size_t cap;      /* total bytes kept at most */
  size_t head_cap; /* cap / 2 */
  size_t tail_cap; /* cap - head_cap */
  char *head;      /* head_cap bytes */
  size_t head_len;
  char *tail;        /* ring of tail_cap bytes */
  size_t tail_start; /* index of the oldest byte in the ring */
  size_t tail_len;
  uint64_t total; /* bytes seen */
};

/* Allocates cap bytes. Returns -1 on ENOMEM. */
int sbx_capture_init(struct sbx_capture *c, size_t cap);
void sbx_capture_free(struct sbx_capture *c);
/* Frees the kept bytes but keeps the count: everything seen is then
 * dropped (offsets stay right); feeding it afterwards keeps nothing. */
void sbx_capture_release(struct sbx_capture *c);
void sbx_capture_feed(struct sbx_capture *c, const void *data, size_t len);
bool sbx_capture_truncated(const struct sbx_capture *c);
uint64_t sbx_capture_dropped(const struct sbx_capture *c);
/* What a captured stream kept: head+tail in buf (malloc'd, len bytes plus
 * a NUL; its holder frees it), and whether and how much was cut between. */
struct sbx_output {
  char *buf;
  size_t len;
  bool truncated;
  uint64_t dropped;
};
/* Fills o from c: buf by sbx_capture_flatten, the counts always.  0, or -1
 * on ENOMEM (buf NULL). */
int sbx_capture_output(const struct sbx_capture *c, struct sbx_output *o);
/* Returns a malloc'd buffer of head+tail (caller frees) and its length in
 * *len; NULL on ENOMEM.  Always NUL-terminated for convenience. */
char *sbx_capture_flatten(const struct sbx_capture *c, size_t *len);

#endif
