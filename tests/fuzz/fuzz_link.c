/* fuzz_link.c — the relay engine's reader of a microVM link (vm/link.h,
 * vm/relay.c).  The host relay (`sbx-vm relay`) must take every byte the
 * guest sends as hostile: a malformed frame ends the link (r->fail), and
 * nothing crashes, writes out of bounds, grows without bound or blocks.
 * The guest relay reads the host's frames with the same code and makes
 * objects (pipes, socketpairs, memfds) for each OPEN, so it is fuzzed too.
 *
 * Per input: a SOCK_SEQPACKET socketpair for channel 0 (the daemon's
 * socket, or sbx-init's), a SOCK_STREAM socketpair for the link,
 * sbx_relay_new(); on the host, one daemon datagram through
 * sbx_relay_host_msg() with the fds the input picks, so the link bytes
 * meet open channels of every class (the poll loop that would read it from
 * the daemon is not run); then the link bytes through sbx_relay_input()
 * in 1–3 slices (the incremental reader), the invariants below, and
 * sbx_relay_free().
 *
 * Input: a 4-byte header, then the link bytes (frames as link.h).
 *   byte 0  bit 0: guest relay (host=false); bits 1-2: slices (0: one,
 *           1: two, 2-3: three); bit 3: the windows start short, by
 *           (bits 4-7 + 1) × 16 KiB, as if that much were in flight each
 *           way (so a short input reaches a window's end and a CREDIT
 *           can be valid)
 *   byte 1  host: the fds passed with the datagram, bit 0 a pipe read end
 *           (CH_IN), 1 a pipe write end (CH_OUT), 2 a stream socket
 *           (CH_STREAM), 3 a seqpacket socket (CH_SEQ), 4 a memfd; the
 *           channels get ids 1, 2, … in that order
 *   byte 2  host: bit 0 the datagram is EXEC (the memfd is CH_FILE_IN,
 *           its content goes out as DATA) else STAT (CH_FILE_OUT, the
 *           guest fills it); bits 1-7: the memfd's size in 512-byte units
 *   byte 3  where the slices split
 *
 * Checked after the input: the frames the relay queued for the link parse,
 * name no channel after this side's CLOSE of it, and grew by at most what
 * the input can account for (a CREDIT or CLOSE per frame in); every channel's queue is within its window (plus the 4-byte record
 * prefixes of a message channel); no window was granted past
 * SBX_LINK_WINDOW; a file channel never moved past its size; and once the
 * relay and the harness's ends are closed, the process holds exactly the
 * fds it held before (/proc/self/fd, every run).
 *
 * Guest OPENs name a memfd size up to SBX_LINK_MAX_FILE (64 MiB) each:
 * ftruncate() leaves it sparse, pages are used only by the DATA written,
 * which the input's length bounds (checked by hand: 1000 OPENs of 64 MiB
 * files with 100 bytes of DATA each raise Shmem by 1000 pages, 4 MB). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "init/proto.h"
#include "vm/relay_int.h"

enum { HDR_BYTES = 4 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

/* Open fds of this process (the directory's own fd included, both times). */
static int count_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    abort();
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static void pair(int type, int p[2])
{
  if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, p) < 0)
    abort();
}

/* The daemon's datagram on channel 0 with the fds byte 1 picks: the relay
 * takes the fds (its channels close them); the far ends go to keep. */
static void host_open(struct relay *r, uint8_t mask, uint8_t b2, int *keep, size_t *nkeep)
{
  int fds[SBX_PROTO_MAX_FDS], p[2];
  size_t nfds = 0;
  bool exec = b2 & 1;
  if (mask & 1) { /* the relay gets the read end: exec stdin */
    if (pipe2(p, O_CLOEXEC) < 0)
      abort();
    fds[nfds++] = p[0], keep[(*nkeep)++] = p[1];
  }
  if (mask & 2) { /* the write end: stdout */
    if (pipe2(p, O_CLOEXEC) < 0)
      abort();
    fds[nfds++] = p[1], keep[(*nkeep)++] = p[0];
  }
  if (mask & 4) {
    pair(SOCK_STREAM, p);
    fds[nfds++] = p[0], keep[(*nkeep)++] = p[1];
  }
  if (mask & 8) {
    pair(SOCK_SEQPACKET, p);
    fds[nfds++] = p[0], keep[(*nkeep)++] = p[1];
  }
  if (mask & 16) {
    int m = memfd_create("fuzz-link", MFD_CLOEXEC);
    size_t size = (size_t)(b2 >> 1) * 512;
    if (m < 0 || ftruncate(m, (off_t)size) < 0)
      abort();
    if (exec) { /* a payload with content, so DATA goes out */
      static uint8_t fill[64 * 1024];
      if (!fill[0])
        memset(fill, 'x', sizeof fill);
      if (pwrite(m, fill, size, 0) != (ssize_t)size)
        abort();
    }
    fds[nfds++] = m;
  }
  struct sbx_proto_hdr h = {.type = exec ? SBX_MSG_EXEC : SBX_MSG_STAT, .id = 7};
  sbx_relay_host_msg(r, &r->ch[0], (const uint8_t *)&h, sizeof h, fds, nfds);
}

