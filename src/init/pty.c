/* pty.c — terminals for EXEC with SBX_PROTO_EXEC_PTY (issue 4): a pty from
 * the sandbox's own devpts instance (its /dev/ptmx, resolved inside the
 * root), the slave made the workload's stdio and controlling tty, the
 * master handed to the daemon on ctl, which then owns reading, writing and
 * resizing it. */
#include <errno.h>
#include <fcntl.h>
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
