/* sandbox_fdin.c — the daemon's half of the fd-in forms (see
 * init/proto.h "fd-in"): for sandboxes no fd can leave (sb->fd_in, gVisor)
 * the daemon makes the object, passes its sandbox end in, and moves the
 * bytes through it.
 *
 *   READ_TO     a pipe; the file's bytes are copied into a daemon-side
 *               memfd, so callers still get a regular file of that size
 *               and mode (sendfile, pread, fstat work as before).
 *   WRITE_FROM  a stream socket; the daemon writes, half-closes and reads
 *               sbx-init's final errno (ENOSPC → 413 like before).
 *   pending     sbx_sandbox_file_open_write() must hand back an fd that
 *               *is* the file (archive extraction writes it, then fchmod
 *               and futimens it, then closes it).  Here that is an
 *               unlinked spool file; once its caller has closed it
 *               (inotify IN_CLOSE_WRITE: only the caller's fd can write)
 *               it is committed with WRITE_FROM + its mode and mtime, at
 *               the start of the next request on the sandbox from any
 *               thread (sbx_fdin_flush, called by sbx_sandbox_call* below), so whatever the
 *               daemon does next sees the file.
 *
 * Everything sbx-init says is hostile input: sizes are bounded, every wait
 * has a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"

#define IDLE_MS SBX_CHAN_REPLY_TIMEOUT_MS /* longest silence within a transfer */
#define CHUNK (64 * 1024)

struct sbx_pending_write {
  struct sbx_pending_write *next;
  char path[SBX_PROTO_MAX_PATH];
  int rfd; /* read-only reopen of the spool file */
  int ifd; /* inotify on it: IN_CLOSE_WRITE once the caller closed it */
};

/* Waits for fd to be ready for ev within IDLE_MS; 0 or -errno. */
static int wait_fd(int fd, short ev)
{
  uint64_t deadline = sbx_now_ms() + IDLE_MS;
  for (;;) {
    uint64_t now = sbx_now_ms();
    if (now >= deadline)
      return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, (int)(deadline - now));
    if (r > 0)
      return 0;
    if (r < 0 && errno != EINTR)
      return -errno;
  }
}

int sbx_fdin_memfd(size_t cap, struct sbx_error *err)
{
  int fd = memfd_create("sbx-fdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  /* A hostile sbx-init cannot make it grow past cap. */
  if (fd < 0 || ftruncate(fd, (off_t)cap) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return sbx_err_sys(err, e, "fd-in memfd");
  }
  return fd;
}

static int lost(struct sbx_error *err, int e, const char *path)
{
  return sbx_err_set(err, SBX_E_INTERNAL, e, "%s: sandbox lost during the transfer (%s)", path,
                     strerror(e));
}

/* After a read, send or recv on the non-blocking fd failed (errno set): 0
 * to try again (EINTR, or EAGAIN and fd ready for ev within IDLE_MS), else
 * the transfer's "sandbox lost" error. */
static int retry_or_lost(int fd, short ev, const char *path, struct sbx_error *err)
{
  if (errno == EINTR)
    return 0;
  int e = errno == EAGAIN ? wait_fd(fd, ev) : -errno;
  return e < 0 ? lost(err, -e, path) : 0;
}

int sbx_fdin_read_to(struct sbx_sandbox *sb, const char *path, int *fd_out, uint64_t *size_out,
                     struct sbx_error *err)
{
  if (sbx_fdin_flush(sb, err) < 0)
    return -1;
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return sbx_err_sys(err, errno, "pipe");
  _cleanup_close_ int rd = p[0], wr = p[1];
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, path);
  struct sbx_chan_reply rep;
  int r = w.bad ? sbx_err_field(err, "path", "path too long")
                : sbx_chan_call_fds(sb, SBX_MSG_READ_TO, w.buf, w.len, &wr, 1, path, &rep, err);
  sbx_wbuf_free(&w);
  if (r < 0)
    return -1;
  close(steal_fd(&wr)); /* sbx-init holds the write end: EOF when it is done */
  if (rep.value > SBX_FDIN_READ_MAX)
    return sbx_err_set(err, SBX_E_TOO_LARGE, EFBIG, "%s: larger than %llu bytes", path,
                       (unsigned long long)SBX_FDIN_READ_MAX);
  _cleanup_close_ int mfd = memfd_create("sbx-file", MFD_CLOEXEC);
  _cleanup_free_ char *buf = malloc(CHUNK);
  if (mfd < 0 || !buf)
    return sbx_err_sys(err, mfd < 0 ? errno : ENOMEM, "read %s", path);
  sbx_set_nonblock(rd, 1);
  uint64_t got = 0;
  for (;;) {
    ssize_t n = read(rd, buf, CHUNK);
    if (n < 0) {
      if (retry_or_lost(rd, POLLIN, path, err) < 0)
        return -1;
      continue;
    }
    if (n == 0)
      break;
    if ((uint64_t)n > rep.value - got) /* more than announced: hostile */
      return sbx_err_set(err, SBX_E_INTERNAL, EPROTO, "%s: sbx-init sent too much", path);
    if (sbx_write_all(mfd, buf, (size_t)n) != n)
      return sbx_err_sys(err, errno, "read %s", path);
    got += (uint64_t)n;
  }
  /* Fewer bytes than announced: the file shrank meanwhile; what came is it. */
  if (fchmod(mfd, (mode_t)(rep.aux & 0777)) < 0 || lseek(mfd, 0, SEEK_SET) < 0)
    return sbx_err_sys(err, errno, "read %s", path);
  *fd_out = steal_fd(&mfd);
  if (size_out)
    *size_out = got;
  return 0;
}