/* The windows as if `w` bytes were in flight each way on every channel. */
static void shorten_windows(struct relay *r, uint32_t w)
{
  for (uint32_t i = 0; i < SBX_LINK_MAX_CHANNELS; i++)
    if (r->ch[i].used) {
      r->ch[i].recv_avail = SBX_LINK_WINDOW - w;
      r->ch[i].send_avail = SBX_LINK_WINDOW - w;
    }
}

/* What the relay queued for the peer parses as frames, and no frame names
 * a channel after this side's CLOSE of it (the peer would end the link:
 * relay.c frame_on_chan). */
static void check_out(const struct relay *r)
{
  static bool closed[SBX_LINK_MAX_CHANNELS];
  memset(closed, 0, sizeof closed);
  if (!r->out.len)
    return; /* r->out.p may be NULL */
  const uint8_t *p = r->out.p + r->out.off, *end = p + r->out.len;
  while (p < end) {
    uint8_t kind = p[0];
    uint16_t zero;
    uint32_t chan, len;
    if (end - p < 16)
      abort();
    memcpy(&zero, p + 2, 2);
    memcpy(&chan, p + 4, 4);
    memcpy(&len, p + 8, 4);
    if (kind < SBX_LINK_MSG || kind > SBX_LINK_CREDIT || zero || chan >= SBX_LINK_MAX_CHANNELS ||
        len > SBX_LINK_MAX_PAYLOAD || (size_t)(end - p) - 16 < len)
      abort();
    if (kind == SBX_LINK_OPEN)
      closed[chan] = false; /* an id the host reuses */
    else if (closed[chan])
      abort();
    if (kind == SBX_LINK_CLOSE)
      closed[chan] = true;
    p += 16 + len;
  }
}

static void check(const struct relay *r, size_t out_before, size_t n)
{
  check_out(r);
  /* Each frame in is ≥ 16 bytes and makes at most a CREDIT, and each
   * channel one CLOSE. */
  if (r->out.len > out_before + n + 16u * SBX_LINK_MAX_CHANNELS)
    abort();
  for (uint32_t i = 0; i < SBX_LINK_MAX_CHANNELS; i++) {
    const struct chan *c = &r->ch[i];
    if (!c->used)
      continue;
    /* A message record is ≥ 20 bytes charged, + 4 of prefix in the queue. */
    if (c->q.len > SBX_LINK_WINDOW + SBX_LINK_WINDOW / 4)
      abort();
    if ((uint64_t)c->recv_avail + c->consumed > SBX_LINK_WINDOW ||
        c->send_avail > SBX_LINK_WINDOW)
      abort();
    if ((c->klass == SBX_LINK_CH_FILE_IN || c->klass == SBX_LINK_CH_FILE_OUT) &&
        (c->off > c->size || c->size > SBX_LINK_MAX_FILE))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < HDR_BYTES)
    return 0;
  int fds_before = count_fds();
  bool host = !(data[0] & 1);
  int chan[2], link[2];
  pair(SOCK_SEQPACKET, chan);
  pair(SOCK_STREAM, link);
  struct relay *r = sbx_relay_new(chan[0], link[0], host);
  if (!r)
    abort();
  int keep[SBX_PROTO_MAX_FDS];
  size_t nkeep = 0;
  if (host)
    host_open(r, data[1], data[2], keep, &nkeep);
  if (data[0] & 8)
    shorten_windows(r, ((uint32_t)(data[0] >> 4) + 1) * 16 * 1024);
  size_t out_before = r->out.len;

  const uint8_t *in = data + HDR_BYTES;
  size_t n = size - HDR_BYTES;
  unsigned slices = (data[0] >> 1) & 3;
  size_t cut1 = slices ? n * (data[3] & 15) / 16 : n;
  size_t cut2 = slices >= 2 ? cut1 + (n - cut1) * (data[3] >> 4) / 16 : n;
  sbx_relay_input(r, in, cut1);
  sbx_relay_input(r, in + cut1, cut2 - cut1);
  sbx_relay_input(r, in + cut2, n - cut2);
  check(r, out_before, n);

  sbx_relay_free(r); /* closes chan[0] with channel 0; the link is ours */
  close(chan[1]);
  close(link[0]);
  close(link[1]);
  for (size_t i = 0; i < nkeep; i++)
    close(keep[i]);
  if (count_fds() != fds_before)
    abort(); /* an fd the relay opened outlived it */
  return 0;
}
