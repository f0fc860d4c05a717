/* xfer.c — the fd-in transfers of sbx-init: READ_TO (a file into
 * the daemon's pipe), WRITE_FROM (the daemon's socket into a file) and the
 * CONNECT relay (the daemon's socket <-> a loopback TCP connection).
 *
 * Where fds cannot leave the sandbox (gVisor) sbx-init moves the bytes
 * itself.  It is single-threaded and must keep answering the main channel,
 * so every transfer is a set of non-blocking "flows" (in → 64 KiB buffer →
 * out) that main.c's poll loop services one read and one write at a time
 * next to the channel: a slow or stuck peer stalls its own transfer, never
 * the channel nor the others.  At most XFER_MAX transfers run at once (a
 * new one beyond that is refused with EBUSY), so memory is bounded. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

#define XFER_MAX 64
#define XFER_BUF (64 * 1024)

enum xkind { X_READ_TO = 1, X_WRITE_FROM, X_CONNECT };

/* One direction: in → buf → out. */
struct flow {
  int in, out;
  char *buf;
  size_t off, len;
  uint64_t left; /* READ_TO: bytes still to send */
  bool in_eof;   /* no more input (EOF, error or left == 0) */
  bool done;     /* in_eof and the buffer went out (or out failed) */
  int err;       /* WRITE_FROM: first write error; later input is discarded */
  int pin, pout; /* indexes in the poll set of this round, or -1 */
};

struct xfer {
  enum xkind kind;
  struct flow f[2]; /* CONNECT: [0] daemon → tcp, [1] tcp → daemon */
  int sock;         /* the daemon's socket (WRITE_FROM, CONNECT) */
  int tcp;          /* CONNECT */
  bool connecting;
  int ptcp; /* poll index of the connecting socket */
  int phup; /* poll index of the daemon's socket, watched for hang-up */
  uint32_t wflags, mode;
  uint64_t mtime;
};

static struct xfer *xfers[XFER_MAX];

