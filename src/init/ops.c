/* ops.c — sbx-init's requests on the main channel: one const table,
 * indexed by message type, says for each what its payload holds (a path,
 * a second string, u32/u64 fields), which fd it carries (fd-in) and which
 * function serves it; the payload is parsed and checked once, here, before
 * any of them runs.  Also the replies and the fd checks every request
 * uses.  EXEC, whose payload may come in a memfd, is main.c's. */
#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "init/init.h"

/* The second string of a request. */
enum second { NO_SECOND, SECOND_PATH /* MOVE's "to" */, SECOND_TARGET /* SYMLINK's target */ };

struct op {
  sbxi_op_fn *run;
  /* Or, for a payload of another shape (CONNECT, PING): the raw request. */
  void (*raw)(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r, int *fds,
              size_t nfds);
  enum second second;
  uint8_t nu32; /* u32 fields after the strings: 0–2 */
  bool u64;     /* and a u64 */
  unsigned fd;  /* the file type of the fd it carries (S_IFREG, S_IFIFO, S_IFSOCK), 0: none */
};

static void ping(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                 int *fds, size_t nfds)
{
  (void)r;
  sbxi_close_fds(fds, nfds);
  sbx_proto_send(in->chan, SBX_MSG_PONG, h->id, 0, NULL, 0, NULL, 0);
}

static const struct op ops[] = {
    [SBX_MSG_PING] = {.raw = ping},
    [SBX_MSG_OPEN_READ] = {.run = sbxi_op_open_read},
    [SBX_MSG_OPEN_WRITE] = {.run = sbxi_op_open_write, .nu32 = 2},
    [SBX_MSG_LIST] = {.run = sbxi_op_list, .nu32 = 1, .fd = S_IFREG},
    [SBX_MSG_REMOVE] = {.run = sbxi_op_remove},
    [SBX_MSG_GLOB] = {.run = sbxi_op_glob, .nu32 = 1, .fd = S_IFREG},
    [SBX_MSG_STAT] = {.run = sbxi_op_stat, .fd = S_IFREG},
    [SBX_MSG_STATFS] = {.run = sbxi_op_statfs, .fd = S_IFREG},
    [SBX_MSG_MKDIR] = {.run = sbxi_op_mkdir, .nu32 = 2},
    [SBX_MSG_MOVE] = {.run = sbxi_op_move, .second = SECOND_PATH, .nu32 = 1},
    [SBX_MSG_READLINK] = {.run = sbxi_op_readlink, .fd = S_IFREG},
    [SBX_MSG_SYMLINK] = {.run = sbxi_op_symlink, .second = SECOND_TARGET},
    [SBX_MSG_WATCH] = {.run = sbxi_op_watch, .nu32 = 2, .fd = S_IFIFO},
    [SBX_MSG_CONNECT] = {.raw = sbxi_connect},
    [SBX_MSG_READ_TO] = {.run = sbxi_op_read_to, .fd = S_IFIFO},
    [SBX_MSG_WRITE_FROM] = {.run = sbxi_op_write_from, .nu32 = 2, .u64 = true, .fd = S_IFSOCK},
};

static bool second_ok(enum second k, const char *s)
{
  if (k == SECOND_PATH)
    return s && sbx_proto_path_ok(s);
  return s && *s && strnlen(s, SBX_PROTO_MAX_PATH) < SBX_PROTO_MAX_PATH;
}

/* The payload as op says it is; false if it is not exactly that. */
static bool parse(const struct op *op, struct sbx_rbuf *r, struct sbxi_req *q)
{
  q->path = sbx_rbuf_str(r, SBX_PROTO_MAX_PATH);
  if (op->second)
    q->second = sbx_rbuf_str(r, SBX_PROTO_MAX_PATH);
  if (op->nu32 > 0)
    q->a = sbx_rbuf_u32(r);
  if (op->nu32 > 1)
    q->b = sbx_rbuf_u32(r);
  if (op->u64)
    q->c = sbx_rbuf_u64(r);
  return !r->bad && r->off == r->len && q->path && sbx_proto_path_ok(q->path) &&
         (!op->second || second_ok(op->second, q->second));
}

void sbxi_dispatch(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                   int *fds, size_t nfds)
{
  const struct op *op = h->type < sizeof ops / sizeof ops[0] ? &ops[h->type] : NULL;
  if (op && op->raw) {
    op->raw(in, h, r, fds, nfds);
    return;
  }
  if (!op || !op->run) {
    sbxi_close_fds(fds, nfds);
    sbxi_reply_err(in->chan, h->id, ENOSYS);
    return;
  }
  struct sbxi_req q = {.fd = -1};
  if (op->fd)
    q.fd = sbxi_take_fd(fds, nfds, op->fd);
  else
    sbxi_close_fds(fds, nfds);
  if (!parse(op, r, &q) || (op->fd && q.fd < 0)) {
    if (q.fd >= 0)
      close(q.fd);
    sbxi_reply_err(in->chan, h->id, EINVAL);
    return;
  }
  op->run(in, h->id, &q);
}

void sbxi_reply_ok(int chan, uint32_t id, uint64_t v, int fd)
{
  int rc = sbx_proto_send(chan, SBX_MSG_OK, id, 0, &v, sizeof v, fd >= 0 ? &fd : NULL, fd >= 0);
  int e = errno;
  if (fd >= 0)
    close(fd);
  /* gVisor refuses to pass an fd out to the host (EINVAL): answer ERR at
   * once instead of leaving the daemon to time out on the request. */
  if (rc < 0 && fd >= 0)
    sbxi_reply_err(chan, id, e);
}

void sbxi_reply_ok2(int chan, uint32_t id, uint64_t v, uint64_t aux)
{
  uint64_t p[2] = {v, aux};
  sbx_proto_send(chan, SBX_MSG_OK, id, 0, p, sizeof p, NULL, 0);
}

void sbxi_reply_err(int chan, uint32_t id, int e)
{
  int32_t v = e ? e : EIO;
  sbx_proto_send(chan, SBX_MSG_ERR, id, 0, &v, sizeof v, NULL, 0);
}

void sbxi_close_fds(int *fds, size_t nfds)
{
  for (size_t i = 0; i < nfds; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

int sbxi_take_fd(int *fds, size_t nfds, unsigned kind)
{
  struct stat st;
  int fd = nfds == 1 ? fds[0] : -1;
  if (fd >= 0 && (fstat(fd, &st) < 0 || (kind && (st.st_mode & S_IFMT) != kind))) {
    close(fd);
    fd = -1;
  }
  if (nfds != 1)
    sbxi_close_fds(fds, nfds);
  return fd;
}
