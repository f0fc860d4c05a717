/* link.c — framing of the microVM link (link.h): the incremental reader
 * both relays parse the byte stream with, and the header encoder.
 * libc only. */
#include "vm/link.h"

#include <string.h>

enum { HDR = sizeof(struct sbx_link_hdr) };

static void get_hdr(const uint8_t *p, struct sbx_link_hdr *h)
{
  /* Field by field: the layout on the wire is fixed, whatever padding a
   * compiler might choose for the struct. */
  h->kind = p[0];
  h->flags = p[1];
  memcpy(&h->zero, p + 2, 2);
  memcpy(&h->chan, p + 4, 4);
  memcpy(&h->len, p + 8, 4);
  memcpy(&h->aux, p + 12, 4);
}

void sbx_link_put_hdr(uint8_t out[sizeof(struct sbx_link_hdr)], uint8_t kind, uint8_t flags,
                      uint32_t chan, uint32_t len, uint32_t aux)
{
  uint16_t zero = 0;
  out[0] = kind;
  out[1] = flags;
  memcpy(out + 2, &zero, 2);
  memcpy(out + 4, &chan, 4);
  memcpy(out + 8, &len, 4);
  memcpy(out + 12, &aux, 4);
}

/* Bytes the frame at the start of the buffer needs in all, or 0 while its
 * header is incomplete. */
static size_t frame_size(const struct sbx_link_reader *r)
{
  if (r->have < HDR)
    return 0;
  uint32_t len;
  memcpy(&len, r->buf + 8, 4);
  return HDR + (size_t)len;
}

size_t sbx_link_feed(struct sbx_link_reader *r, const void *in, size_t n)
{
  /* Take only up to the end of the current frame, so that a malformed
   * length is seen (by sbx_link_next) before anything is written past the
   * buffer. */
  size_t want = HDR;
  if (r->have >= HDR) {
    size_t fs = frame_size(r);
    want = fs <= sizeof r->buf ? fs : r->have;
  }
  size_t take = want > r->have ? want - r->have : 0;
  if (take > n)
    take = n;
  memcpy(r->buf + r->have, in, take);
  r->have += take;
  return take;
}

static int valid(const struct sbx_link_hdr *h)
{
  return h->kind >= SBX_LINK_MSG && h->kind <= SBX_LINK_CREDIT && h->zero == 0 &&
         h->len <= SBX_LINK_MAX_PAYLOAD;
}

int sbx_link_next(struct sbx_link_reader *r, struct sbx_link_hdr *hdr, const uint8_t **payload)
{
  if (r->have < HDR)
    return 0;
  get_hdr(r->buf, hdr);
  if (!valid(hdr))
    return -1;
  if (r->have < HDR + (size_t)hdr->len)
    return 0;
  *payload = r->buf + HDR;
  /* The caller consumes the frame now; the buffer is reused by the next
   * feed, so the payload stays valid until then. */
  r->have = 0;
  return 1;
}
