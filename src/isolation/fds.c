/* fds.c — the sandbox's file descriptors (isolation.md §1 E8, CVE-2024-21626):
 * exactly 0,1,2 (stdio) and 3 (the daemon channel) survive the exec.  The
 * sync socket and the memfd to exec sit at 4 and 5 with close-on-exec, and
 * every other fd is closed.  Sources are first moved above the targets so
 * the dup3()s cannot clobber each other.  Child-side. */
#include "isolation/iso.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SAFE_BASE 64

static int lift(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, SAFE_BASE); }

int sbx_fds_arrange(const struct sbx_iso_plan *p, int *sync_fd, int *exec_fd)
{
  int src[6] = {p->stdio[0], p->stdio[1], p->stdio[2], p->chan_fd, p->sync_fd, p->exec_fd};
  int hi[6];
  for (int i = 0; i < 6; i++)
    if ((hi[i] = lift(src[i])) < 0)
      return -1;
  for (int i = 0; i < 6; i++)
    if (dup3(hi[i], i, i >= 4 ? O_CLOEXEC : 0) < 0)
      return -1;
  *sync_fd = 4;
  *exec_fd = 5;
  return (int)syscall(SYS_close_range, 6, ~0U, 0);
}
