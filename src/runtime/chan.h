/* chan.h — request/response with a sandbox's sbx-init over sb->init_fd
 * (internal to the runtime module).  Replies are hostile input: sizes,
 * types, ids and fds are checked here so callers get validated values. */
#ifndef SBX_RUNTIME_CHAN_H
#define SBX_RUNTIME_CHAN_H

#include <stdint.h>

#include "common/err.h"
#include "init/proto.h"
#include "runtime/driver.h"

#define SBX_CHAN_REPLY_TIMEOUT_MS 30000

struct sbx_chan_reply {
  uint64_t value; /* OK's value */
  int fd;         /* OK's fd (owned by the caller) or -1 */
};

/* Sends type+payload under chan_lock and waits for the reply with the same
 * id.  OK → 0 and rep filled.  ERR{errno} → -1 with err mapped from the
 * errno (ENOENT/ENOTDIR → SBX_E_NOT_FOUND, ENOSPC/EFBIG → SBX_E_TOO_LARGE,
 * ENOMEM/EMFILE/EIO → SBX_E_INTERNAL, anything else → SBX_E_INVALID), with
 * `what` as the message prefix.  A dead or silent sbx-init → SBX_E_INTERNAL
 * "sandbox lost". */
int sbx_chan_call(struct sbx_sandbox *sb, uint32_t type, const void *payload, size_t len,
                  const char *what, struct sbx_chan_reply *rep, struct sbx_error *err);

/* Sends one message (no reply expected) under chan_lock. */
int sbx_chan_send(struct sbx_sandbox *sb, uint32_t type, uint32_t flags, const void *payload,
                  size_t len, const int *fds, size_t nfds, struct sbx_error *err);

#endif
