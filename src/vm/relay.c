/* relay.c — the relay engine of a microVM link (link.h), for both sides:
 * the channel table, the windows, frames in and out, and one poll loop
 * over the link and every channel's local fd.
 *
 * Nothing here blocks: every fd is non-blocking; what the peer sends for a
 * local fd waits in that channel's queue, which the window bounds
 * (SBX_LINK_WINDOW a direction); frames for the link wait in r->out, which
 * grows only by what windows allow plus small control frames, and past
 * OUT_HIGH the relay stops reading local fds until the link drains.  A
 * peer that breaks a rule (window, size, unknown channel, …) ends the
 * link: on the host that is the guest, and the daemon sees the sandbox's
 * channel close as if sbx-init had died. */
#include "vm/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "init/proto.h"
#include "vm/relay_int.h"

enum { HDR = sizeof(struct sbx_link_hdr) };
/* Stop reading local fds while this much waits for the link. */
#define OUT_HIGH (4u * 1024 * 1024)
/* Largest datagram a relay receives from a local message socket. */
#define DGRAM_MAX (sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE)
/* A local message channel reads only with room for a whole MSG frame. */
#define MSG_FRAME_MAX (8u + 4u * SBX_LINK_MAX_IDS + DGRAM_MAX)

/* ---------------------------------------------------------------- queues */

int sbx_bq_put(struct bq *q, const void *d, size_t n)
{
  if (!n) /* an empty DATA frame: nothing to queue (and q->p may be NULL) */
    return 0;
  if (q->off && q->off + q->len + n > q->cap) {
    memmove(q->p, q->p + q->off, q->len);
    q->off = 0;
  }
  if (q->len + n > q->cap) {
    size_t cap = q->cap ? q->cap : 4096;
    while (cap < q->len + n)
      cap *= 2;
    uint8_t *p = realloc(q->p, cap);
    if (!p)
      return -1;
    q->p = p;
    q->cap = cap;
  }
  memcpy(q->p + q->off + q->len, d, n);
  q->len += n;
  return 0;
}

void sbx_bq_drop(struct bq *q, size_t n)
{
  q->off += n;
  q->len -= n;
  if (!q->len)
    q->off = 0;
}

void sbx_bq_free(struct bq *q)
{
  free(q->p);
  *q = (struct bq){0};
}

/* --------------------------------------------------------------- frames */

void sbx_relay_fail(struct relay *r, const char *why)
{
  if (!r->fail)
    r->fail = why;
}

int sbx_relay_emit(struct relay *r, uint8_t kind, uint8_t flags, uint32_t chan, const void *p,
                   size_t n, uint32_t aux)
{
  uint8_t h[HDR];
  sbx_link_put_hdr(h, kind, flags, chan, (uint32_t)n, aux);
  if (sbx_bq_put(&r->out, h, HDR) < 0 || (n && sbx_bq_put(&r->out, p, n) < 0)) {
    sbx_relay_fail(r, "out of memory");
    return -1;
  }
  return 0;
}

int sbx_relay_queue_msg(struct chan *c, const uint32_t *ids, uint32_t nids, const void *dgram,
                        size_t n)
{
  uint32_t len = (uint32_t)(4 + 4 * nids + n);
  if (sbx_bq_put(&c->q, &len, 4) < 0 || sbx_bq_put(&c->q, &nids, 4) < 0 ||
      (nids && sbx_bq_put(&c->q, ids, 4 * nids) < 0) || sbx_bq_put(&c->q, dgram, n) < 0)
    return -1;
  return 0;
}

/* ------------------------------------------------------------- channels */

static bool is_msg_chan(const struct chan *c)
{
  return c->klass == 0 || c->klass == SBX_LINK_CH_SEQ;
}

/* Whether each side reads / writes its local fd, per channel class (0:
 * the main channel); [0] the guest, [1] the host.  The guest reads a
 * CH_FILE_OUT back once, on the reply. */
static const struct {
  bool reads[2], writes[2];
} sides[] = {
    [0] = {{true, true}, {true, true}},
    [SBX_LINK_CH_IN] = {{false, true}, {true, false}},
    [SBX_LINK_CH_OUT] = {{true, false}, {false, true}},
    [SBX_LINK_CH_STREAM] = {{true, true}, {true, true}},
    [SBX_LINK_CH_SEQ] = {{true, true}, {true, true}},
    [SBX_LINK_CH_FILE_IN] = {{false, false}, {true, false}},
    [SBX_LINK_CH_FILE_OUT] = {{true, false}, {false, true}},
};

