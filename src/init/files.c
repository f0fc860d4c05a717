/* files.c — a file's bytes: OPEN_READ and OPEN_WRITE (the fd goes to the
 * daemon), READ_TO and WRITE_FROM (fd-in: sbx-init opens the file, the
 * bytes then move through xfer.c).  The opens themselves are path.c's:
 * regular files only, resolved in the root, never a final symlink. */
#include <errno.h>
#include <unistd.h>

#include "init/init.h"

void sbxi_op_open_read(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint64_t size = 0;
  int fd = sbxi_open_read(in->rootfd, q->path, &size, NULL);
  if (fd < 0)
    sbxi_reply_err(in->chan, id, -fd);
  else
    sbxi_reply_ok(in->chan, id, size, fd);
}

void sbxi_op_open_write(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  int fd = sbxi_open_write(in->rootfd, q->path, q->a, q->b);
  if (fd < 0)
    sbxi_reply_err(in->chan, id, -fd);
  else
    sbxi_reply_ok(in->chan, id, 0, fd);
}

/* READ_TO: OK{size, mode} now, the bytes through xfer.c. */
void sbxi_op_read_to(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint64_t size = 0;
  uint32_t mode = 0;
  int fd = sbxi_xfer_room() ? sbxi_open_read(in->rootfd, q->path, &size, &mode) : -EBUSY;
  if (fd < 0) {
    close(q->fd);
    sbxi_reply_err(in->chan, id, -fd);
    return;
  }
  sbxi_reply_ok2(in->chan, id, size, mode);
  sbxi_xfer_read_to(fd, size, q->fd); /* room was checked: cannot fail but ENOMEM */
}

/* WRITE_FROM{mode, flags, mtime}: the open (and truncation) answers now;
 * the bytes, mode and mtime follow through xfer.c, which reports on the
 * socket. */
void sbxi_op_write_from(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  uint32_t mode = q->a, flags = q->b;
  int fd;
  if (flags & ~(SBX_PROTO_W_MKDIR | SBX_PROTO_W_MODE | SBX_PROTO_W_MTIME))
    fd = -EINVAL;
  else if (!sbxi_xfer_room())
    fd = -EBUSY;
  else
    fd = sbxi_open_write(in->rootfd, q->path, mode, flags);
  if (fd < 0) {
    close(q->fd);
    sbxi_reply_err(in->chan, id, -fd);
    return;
  }
  sbxi_reply_ok(in->chan, id, 0, -1);
  sbxi_xfer_write_from(q->fd, fd, flags, mode, q->c);
}
