/* chan.h — request/response with a sandbox's sbx-init over sb->init_fd
 * (internal to the runtime module).  Replies are hostile input: sizes,
 * types, ids and fds are checked here so callers get validated values. */
#ifndef SBX_RUNTIME_CHAN_H
#define SBX_RUNTIME_CHAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/err.h"
#include "init/proto.h"
#include "runtime/driver.h"

#define SBX_CHAN_REPLY_TIMEOUT_MS 30000

/* What the sandbox client keeps about one sandbox (sb->client, allocated
 * with it by sbx_sandbox_alloc): nothing a driver or the core touches. */
struct sbx_sandbox_client {
  pthread_mutex_t chan_lock; /* serialises request/response on init_fd */
  /* fd-in: files opened for writing whose bytes are not in the sandbox
   * yet (runtime/sandbox_fdin.c), under pending_lock. */
  struct sbx_pending_write *pending;
  pthread_mutex_t pending_lock;
  /* 1 for the owner (sbx_sandbox_free drops it) + one per exec in flight:
   * the memory outlives a destroy() that races an exec's thread, which
   * then finds the channel closed instead of freed memory. */
  atomic_uint users;
};

/* An exec holds the sandbox while it runs (runtime/sandbox.c); the last
 * release frees it. */
void sbx_sandbox_hold(struct sbx_sandbox *sb);
void sbx_sandbox_release(struct sbx_sandbox *sb);

struct sbx_chan_reply {
  uint64_t value; /* OK's value */
  uint64_t aux;   /* OK's second value (READ_TO's mode), else 0 */
  int fd;         /* OK's fd (owned by the caller) or -1 */
};

/* Sends type+payload (and fds: fd-in's memfd, pipe or socket that
 * sbx-init fills or uses; the caller keeps its own copies) under chan_lock
 * and waits for the reply with the same id.  OK → 0 and rep filled.
 * ERR{errno} → -1 with err mapped from the errno (ENOENT/ENOTDIR →
 * SBX_E_NOT_FOUND, ENOSPC/EFBIG → SBX_E_TOO_LARGE, ENOMEM/EMFILE/EIO →
 * SBX_E_INTERNAL, anything else → SBX_E_INVALID), with `what` as the
 * message prefix.  A dead or silent sbx-init → SBX_E_INTERNAL "sandbox
 * lost".  Where the sandbox is fd-in, or fds went in, a reply carrying an
 * fd is refused (EPROTO). */
int sbx_chan_call_fds(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                      const int *fds, size_t nfds, const char *what, struct sbx_chan_reply *rep,
                      struct sbx_error *err);

/* An errno from sbx-init as an error, mapped as sbx_chan_call_fds does. */
int sbx_chan_errno(int e, const char *what, struct sbx_error *err);

/* ---- fd-in, runtime/sandbox_fdin.c ---- */
/* Largest file READ_TO copies into the daemon (a memfd): 1 GiB. */
#define SBX_FDIN_READ_MAX (1ull << 30)
/* A memfd of cap bytes that cannot grow (a record sbx-init fills). */
int sbx_fdin_memfd(size_t cap, struct sbx_error *err);
/* READ_TO of path (normalised) into a memfd holding the file's bytes and
 * mode, read from offset 0: *fd_out (caller owns) and its size. */
int sbx_fdin_read_to(struct sbx_sandbox *sb, const char *path, int *fd_out, uint64_t *size_out,
                     struct sbx_error *err);
/* WRITE_FROM: path gets len bytes of data, or all of src_fd (pread from 0)
 * when data is NULL; flags SBX_PROTO_W_*.  Errors as sbx_chan_call_fds'. */
int sbx_fdin_write_from(struct sbx_sandbox *sb, const char *path, unsigned mode, uint32_t flags,
                        int64_t mtime, const void *data, size_t len, int src_fd,
                        struct sbx_error *err);
/* sbx_sandbox_file_open_write for fd-in sandboxes: creates/truncates path
 * now and returns a spool file committed by sbx_fdin_flush once closed. */
int sbx_fdin_open_write(struct sbx_sandbox *sb, const char *path, unsigned mode, int *fd_out,
                        struct sbx_error *err);

/* fd-in: files written through sbx_sandbox_file_open_write whose
 * caller is done go into the sandbox now (runtime/sandbox_files.c).  Every
 * request (sbx_sandbox_call*, below) calls it first, so whatever the
 * daemon does next sees them.
 * 0, or -1 with the first commit's error. */
int sbx_fdin_flush(struct sbx_sandbox *sb, struct sbx_error *err);
/* Drops what is pending (sandbox teardown). */
void sbx_fdin_discard(struct sbx_sandbox *sb);

/* Requests on a sandbox, as the sandbox client makes them: pending fd-in
 * writes first (sbx_fdin_flush), then sbx_chan_call_fds /
 * sbx_chan_send on the channel, whose contracts they keep. */
int sbx_sandbox_call_fds(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                         const int *fds, size_t nfds, const char *what,
                         struct sbx_chan_reply *rep, struct sbx_error *err);
int sbx_sandbox_call(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                     const char *what, struct sbx_chan_reply *rep, struct sbx_error *err);
int sbx_sandbox_send(struct sbx_sandbox *sb, uint32_t type, uint32_t flags, const void *payload,
                     size_t len, const int *fds, size_t nfds, struct sbx_error *err);

/* Sends one message (no reply expected) under chan_lock. */
int sbx_chan_send(struct sbx_sandbox *sb, uint32_t type, uint32_t flags, const void *payload,
                  size_t len, const int *fds, size_t nfds, struct sbx_error *err);

#endif