static bool reads_local(bool host, uint8_t klass)
{
  return klass < sizeof sides / sizeof sides[0] && sides[klass].reads[host];
}

static bool writes_local(bool host, uint8_t klass)
{
  return klass < sizeof sides / sizeof sides[0] && sides[klass].writes[host];
}

struct chan *sbx_relay_chan_init(struct relay *r, uint32_t id, uint8_t klass, int fd)
{
  struct chan *c = &r->ch[id];
  *c = (struct chan){.used = true, .klass = klass, .fd = fd, .far = -1};
  c->rd_done = !reads_local(r->host, klass);
  c->wr_done = !writes_local(r->host, klass);
  c->send_avail = c->recv_avail = SBX_LINK_WINDOW;
  return c;
}

static void chan_free(struct chan *c)
{
  if (c->fd >= 0)
    close(c->fd);
  if (c->far >= 0)
    close(c->far);
  sbx_bq_free(&c->q);
  *c = (struct chan){.fd = -1, .far = -1};
}

/* Tells the peer what this side has written locally, so it may send more:
 * in quarters of the window, or whenever the queue has drained. */
static void maybe_credit(struct relay *r, struct chan *c)
{
  /* Nothing follows this side's CLOSE: the peer ends the link on any frame
   * for a channel it was told is closed (frame_on_chan), and DATA it sent
   * before it saw the CLOSE (dropped here, wr_done) needs no credit back. */
  if (c->sent_close)
    return;
  if (!c->consumed || (c->consumed < SBX_LINK_WINDOW / 4 && c->q.len))
    return;
  if (sbx_relay_emit(r, SBX_LINK_CREDIT, 0, (uint32_t)(c - r->ch), NULL, 0, c->consumed) == 0) {
    c->recv_avail += c->consumed;
    c->consumed = 0;
  }
}

/* Moves a channel on once something changed: shuts the local write side
 * after the peer's EOF has drained, closes the local fd when this side is
 * done with it, says CLOSE, and forgets the id once both sides have. */
void sbx_relay_settle(struct relay *r, struct chan *c)
{
  uint32_t id = (uint32_t)(c - r->ch);
  if (!c->wr_done && c->peer_eof && !c->q.len) {
    if (c->klass == SBX_LINK_CH_STREAM && c->fd >= 0)
      shutdown(c->fd, SHUT_WR);
    c->wr_done = true;
  }
  if (c->got_close)
    c->rd_done = true; /* nobody to send it to */
  if (id == 0)
    return; /* the main channel ends the relay instead */
  bool forwarded = c->far < 0;
  if (c->rd_done && c->wr_done && forwarded && !c->sent_close) {
    if (c->fd >= 0)
      close(c->fd);
    c->fd = -1;
    if (sbx_relay_emit(r, SBX_LINK_CLOSE, 0, id, NULL, 0, 0) == 0)
      c->sent_close = true;
  }
  if (c->sent_close && c->got_close)
    chan_free(c);
}

/* -------------------------------------------------------- local writes */