static void set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd)
{
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static struct xfer *xfer_alloc(enum xkind kind, int nflows)
{
  int slot = -1;
  for (int i = 0; i < XFER_MAX && slot < 0; i++)
    if (!xfers[i])
      slot = i;
  if (slot < 0) {
    errno = EBUSY;
    return NULL;
  }
  struct xfer *x = calloc(1, sizeof *x);
  if (!x)
    return NULL;
  x->kind = kind;
  x->sock = x->tcp = -1;
  for (int i = 0; i < 2; i++) {
    x->f[i].in = x->f[i].out = -1;
    x->f[i].done = i >= nflows;
    if (i < nflows && !(x->f[i].buf = malloc(XFER_BUF))) {
      free(x->f[0].buf);
      free(x);
      errno = ENOMEM;
      return NULL;
    }
  }
  xfers[slot] = x;
  return x;
}

/* A transfer in a free slot: flow 0 from in to out and, with two flows,
 * flow 1 back from out to in.  Consumes in and out: closed when there is
 * no slot or no memory (NULL, errno set). */
static struct xfer *xfer_new(enum xkind kind, int nflows, int in, int out)
{
  struct xfer *x = xfer_alloc(kind, nflows);
  if (!x) {
    int e = errno;
    close(in);
    close(out);
    errno = e;
    return NULL;
  }
  x->f[0].in = in;
  x->f[0].out = out;
  if (nflows == 2) {
    x->f[1].in = out;
    x->f[1].out = in;
  }
  return x;
}

bool sbxi_xfer_room(void)
{
  for (int i = 0; i < XFER_MAX; i++)
    if (!xfers[i])
      return true;
  return false;
}

/* Sends the one u32 status of WRITE_FROM / CONNECT on the daemon's socket.
 * It is the first (CONNECT) or the only (WRITE_FROM) thing we write there,
 * so an empty stream buffer takes it at once. */
static void send_status(int sock, int e)
{
  uint32_t v = (uint32_t)e;
  (void)!send(sock, &v, sizeof v, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void finish_write(struct xfer *x)
{
  struct flow *f = &x->f[0];
  if (!f->err && (x->wflags & SBX_PROTO_W_MODE) && fchmod(f->out, x->mode & 0777) < 0)
    f->err = errno;
  if (!f->err && (x->wflags & SBX_PROTO_W_MTIME)) {
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = (time_t)x->mtime}};
    if (futimens(f->out, ts) < 0)
      f->err = errno;
  }
  send_status(x->sock, f->err);
}

static void xfer_free(int slot)
{
  struct xfer *x = xfers[slot];
  if (x->kind == X_WRITE_FROM)
    finish_write(x);
  /* The fds of the flows are x->sock / x->tcp or owned by the flow alone. */
  for (int i = 0; i < 2; i++) {
    if (x->f[i].in != x->sock && x->f[i].in != x->tcp)
      close_fd(&x->f[i].in);
    if (x->f[i].out != x->sock && x->f[i].out != x->tcp)
      close_fd(&x->f[i].out);
    free(x->f[i].buf);
  }
  close_fd(&x->sock);
  close_fd(&x->tcp);
  free(x);
  xfers[slot] = NULL;
}

/* ---- starting transfers ---- */

int sbxi_xfer_read_to(int file, uint64_t size, int pipe_w)
{
  if (size == 0) { /* nothing to move (an empty or a /proc file): EOF now */
    close(file);
    close(pipe_w);
    return 0;
  }
  struct xfer *x = xfer_new(X_READ_TO, 1, file, pipe_w);
  if (!x)
    return -errno;
  set_nonblock(pipe_w);
  x->f[0].left = size;
  return 0;
}

int sbxi_xfer_write_from(int sock, int file, uint32_t flags, uint32_t mode, uint64_t mtime)
{
  struct xfer *x = xfer_new(X_WRITE_FROM, 1, sock, file);
  if (!x)
    return -errno;
  set_nonblock(sock);
  x->sock = sock;
  x->wflags = flags;
  x->mode = mode;
  x->mtime = mtime;
  return 0;
}

int sbxi_xfer_connect(int sock, int tcp, bool connected)
{
  struct xfer *x = xfer_new(X_CONNECT, 2, sock, tcp);
  if (!x)
    return -errno;
  set_nonblock(sock);
  x->sock = sock;
  x->tcp = tcp;
  x->connecting = !connected;
  if (connected)
    send_status(sock, 0);
  return 0;
}

/* ---- the loop ---- */

static int add(struct pollfd *p, size_t cap, size_t *n, int fd, short ev)
{
  if (*n >= cap)
    return -1;
  p[*n] = (struct pollfd){.fd = fd, .events = ev};
  return (int)(*n)++;
}

size_t sbxi_xfer_poll(struct pollfd *p, size_t cap)
{
  size_t n = 0;
  for (int i = 0; i < XFER_MAX; i++) {
    struct xfer *x = xfers[i];
    if (!x)
      continue;
    x->ptcp = x->phup = -1;
    for (int k = 0; k < 2; k++)
      x->f[k].pin = x->f[k].pout = -1;
    if (x->connecting) {
      x->ptcp = add(p, cap, &n, x->tcp, POLLOUT);
      continue;
    }
    for (int k = 0; k < 2; k++) {
      struct flow *f = &x->f[k];
      if (f->done)
        continue;
      if (!f->in_eof && f->len < XFER_BUF)
        f->pin = add(p, cap, &n, f->in, POLLIN);
      if (f->len)
        f->pout = add(p, cap, &n, f->out, POLLOUT);
    }
    /* CONNECT after the daemon's EOF: a full close of its socket must end
     * the relay even while the server keeps its side open and silent. */
    if (x->kind == X_CONNECT && x->f[0].done && !x->f[1].done && !x->f[1].len)
      x->phup = add(p, cap, &n, x->sock, 0);
  }
  return n;
}

static bool hit(const struct pollfd *p, int idx) { return idx >= 0 && p[idx].revents; }

/* One read into the flow's buffer. */
static void flow_read(struct flow *f)
{
  if (f->off && f->off == f->len)
    f->off = f->len = 0;
  if (f->off) { /* compact: room at the end for the next read */
    memmove(f->buf, f->buf + f->off, f->len - f->off);
    f->len -= f->off;
    f->off = 0;
  }
  size_t room = XFER_BUF - f->len;
  if (f->left && f->left < room)
    room = (size_t)f->left;
  ssize_t r = read(f->in, f->buf + f->len, room);
  if (r < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (r <= 0) {
    f->in_eof = true;
    return;
  }
  if (f->err) /* WRITE_FROM after a write error: read on, discard */
    return;
  f->len += (size_t)r;
  if (f->left) {
    f->left -= (uint64_t)r;
    f->in_eof = f->left == 0;
  }
}

/* One write from the buffer; false when out is broken. */
static bool flow_write(struct flow *f)
{
  ssize_t w = write(f->out, f->buf + f->off, f->len - f->off);
  if (w < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (w <= 0) {
    f->err = w < 0 ? errno : EIO;
    f->off = f->len = 0;
    return false;
  }
  f->off += (size_t)w;
  if (f->off == f->len)
    f->off = f->len = 0;
  return true;
}

static void finish_connect(struct xfer *x, const struct pollfd *p)
{
  if (!hit(p, x->ptcp))
    return;
  int e = 0;
  socklen_t l = sizeof e;
  if (getsockopt(x->tcp, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
    e = errno;
  send_status(x->sock, e);
  x->connecting = false;
  if (e) /* the daemon got the errno; nothing to relay */
    x->f[0].done = x->f[1].done = true;
}

/* Services one transfer; true when it is over. */
static bool service(struct xfer *x, const struct pollfd *p)
{
  if (x->connecting) {
    finish_connect(x, p);
    return x->f[0].done && x->f[1].done;
  }
  if (hit(p, x->phup) && (p[x->phup].revents & (POLLHUP | POLLERR)))
    return true;
  for (int k = 0; k < 2; k++) {
    struct flow *f = &x->f[k];
    if (f->done)
      continue;
    if (hit(p, f->pin))
      flow_read(f);
    if (f->len && hit(p, f->pout) && !flow_write(f) && x->kind != X_WRITE_FROM) {
      /* READ_TO: the daemon went away; CONNECT: a side reset. */
      return true;
    }
    if (f->in_eof && !f->len) {
      f->done = true;
      if (x->kind == X_CONNECT) /* pass the half-close on */
        shutdown(f->out, SHUT_WR);
    }
  }
  return x->f[0].done && x->f[1].done;
}

void sbxi_xfer_service(const struct pollfd *p)
{
  for (int i = 0; i < XFER_MAX; i++)
    if (xfers[i] && service(xfers[i], p))
      xfer_free(i);
}

void sbxi_xfer_drop_all(void)
{
  for (int i = 0; i < XFER_MAX; i++)
    if (xfers[i]) {
      xfers[i]->kind = 0; /* no status: the daemon is gone */
      xfer_free(i);
    }
}
