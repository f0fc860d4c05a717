/* relay_host.c — the host side of a microVM link: what each fd the daemon
 * passes with a message is (fstat, the socket type, the message type),
 * the channel that stands for it on the link, and a file's content sent
 * ahead of the message that names it.
 *
 * The daemon's fds tell their own direction: a pipe read end is exec
 * stdin (bytes go in), a write end is stdout/stderr/READ_TO/WATCH (bytes
 * come out), a stream socket is WRITE_FROM/CONNECT, a seqpacket socket an
 * exec's ctl.  A regular file (memfd) goes in with EXEC (its payload) and
 * is filled by sbx-init for every other request (records: LIST, GLOB,
 * STAT, READLINK, STATFS; init/proto.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/proto.h"
#include "vm/relay_int.h"

static int classify(int fd, uint32_t msg_type, uint8_t *klass, uint64_t *size)
{
  struct stat st;
  *size = 0;
  if (fstat(fd, &st) < 0)
    return -1;
  if (S_ISFIFO(st.st_mode)) {
    int acc = fcntl(fd, F_GETFL) & O_ACCMODE;
    *klass = acc == O_RDONLY ? SBX_LINK_CH_IN : SBX_LINK_CH_OUT;
    return acc == O_RDWR ? -1 : 0;
  }
  if (S_ISSOCK(st.st_mode)) {
    int type = 0;
    socklen_t l = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0)
      return -1;
    *klass = type == SOCK_STREAM ? SBX_LINK_CH_STREAM : SBX_LINK_CH_SEQ;
    return type == SOCK_STREAM || type == SOCK_SEQPACKET ? 0 : -1;
  }
  if (S_ISREG(st.st_mode) && (uint64_t)st.st_size <= SBX_LINK_MAX_FILE) {
    *klass = msg_type == SBX_MSG_EXEC ? SBX_LINK_CH_FILE_IN : SBX_LINK_CH_FILE_OUT;
    *size = (uint64_t)st.st_size;
    return 0;
  }
  return -1;
}

/* A free channel id, round robin so an id is not reused at once. */
static uint32_t alloc_id(struct relay *r)
{
  for (uint32_t k = 1; k < SBX_LINK_MAX_CHANNELS; k++) {
    uint32_t id = r->next_id;
    r->next_id = r->next_id % (SBX_LINK_MAX_CHANNELS - 1) + 1;
    if (!r->ch[id].used)
      return id;
  }
  return 0;
}

static int send_file_in(struct relay *r, uint32_t id, int fd, uint64_t size)
{
  uint8_t buf[SBX_LINK_DATA_CHUNK];
  for (uint64_t at = 0; at < size;) {
    size_t want = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
    ssize_t n = pread(fd, buf, want, (off_t)at);
    if (n <= 0)
      break; /* the file shrank: the guest's copy ends here */
    if (sbx_relay_emit(r, SBX_LINK_DATA, 0, id, buf, (size_t)n, 0) < 0)
      return -1;
    at += (uint64_t)n;
  }
  return sbx_relay_emit(r, SBX_LINK_EOF, 0, id, NULL, 0, 0);
}

static int open_chan(struct relay *r, uint32_t id, uint8_t klass, int fd, uint64_t size)
{
  struct chan *c = sbx_relay_chan_init(r, id, klass, fd);
  c->size = size;
  if (klass != SBX_LINK_CH_FILE_IN && klass != SBX_LINK_CH_FILE_OUT)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (sbx_relay_emit(r, SBX_LINK_OPEN, klass, id, &size, 8, 0) < 0)
    return -1;
  if (klass == SBX_LINK_CH_FILE_IN && send_file_in(r, id, fd, size) < 0)
    return -1;
  sbx_relay_settle(r, c); /* a file that went in is done on this side */
  return 0;
}

/* The daemon's request cannot cross (an fd of a kind the link does not
 * carry, or no channel id left): its fds are closed and a request on the
 * main channel gets ERR{e} from here, so the daemon does not wait. */
static int refuse(struct relay *r, struct chan *c, const struct sbx_proto_hdr *h, int *fds,
                  size_t nfds, int e)
{
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
  if (c != r->ch || h->type == SBX_MSG_EXEC)
    return 0; /* EXEC: its ctl socket closed, the daemon sees the exec fail */
  struct {
    struct sbx_proto_hdr h;
    int32_t e;
  } err = {{.type = SBX_MSG_ERR, .id = h->id, .len = 4}, e};
  if (sbx_relay_queue_msg(c, NULL, 0, &err, sizeof err) < 0)
    sbx_relay_fail(r, "out of memory");
  return 0;
}

int sbx_relay_host_msg(struct relay *r, struct chan *c, const uint8_t *dgram, size_t n, int *fds,
                       size_t nfds)
{
  struct sbx_proto_hdr h;
  memcpy(&h, dgram, sizeof h);
  uint8_t klass[SBX_PROTO_MAX_FDS];
  uint64_t size[SBX_PROTO_MAX_FDS];
  uint32_t ids[SBX_PROTO_MAX_FDS];
  for (size_t i = 0; i < nfds; i++)
    if (classify(fds[i], h.type, &klass[i], &size[i]) < 0)
      return refuse(r, c, &h, fds, nfds, EPROTO);
  for (size_t i = 0; i < nfds; i++) {
    ids[i] = alloc_id(r);
    /* Reserved now, so the next alloc_id skips it. */
    if (ids[i])
      r->ch[ids[i]].used = true;
  }
  for (size_t i = 0; i < nfds; i++)
    if (!ids[i]) {
      for (size_t j = 0; j < nfds; j++)
        if (ids[j])
          r->ch[ids[j]].used = false;
      return refuse(r, c, &h, fds, nfds, EMFILE);
    }
  for (size_t i = 0; i < nfds; i++)
    if (open_chan(r, ids[i], klass[i], fds[i], size[i]) < 0)
      return -1;
  uint8_t frame[4 + 4 * SBX_PROTO_MAX_FDS + sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
  uint32_t nids = (uint32_t)nfds;
  memcpy(frame, &nids, 4);
  memcpy(frame + 4, ids, 4 * nfds);
  memcpy(frame + 4 + 4 * nfds, dgram, n);
  size_t len = 4 + 4 * nfds + n;
  c->send_avail -= (uint32_t)len;
  return sbx_relay_emit(r, SBX_LINK_MSG, 0, (uint32_t)(c - r->ch), frame, len, 0);
}