/* Writes queued bytes / datagrams to the local fd. */
static void write_stream(struct relay *r, struct chan *c)
{
  while (c->q.len) {
    ssize_t n = write(c->fd, c->q.p + c->q.off, c->q.len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      break;
    if (n <= 0) { /* the reader is gone: what the peer sends is dropped */
      c->consumed += (uint32_t)c->q.len;
      sbx_bq_drop(&c->q, c->q.len);
      c->wr_done = true;
      break;
    }
    sbx_bq_drop(&c->q, (size_t)n);
    c->consumed += (uint32_t)n;
  }
  maybe_credit(r, c);
}

static int send_dgram(int fd, const uint8_t *d, size_t n, const int *fds, size_t nfds)
{
  struct iovec iov = {(void *)d, n};
  return sbx_sendmsg_fds(fd, &iov, 1, fds, nfds, MSG_DONTWAIT) < 0 ? -1 : 0;
}

/* One queued record: its datagram, with the far ends of the channels it
 * names (guest side; they are sbx-init's now, so this side closes its
 * copies).  0 sent, 1 try later, -1 the socket is gone. */
static int write_record(struct relay *r, struct chan *c)
{
  uint32_t len, nids;
  memcpy(&len, c->q.p + c->q.off, 4);
  memcpy(&nids, c->q.p + c->q.off + 4, 4);
  const uint8_t *ids = c->q.p + c->q.off + 8;
  int fds[SBX_LINK_MAX_IDS];
  for (uint32_t i = 0; i < nids; i++) {
    uint32_t id;
    memcpy(&id, ids + 4 * i, 4);
    fds[i] = r->ch[id].far;
  }
  const uint8_t *d = ids + 4 * nids;
  if (send_dgram(c->fd, d, len - 4 - 4 * nids, fds, nids) < 0)
    return errno == EAGAIN ? 1 : -1;
  for (uint32_t i = 0; i < nids; i++) {
    uint32_t id;
    memcpy(&id, ids + 4 * i, 4);
    close(r->ch[id].far);
    r->ch[id].far = -1;
    sbx_relay_settle(r, &r->ch[id]);
  }
  return 0;
}

/* Drops a message channel's queued records when its socket is gone: the
 * channels they name are never forwarded, so their far ends close here
 * and they settle.  No credit: CLOSE follows at once. */
static void drop_records(struct relay *r, struct chan *c)
{
  while (c->q.len) {
    uint32_t len, nids;
    memcpy(&len, c->q.p + c->q.off, 4);
    memcpy(&nids, c->q.p + c->q.off + 4, 4);
    for (uint32_t i = 0; i < nids; i++) {
      uint32_t id;
      memcpy(&id, c->q.p + c->q.off + 8 + 4 * i, 4);
      if (r->ch[id].used && r->ch[id].far >= 0) {
        close(r->ch[id].far);
        r->ch[id].far = -1;
        sbx_relay_settle(r, &r->ch[id]);
      }
    }
    sbx_bq_drop(&c->q, 4 + len);
  }
}

static void write_msgs(struct relay *r, struct chan *c)
{
  while (c->q.len) {
    uint32_t len;
    memcpy(&len, c->q.p + c->q.off, 4);
    int s = write_record(r, c);
    if (s == 1)
      break;
    if (s < 0) { /* the socket is gone: this and the rest are dropped */
      c->wr_done = true;
      drop_records(r, c);
      break;
    }
    sbx_bq_drop(&c->q, 4 + len);
    c->consumed += len;
  }
  maybe_credit(r, c);
}

/* --------------------------------------------------------- local reads */

static void read_stream(struct relay *r, struct chan *c)
{
  uint8_t buf[SBX_LINK_DATA_CHUNK];
  size_t want = c->send_avail < sizeof buf ? c->send_avail : sizeof buf;
  if (!want)
    return;
  ssize_t n = read(c->fd, buf, want);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  uint32_t id = (uint32_t)(c - r->ch);
  if (n <= 0) { /* EOF, or an error that ends this direction */
    c->rd_done = true;
    sbx_relay_emit(r, SBX_LINK_EOF, 0, id, NULL, 0, 0);
    return;
  }
  c->send_avail -= (uint32_t)n;
  sbx_relay_emit(r, SBX_LINK_DATA, 0, id, buf, (size_t)n, 0);
}

static void read_msg(struct relay *r, struct chan *c)
{
  static uint8_t buf[DGRAM_MAX];
  int fds[SBX_PROTO_MAX_FDS];
  size_t nfds = SBX_PROTO_MAX_FDS;
  ssize_t n = sbx_proto_recv(c->fd, buf, sizeof buf, fds, &nfds);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  uint32_t id = (uint32_t)(c - r->ch);
  if (n == 0) { /* a message socket closed: nothing can be written either */
    c->rd_done = c->wr_done = true;
    drop_records(r, c);
    return;
  }
  if (n < 0)
    return; /* a malformed datagram (proto.c closed its fds): dropped */
  if (r->host) {
    sbx_relay_host_msg(r, c, buf, (size_t)n, fds, nfds);
    return;
  }
  for (size_t i = 0; i < nfds; i++) /* fd-in: nothing leaves the guest */
    close(fds[i]);
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  if (id == 0)
    sbx_relay_guest_flush_files(r, h.id);
  uint32_t nids = 0;
  uint8_t frame[8 + DGRAM_MAX];
  memcpy(frame, &nids, 4);
  memcpy(frame + 4, buf, (size_t)n);
  c->send_avail -= (uint32_t)(4 + n);
  sbx_relay_emit(r, SBX_LINK_MSG, 0, id, frame, 4 + (size_t)n, 0);
}

static bool wants_read(const struct relay *r, const struct chan *c)
{
  if (c->rd_done || c->fd < 0 || r->out.len > OUT_HIGH)
    return false;
  if (c->klass == SBX_LINK_CH_FILE_OUT)
    return false; /* read once, on the reply */
  return is_msg_chan(c) ? c->send_avail >= MSG_FRAME_MAX : c->send_avail > 0;
}

/* ------------------------------------------------------- frames in */

static int frame_msg(struct relay *r, struct chan *c, const uint8_t *p, uint32_t len)
{
  uint32_t nids;
  if (!is_msg_chan(c) || len < 4 + sizeof(struct sbx_proto_hdr))
    return -1;
  memcpy(&nids, p, 4);
  if (nids > SBX_LINK_MAX_IDS || (r->host && nids) ||
      len < 4 + 4 * nids + sizeof(struct sbx_proto_hdr))
    return -1;
  const uint8_t *d = p + 4 + 4 * nids;
  struct sbx_proto_hdr h;
  memcpy(&h, d, sizeof h);
  for (uint32_t i = 0; i < nids; i++) {
    uint32_t id;
    memcpy(&id, p + 4 + 4 * i, 4);
    if (id == 0 || id >= SBX_LINK_MAX_CHANNELS || !r->ch[id].used || r->ch[id].far < 0)
      return -1;
    if (r->ch[id].klass == SBX_LINK_CH_FILE_OUT && c == r->ch) {
      r->ch[id].req_id = h.id;
      r->ch[id].has_req = true;
    }
  }
  if (c->wr_done ||
      (!r->host && c == r->ch && sbx_relay_guest_answer(r, d, len - 4 - 4 * nids))) {
    /* nobody reads it any more, or the relay answered it: consumed (the
     * channels it names are never forwarded, so they close) */
    for (uint32_t i = 0; i < nids; i++) {
      uint32_t id;
      memcpy(&id, p + 4 + 4 * i, 4);
      close(r->ch[id].far);
      r->ch[id].far = -1;
      sbx_relay_settle(r, &r->ch[id]);
    }
    c->consumed += len;
    maybe_credit(r, c);
    return 0;
  }
  if (sbx_relay_queue_msg(c, (const uint32_t *)(const void *)(p + 4), nids, d,
                          len - 4 - 4 * nids) < 0) {
    sbx_relay_fail(r, "out of memory");
    return -1;
  }
  return 0;
}

static int frame_file_data(struct relay *r, struct chan *c, const uint8_t *p, uint32_t len)
{
  if (c->off + len > c->size)
    return -1;
  ssize_t n = pwrite(c->fd, p, len, (off_t)c->off);
  if (n != (ssize_t)len && !r->host)
    sbx_relay_fail(r, "cannot fill a file for sbx-init");
  c->off += len;
  return 0;
}

static int frame_data(struct relay *r, struct chan *c, const uint8_t *p, uint32_t len)
{
  if (c->peer_eof)
    return -1;
  if (c->klass == SBX_LINK_CH_FILE_IN || c->klass == SBX_LINK_CH_FILE_OUT) {
    if (!writes_local(r->host, c->klass))
      return -1;
    return frame_file_data(r, c, p, len);
  }
  if (is_msg_chan(c) || !writes_local(r->host, c->klass))
    return -1;
  if (c->wr_done) {
    c->consumed += len;
    maybe_credit(r, c);
    return 0;
  }
  if (sbx_bq_put(&c->q, p, len) < 0) {
    sbx_relay_fail(r, "out of memory");
    return -1;
  }
  return 0;
}

/* Window check: the peer may send at most what this side granted. */
static int charge(struct chan *c, uint32_t len)
{
  if (c->klass == SBX_LINK_CH_FILE_IN || c->klass == SBX_LINK_CH_FILE_OUT)
    return 0; /* bounded by the size instead */
  if (len > c->recv_avail)
    return -1;
  c->recv_avail -= len;
  return 0;
}

static int frame_on_chan(struct relay *r, const struct sbx_link_hdr *h, const uint8_t *p)
{
  if (h->chan >= SBX_LINK_MAX_CHANNELS || !r->ch[h->chan].used || r->ch[h->chan].got_close)
    return -1;
  struct chan *c = &r->ch[h->chan];
  switch (h->kind) {
  case SBX_LINK_MSG:
    if (charge(c, h->len) < 0 || frame_msg(r, c, p, h->len) < 0)
      return -1;
    break;
  case SBX_LINK_DATA:
    if (charge(c, h->len) < 0 || frame_data(r, c, p, h->len) < 0)
      return -1;
    break;
  case SBX_LINK_EOF:
    c->peer_eof = true;
    break;
  case SBX_LINK_CLOSE:
    if (h->chan == 0)
      return -1;
    c->peer_eof = c->got_close = true;
    break;
  case SBX_LINK_CREDIT:
    if ((uint64_t)c->send_avail + h->aux > SBX_LINK_WINDOW)
      return -1;
    c->send_avail += h->aux;
    break;
  default:
    return -1;
  }
  sbx_relay_settle(r, c);
  return 0;
}

static int frame_in(struct relay *r, const struct sbx_link_hdr *h, const uint8_t *p)
{
  if (h->kind == SBX_LINK_OPEN) {
    uint64_t size;
    if (r->host || h->len != 8)
      return -1;
    memcpy(&size, p, 8);
    return sbx_relay_guest_open(r, h->chan, h->flags, size);
  }
  if (h->len &&
      (h->kind == SBX_LINK_EOF || h->kind == SBX_LINK_CLOSE || h->kind == SBX_LINK_CREDIT))
    return -1;
  if (h->aux && h->kind != SBX_LINK_CREDIT)
    return -1;
  return frame_on_chan(r, h, p);
}

void sbx_relay_input(struct relay *r, const uint8_t *buf, size_t n)
{
  size_t at = 0;
  while (at < n && !r->fail) {
    at += sbx_link_feed(&r->rd, buf + at, n - at);
    struct sbx_link_hdr h;
    const uint8_t *p;
    int s;
    while (!r->fail && (s = sbx_link_next(&r->rd, &h, &p)) != 0)
      if (s < 0 || frame_in(r, &h, p) < 0)
        sbx_relay_fail(r, "the peer broke the link protocol");
  }
}

static void read_link(struct relay *r)
{
  uint8_t buf[64 * 1024];
  ssize_t n = read(r->link, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) { /* a peer that closed with bytes unread resets the socket */
    sbx_relay_fail(r, n == 0 || errno == ECONNRESET ? "link closed" : "link read failed");
    return;
  }
  sbx_relay_input(r, buf, (size_t)n);
}

static void write_link(struct relay *r)
{
  while (r->out.len) {
    ssize_t n = write(r->link, r->out.p + r->out.off, r->out.len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0) { /* the peer went first (EPIPE, ECONNRESET): it ended the link */
      sbx_relay_fail(r, n < 0 && (errno == EPIPE || errno == ECONNRESET) ? "link closed"
                                                                         : "link write failed");
      return;
    }
    sbx_bq_drop(&r->out, (size_t)n);
  }
}

/* ------------------------------------------------------------ the loop */

static void on_local(struct relay *r, struct chan *c, short rev)
{
  if (is_msg_chan(c) && (rev & (POLLHUP | POLLERR)) && !(rev & POLLIN) && !wants_read(r, c)) {
    c->rd_done = c->wr_done = true; /* gone while the peer withheld credit */
    drop_records(r, c);
  }
  if (c->fd >= 0 && c->q.len && (rev & (POLLOUT | POLLERR | POLLHUP)))
    (is_msg_chan(c) ? write_msgs : write_stream)(r, c);
  if (c->fd >= 0 && wants_read(r, c) && (rev & (POLLIN | POLLHUP | POLLERR)))
    (is_msg_chan(c) ? read_msg : read_stream)(r, c);
  if (c->fd >= 0 && (c->klass == SBX_LINK_CH_IN || c->klass == SBX_LINK_CH_OUT) && c->rd_done &&
      !c->wr_done && (rev & POLLERR))
    c->wr_done = true; /* a pipe write end whose reader is gone: what comes is dropped */
  if (c->used)
    sbx_relay_settle(r, c);
}

static short events_of(const struct relay *r, const struct chan *c)
{
  short ev = 0;
  if (wants_read(r, c))
    ev |= POLLIN;
  if (c->q.len)
    ev |= POLLOUT;
  return ev;
}

static int poll_once(struct relay *r, struct pollfd *pf, uint32_t *idx)
{
  size_t n = 1;
  pf[0] = (struct pollfd){.fd = r->link, .events = POLLIN | (r->out.len ? POLLOUT : 0)};
  for (uint32_t i = 0; i < SBX_LINK_MAX_CHANNELS; i++) {
    struct chan *c = &r->ch[i];
    if (!c->used || c->fd < 0)
      continue;
    short ev = events_of(r, c);
    /* A pipe or stream read end with nothing wanted would report POLLHUP
     * on every round (a spin while the peer withholds credit, with bytes
     * still to deliver): left out.  A message socket stays in, since its
     * POLLHUP means the other side is gone (the daemon destroyed the
     * sandbox, or an exec's ctl closed); so does a pipe write end, for the
     * POLLERR of its reader's close. */
    if (!ev && !c->rd_done && !is_msg_chan(c))
      continue;
    idx[n] = i;
    pf[n++] = (struct pollfd){.fd = c->fd, .events = ev};
  }
  size_t psi = n;
  if (r->pressure_fd >= 0)
    pf[n++] = (struct pollfd){.fd = r->pressure_fd, .events = POLLPRI};
  int k = poll(pf, n, -1);
  if (k < 0 && errno != EINTR) {
    sbx_relay_fail(r, "poll failed");
    return -1;
  }
  if (k <= 0)
    return 0;
  if (psi < n && (pf[psi].revents & (POLLPRI | POLLERR)))
    sbx_relay_guest_pressure(r);
  n = psi;
  if (pf[0].revents & POLLOUT)
    write_link(r);
  if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
    read_link(r);
  for (size_t j = 1; j < n && !r->fail; j++)
    if (pf[j].revents && r->ch[idx[j]].used)
      on_local(r, &r->ch[idx[j]], pf[j].revents);
  if (r->out.len && !r->fail)
    write_link(r);
  return 0;
}

struct relay *sbx_relay_new(int chan_fd, int link_fd, bool host)
{
  struct relay *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->host = host;
  r->link = link_fd;
  r->next_id = 1;
  r->vmstat_fd = host ? -1 : open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
  r->pressure_fd = -1;
  /* Only as a guest's PID 1: the test harnesses run the guest side on
   * the host, whose processes are not the relay's to kill. */
  if (!host && getpid() == 1)
    sbx_relay_guest_pressure_arm(r);
  for (uint32_t i = 0; i < SBX_LINK_MAX_CHANNELS; i++)
    r->ch[i].fd = r->ch[i].far = -1;
  fcntl(chan_fd, F_SETFL, fcntl(chan_fd, F_GETFL) | O_NONBLOCK);
  fcntl(link_fd, F_SETFL, fcntl(link_fd, F_GETFL) | O_NONBLOCK);
  sbx_relay_chan_init(r, 0, 0, chan_fd);
  return r;
}

void sbx_relay_free(struct relay *r)
{
  for (uint32_t i = 0; i < SBX_LINK_MAX_CHANNELS; i++)
    if (r->ch[i].used)
      chan_free(&r->ch[i]);
  sbx_bq_free(&r->out);
  if (r->vmstat_fd >= 0)
    close(r->vmstat_fd);
  if (r->pressure_fd >= 0)
    close(r->pressure_fd);
  free(r);
}

int sbx_relay_run(int chan_fd, int link_fd, bool host)
{
  struct relay *r = sbx_relay_new(chan_fd, link_fd, host);
  struct pollfd *pf = calloc(SBX_LINK_MAX_CHANNELS + 2, sizeof *pf);
  uint32_t *idx = calloc(SBX_LINK_MAX_CHANNELS + 1, sizeof *idx);
  if (!r || !pf || !idx) {
    fprintf(stderr, "sbx-vm relay: out of memory\n");
    return 1;
  }
  while (!r->fail && !r->ch[0].rd_done)
    poll_once(r, pf, idx);
  if (r->out.len && !r->fail)
    write_link(r);
  bool clean = !r->fail || !strcmp(r->fail, "link closed");
  if (!clean)
    fprintf(stderr, "sbx-vm relay: %s\n", r->fail);
  sbx_relay_free(r);
  free(pf);
  free(idx);
  return clean ? 0 : 1;
}
