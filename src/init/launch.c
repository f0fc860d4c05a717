/* launch.c — READY handshake and the sealed memfd copy of sbx-init. */
#include "init/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "init/proto.h"

int sbx_init_handshake(int chan_fd, uint64_t timeout_ms, struct sbx_error *err)
{
  return sbx_init_handshake_ex(chan_fd, timeout_ms, NULL, err);
}

/* The next message sbx-init sends on chan_fd before deadline, into buf
 * (cap bytes, at least a header): its length, or -1 with err.  what: the
 * awaited message, as "report ready" or "answer", for the errors. */
static ssize_t next_message(int chan_fd, uint64_t deadline, char *buf, size_t cap,
                            const char *what, struct sbx_error *err)
{
  for (;;) {
    uint64_t now = sbx_now_ms();
    if (now >= deadline)
      return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, ETIMEDOUT,
                         "sbx-init did not %s in time", what);
    struct pollfd p = {.fd = chan_fd, .events = POLLIN};
    int r = poll(&p, 1, (int)(deadline - now));
    if (r < 0 && errno != EINTR)
      return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno, "sbx-init: %s", strerror(errno));
    if (r <= 0)
      continue;
    int fds[SBX_PROTO_MAX_FDS];
    size_t nfds = SBX_PROTO_MAX_FDS;
    ssize_t n = sbx_proto_recv(chan_fd, buf, cap, fds, &nfds);
    for (size_t i = 0; i < nfds; i++)
      close(fds[i]);
    if (n <= 0)
      return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, n < 0 ? errno : 0,
                         "sbx-init exited before it could %s", what);
    return n;
  }
}

int sbx_init_handshake_ex(int chan_fd, uint64_t timeout_ms, uint32_t *flags,
                          struct sbx_error *err)
{
  if (flags)
    *flags = 0;
  char buf[64];
  if (next_message(chan_fd, sbx_now_ms() + timeout_ms, buf, sizeof buf, "report ready", err) < 0)
    return -1;
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  struct sbx_rbuf rb;
  sbx_rbuf_init(&rb, buf + sizeof h, h.len);
  uint32_t version = sbx_rbuf_u32(&rb);
  uint32_t pid = sbx_rbuf_u32(&rb);
  uint32_t fl = sbx_rbuf_u32(&rb); /* READY flags */
  if (h.type != SBX_MSG_READY || rb.bad || rb.off != rb.len || version != SBX_PROTO_VERSION ||
      pid == 0 || pid > 0x7fffffff || (fl & ~SBX_PROTO_READY_FDIN))
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                       "sbx-init sent a bad READY (type %u, version %u)", h.type, version);
  if (flags)
    *flags = fl;
  return (int)pid;
}

int sbx_init_herd(int chan_fd, uint64_t timeout_ms, struct sbx_error *err)
{
  const uint32_t id = 1;
  if (sbx_proto_send(chan_fd, SBX_MSG_HERD, 0, 0, NULL, 0, NULL, 0) < 0 ||
      sbx_proto_send(chan_fd, SBX_MSG_PING, id, 0, NULL, 0, NULL, 0) < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno, "sbx-init herd: %s",
                       strerror(errno));
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  for (;;) {
    char buf[64];
    if (next_message(chan_fd, deadline, buf, sizeof buf, "answer", err) < 0)
      return -1;
    struct sbx_proto_hdr h;
    memcpy(&h, buf, sizeof h);
    if (h.type == SBX_MSG_PONG && h.id == id)
      return 0;
  }
}

static pthread_mutex_t memfd_lock = PTHREAD_MUTEX_INITIALIZER;
static int memfd_cached = -1;
static char *memfd_path;

static int make_memfd(const char *init_path, struct sbx_error *err)
{
  _cleanup_close_ int src = open(init_path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (src < 0 || fstat(src, &st) < 0)
    return sbx_err_sys(err, errno, "open %s", init_path);
  if (!S_ISREG(st.st_mode))
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "%s is not a regular file", init_path);
  _cleanup_close_ int mfd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0)
    return sbx_err_sys(err, errno, "memfd_create");
  off_t off = 0;
  while (off < st.st_size) {
    ssize_t n = sendfile(mfd, src, &off, (size_t)(st.st_size - off));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return sbx_err_sys(err, n < 0 ? errno : EIO, "copy %s", init_path);
  }
  if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
    return sbx_err_sys(err, errno, "seal sbx-init memfd");
  return steal_fd(&mfd);
}

int sbx_init_memfd(const char *init_path, struct sbx_error *err)
{
  pthread_mutex_lock(&memfd_lock);
  if (memfd_cached < 0 || strcmp(memfd_path, init_path) != 0) {
    int fd = make_memfd(init_path, err);
    char *p = fd >= 0 ? strdup(init_path) : NULL;
    if (fd < 0 || !p) {
      if (fd >= 0)
        close(fd);
      pthread_mutex_unlock(&memfd_lock);
      return fd < 0 ? -1 : sbx_err_sys(err, ENOMEM, "sbx_init_memfd");
    }
    if (memfd_cached >= 0)
      close(memfd_cached);
    free(memfd_path);
    memfd_cached = fd;
    memfd_path = p;
  }
  int dup_fd = fcntl(memfd_cached, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  pthread_mutex_unlock(&memfd_lock);
  if (dup_fd < 0)
    return sbx_err_sys(err, e, "dup sbx-init memfd");
  return dup_fd;
}
