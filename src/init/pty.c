/* pty.c — terminals for EXEC with SBX_PROTO_EXEC_PTY: a pty from
 * the sandbox's own devpts instance (its /dev/ptmx, resolved inside the
 * root), the slave made the workload's stdio and controlling tty, the
 * master handed to the daemon on ctl, which then owns reading, writing and
 * resizing it — or, with PTY_RELAY (gVisor), kept here and
 * relayed by the shepherd through the exec's pipes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "init/init.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int sbxi_pty_open(int rootfd, struct sbxi_pty *p)
{
  p->master = p->slave = -1;
  /* /dev/ptmx is a symlink to pts/ptmx in a container: resolved in root,
   * so the devpts instance is the sandbox's, never the host's. */
  p->master = sbxi_open_in_root(rootfd, "/dev/ptmx", O_RDWR | O_NOCTTY, 0);
  if (p->master < 0)
    return -1;
  int unlock = 0;
  struct winsize ws = {.ws_col = (unsigned short)p->cols, .ws_row = (unsigned short)p->rows};
  if (ioctl(p->master, TIOCSPTLCK, &unlock) < 0 || ioctl(p->master, TIOCSWINSZ, &ws) < 0)
    goto fail;
  /* The peer of this master, whatever paths the sandbox rearranged. */
  p->slave = ioctl(p->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p->slave < 0 && (errno == ENOTTY || errno == EINVAL)) {
    /* No TIOCGPTPEER (gVisor's 2022 kernel): the slave by its number,
     * resolved in the root like /dev/ptmx above. */
    unsigned n;
    char path[64];
    if (ioctl(p->master, TIOCGPTN, &n) < 0)
      goto fail;
    snprintf(path, sizeof path, "/dev/pts/%u", n);
    p->slave = sbxi_open_in_root(rootfd, path, O_RDWR | O_NOCTTY, 0);
  }
  if (p->slave < 0)
    goto fail;
  return 0;
fail:;
  int e = errno;
  close(p->master);
  p->master = -1;
  errno = e;
  return -1;
}

void sbxi_pty_attach(const struct sbxi_pty *p)
{
  /* After setsid(): the first tty opened or TIOCSCTTY'd becomes ours. */
  if (ioctl(p->slave, TIOCSCTTY, 0) < 0)
    _exit(127);
  for (int i = 0; i < 3; i++)
    if (dup2(p->slave, i) < 0)
      _exit(127);
  tcsetpgrp(0, getpgrp());
}

/* ---- PTY_RELAY: the master never leaves the sandbox ----
 * The shepherd copies the exec's stdin pipe to the master and the master
 * to its stdout pipe, non-blocking through bounded buffers, in its
 * supervise loop (shepherd.c); the daemon resizes with RESIZE on ctl. */
#define RELAY_IN 16384
#define RELAY_OUT 65536

struct sbxi_relay {
  int master, in, out;
  char ib[RELAY_IN], ob[RELAY_OUT];
  size_t ioff, ilen, ooff, olen;
  bool in_eof, m_eof;
  int pin, pm, pout; /* poll indexes of this round, or -1 */
};

static void nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

struct sbxi_relay *sbxi_relay_new(int master, int in, int out)
{
  static struct sbxi_relay r; /* one per shepherd */
  r = (struct sbxi_relay){.master = master, .in = in, .out = out};
  nonblock(master);
  nonblock(in);
  nonblock(out);
  return &r;
}

size_t sbxi_relay_poll(struct sbxi_relay *r, struct pollfd *p)
{
  size_t n = 0;
  r->pin = r->pm = r->pout = -1;
  if (r->in >= 0 && !r->in_eof && r->ilen < RELAY_IN) {
    r->pin = (int)n;
    p[n++] = (struct pollfd){.fd = r->in, .events = POLLIN};
  }
  short mev = (short)((!r->m_eof && r->olen < RELAY_OUT ? POLLIN : 0) |
                      (r->ilen && !r->m_eof ? POLLOUT : 0));
  if (mev) {
    r->pm = (int)n;
    p[n++] = (struct pollfd){.fd = r->master, .events = mev};
  }
  if (r->out >= 0 && r->olen) {
    r->pout = (int)n;
    p[n++] = (struct pollfd){.fd = r->out, .events = POLLOUT};
  }
  return n;
}

/* Appends what fd has to buf; false at EOF or on an error. */
static bool fill(int fd, char *buf, size_t cap, size_t *off, size_t *len)
{
  if (*off) {
    memmove(buf, buf + *off, *len - *off);
    *len -= *off;
    *off = 0;
  }
  ssize_t n = read(fd, buf + *len, cap - *len);
  if (n > 0)
    *len += (size_t)n;
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

/* Writes what buf holds to fd; false when fd is broken. */
static bool flush(int fd, const char *buf, size_t *off, size_t *len)
{
  ssize_t n = write(fd, buf + *off, *len - *off);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (n <= 0)
    return false;
  *off += (size_t)n;
  if (*off == *len)
    *off = *len = 0;
  return true;
}

void sbxi_relay_service(struct sbxi_relay *r, const struct pollfd *p, size_t n)
{
  (void)n;
  if (r->pin >= 0 && p[r->pin].revents && !fill(r->in, r->ib, RELAY_IN, &r->ioff, &r->ilen))
    r->in_eof = true; /* stdin closed: the terminal stays open, like a hung-up writer */
  if (r->pm >= 0 && (p[r->pm].revents & (POLLOUT | POLLERR | POLLHUP)) && r->ilen &&
      !flush(r->master, r->ib, &r->ioff, &r->ilen))
    r->ioff = r->ilen = 0;
  if (r->pm >= 0 && (p[r->pm].revents & (POLLIN | POLLERR | POLLHUP)) &&
      !fill(r->master, r->ob, RELAY_OUT, &r->ooff, &r->olen))
    r->m_eof = true; /* EIO: every slave fd is closed */
  if (r->pout >= 0 && p[r->pout].revents && !flush(r->out, r->ob, &r->ooff, &r->olen)) {
    close(r->out); /* the daemon went away: output is dropped from now on */
    r->out = -1;
  }
  if (r->out < 0)
    r->ooff = r->olen = 0;
}

void sbxi_relay_drain(struct sbxi_relay *r)
{
  /* The tree is dead: what the master holds is final.  Bounded: ~2 s. */
  for (int rounds = 0; rounds < 200 && r->out >= 0; rounds++) {
    size_t before = r->olen - r->ooff;
    if (!r->m_eof && r->olen < RELAY_OUT &&
        !fill(r->master, r->ob, RELAY_OUT, &r->ooff, &r->olen))
      r->m_eof = true;
    bool got = r->olen - r->ooff > before;
    if (r->olen && !flush(r->out, r->ob, &r->ooff, &r->olen))
      break;
    if (!r->olen && (r->m_eof || !got))
      break; /* all out, and the master has nothing more */
    if (r->olen) {
      struct pollfd p = {.fd = r->out, .events = POLLOUT};
      poll(&p, 1, 10);
    }
  }
  if (r->out >= 0)
    close(r->out);
  r->out = -1;
}

void sbxi_relay_resize(struct sbxi_relay *r, uint32_t cols, uint32_t rows)
{
  if (!cols || !rows || cols > SBX_PROTO_PTY_MAX || rows > SBX_PROTO_PTY_MAX)
    return;
  struct winsize ws = {.ws_col = (unsigned short)cols, .ws_row = (unsigned short)rows};
  ioctl(r->master, TIOCSWINSZ, &ws);
}