/* Writes len bytes from data, or from src_fd when data is NULL, to the
 * non-blocking socket s. */
static int send_bytes(int s, const void *data, size_t len, int src_fd, const char *path,
                      struct sbx_error *err)
{
  _cleanup_free_ char *buf = data ? NULL : malloc(CHUNK);
  if (!data && !buf)
    return sbx_err_sys(err, ENOMEM, "write %s", path);
  off_t off = 0;
  size_t have = 0, at = 0;
  for (;;) {
    if (!data && at == have) {
      ssize_t n = pread(src_fd, buf, CHUNK, off);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sbx_err_sys(err, errno, "write %s", path);
      if (n == 0)
        return 0;
      off += n;
      have = (size_t)n;
      at = 0;
    }
    const char *p = data ? (const char *)data + at : buf + at;
    size_t left = data ? len - at : have - at;
    if (data && !left)
      return 0;
    ssize_t n = send(s, p, left, MSG_NOSIGNAL);
    if (n < 0) {
      if (retry_or_lost(s, POLLOUT, path, err) < 0)
        return -1;
      continue;
    }
    if (n == 0)
      return lost(err, EPIPE, path);
    at += (size_t)n;
  }
}

/* sbx-init's final u32 errno on the socket. */
static int recv_status(int s, const char *path, uint32_t *st, struct sbx_error *err)
{
  size_t got = 0;
  char *p = (char *)st;
  while (got < sizeof *st) {
    ssize_t n = recv(s, p + got, sizeof *st - got, 0);
    if (n < 0) {
      if (retry_or_lost(s, POLLIN, path, err) < 0)
        return -1;
      continue;
    }
    if (n == 0)
      return lost(err, EPIPE, path);
    got += (size_t)n;
  }
  return 0;
}

/* WRITE_FROM on the channel itself: also what a pending write's commit
 * uses, inside sbx_fdin_flush. */
static int write_from(struct sbx_sandbox *sb, const char *path, unsigned mode, uint32_t flags,
                      int64_t mtime, const void *data, size_t len, int src_fd,
                      struct sbx_error *err)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_err_sys(err, errno, "socketpair");
  _cleanup_close_ int mine = sv[0], far = sv[1];
  struct sbx_wbuf w;
  sbx_wbuf_init(&w, SBX_PROTO_MAX_INLINE);
  sbx_wbuf_str(&w, path);
  sbx_wbuf_u32(&w, mode);
  sbx_wbuf_u32(&w, flags);
  sbx_wbuf_u64(&w, (uint64_t)mtime);
  struct sbx_chan_reply rep;
  int r =
      w.bad ? sbx_err_field(err, "path", "path too long")
            : sbx_chan_call_fds(sb, SBX_MSG_WRITE_FROM, w.buf, w.len, &far, 1, path, &rep, err);
  sbx_wbuf_free(&w);
  if (r < 0)
    return -1;
  close(steal_fd(&far));
  sbx_set_nonblock(mine, 1);
  if (send_bytes(mine, data, len, src_fd, path, err) < 0)
    return -1;
  shutdown(mine, SHUT_WR);
  uint32_t st = 0;
  if (recv_status(mine, path, &st, err) < 0)
    return -1;
  if (st) {
    int e = st < 4096 ? (int)st : EIO;
    return sbx_chan_errno(e, path, err);
  }
  return 0;
}

int sbx_fdin_write_from(struct sbx_sandbox *sb, const char *path, unsigned mode, uint32_t flags,
                        int64_t mtime, const void *data, size_t len, int src_fd,
                        struct sbx_error *err)
{
  if (sbx_fdin_flush(sb, err) < 0)
    return -1;
  return write_from(sb, path, mode, flags, mtime, data, len, src_fd, err);
}

/* ---- files opened for writing (pending until their caller is done) ---- */

static void pending_free(struct sbx_pending_write *pw)
{
  close(pw->rfd);
  close(pw->ifd);
  free(pw);
}

int sbx_fdin_open_write(struct sbx_sandbox *sb, const char *path, unsigned mode, int *fd_out,
                        struct sbx_error *err)
{
  /* Created (or truncated) now, so the errors come now, as before. */
  if (sbx_fdin_write_from(sb, path, mode, SBX_PROTO_W_MKDIR, 0, "", 0, -1, err) < 0)
    return -1;
  const char *dirs[] = {sb->spool_dir, "/dev/shm", "/tmp"};
  _cleanup_close_ int fd = -1;
  for (size_t i = 0; i < 3 && fd < 0; i++)
    if (dirs[i])
      fd = open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "spool file for %s", path);
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  struct sbx_pending_write *pw = calloc(1, sizeof *pw);
  if (!pw)
    return sbx_err_sys(err, ENOMEM, "spool file for %s", path);
  pw->rfd = open(self, O_RDONLY | O_CLOEXEC);
  pw->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (pw->rfd < 0 || pw->ifd < 0 || inotify_add_watch(pw->ifd, self, IN_CLOSE_WRITE) < 0 ||
      fchmod(fd, mode & 0777) < 0) {
    int e = errno;
    if (pw->rfd >= 0)
      close(pw->rfd);
    if (pw->ifd >= 0)
      close(pw->ifd);
    free(pw);
    return sbx_err_sys(err, e, "spool file for %s", path);
  }
  snprintf(pw->path, sizeof pw->path, "%s", path);
  pthread_mutex_lock(&sb->client->pending_lock);
  pw->next = sb->client->pending;
  sb->client->pending = pw;
  pthread_mutex_unlock(&sb->client->pending_lock);
  *fd_out = steal_fd(&fd);
  return 0;
}

/* The spool file's bytes, mode and mtime into the sandbox. */
static int commit(struct sbx_sandbox *sb, struct sbx_pending_write *pw, struct sbx_error *err)
{
  struct stat st;
  if (fstat(pw->rfd, &st) < 0)
    return sbx_err_sys(err, errno, "spool file for %s", pw->path);
  return write_from(sb, pw->path, st.st_mode & 0777,
                    SBX_PROTO_W_MKDIR | SBX_PROTO_W_MODE | SBX_PROTO_W_MTIME,
                    (int64_t)st.st_mtim.tv_sec, NULL, 0, pw->rfd, err);
}

int sbx_fdin_flush(struct sbx_sandbox *sb, struct sbx_error *err)
{
  if (!sb->fd_in)
    return 0;
  pthread_mutex_lock(&sb->client->pending_lock);
  if (!sb->client->pending) {
    pthread_mutex_unlock(&sb->client->pending_lock);
    return 0;
  }
  int r = 0;
  for (struct sbx_pending_write **pp = &sb->client->pending; *pp;) {
    struct sbx_pending_write *pw = *pp;
    char ev[sizeof(struct inotify_event) + 256];
    if (read(pw->ifd, ev, sizeof ev) <= 0) { /* its caller still writes */
      pp = &pw->next;
      continue;
    }
    *pp = pw->next;
    struct sbx_error cerr = {0};
    if (commit(sb, pw, &cerr) < 0) {
      sbx_warn("sandbox", "%s: writing %s: %s", sb->id, pw->path, cerr.msg);
      if (r == 0 && err) {
        *err = cerr;
        r = -1;
      }
    }
    pending_free(pw);
  }
  pthread_mutex_unlock(&sb->client->pending_lock);
  return r;
}

void sbx_fdin_discard(struct sbx_sandbox *sb)
{
  struct sbx_pending_write *pw = sb->client->pending;
  sb->client->pending = NULL;
  while (pw) {
    struct sbx_pending_write *next = pw->next;
    pending_free(pw);
    pw = next;
  }
}

/* ---- requests on a sandbox ---------------------------------------------- */

/* The sandbox client's requests wrap the channel here: pending fd-in
 * writes are committed first, so whatever the request does sees them;
 * the channel underneath (chan.c) only frames and waits. */
int sbx_sandbox_call_fds(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                         const int *fds, size_t nfds, const char *what,
                         struct sbx_chan_reply *rep, struct sbx_error *err)
{
  rep->fd = -1;
  rep->value = rep->aux = 0;
  if (sbx_fdin_flush(sb, err) < 0)
    return -1;
  return sbx_chan_call_fds(sb, type, payload, len, fds, nfds, what, rep, err);
}

int sbx_sandbox_call(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                     const char *what, struct sbx_chan_reply *rep, struct sbx_error *err)
{
  return sbx_sandbox_call_fds(sb, type, payload, len, NULL, 0, what, rep, err);
}

int sbx_sandbox_send(struct sbx_sandbox *sb, uint32_t type, uint32_t flags, const void *payload,
                     size_t len, const int *fds, size_t nfds, struct sbx_error *err)
{
  if (sbx_fdin_flush(sb, err) < 0)
    return -1;
  return sbx_chan_send(sb, type, flags, payload, len, fds, nfds, err);
}
