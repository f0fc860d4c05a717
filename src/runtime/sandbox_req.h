/* sandbox_req.h — what the sandbox client's path operations share
 * (internal to the runtime module): path normalisation, the two request
 * shapes to sbx-init (a path with arguments; a built message whose reply
 * carries no fd), and reading what sbx-init wrote into a record memfd. */
#ifndef SBX_RUNTIME_SANDBOX_REQ_H
#define SBX_RUNTIME_SANDBOX_REQ_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "init/proto.h"
#include "runtime/chan.h"

/* Absolute path inside the sandbox; relative paths are under /work.  A
 * bad one is an error on `field`. */
int sbx_req_norm(const char *path, const char *field, char *out, size_t len,
                 struct sbx_error *err);
/* The same, trailing slashes removed (a directory or an entry to act on). */
int sbx_req_norm_dir(const char *path, const char *field, char *out, size_t len,
                     struct sbx_error *err);
/* The path request: str path [, u32 a [, u32 b]] [+ fd when >= 0: ours,
 * kept].  The reply's fd, if any, is the caller's. */
int sbx_req_path(struct sbx_sandbox *sb, uint32_t type, const char *path, int nargs, uint32_t a,
                 uint32_t b, int fd, struct sbx_chan_reply *rep, struct sbx_error *err);
/* Sends w (freed) [+ fd] and waits for a reply that carries no fd (one it
 * carries anyway is closed).  EEXIST is a conflict (409), EXDEV/EBUSY a
 * bad request. */
int sbx_req_call(struct sbx_sandbox *sb, uint32_t type, struct sbx_wbuf *w, int fd,
                 const char *what, struct sbx_chan_reply *rep, struct sbx_error *err);
/* A request of one (normalised) path p whose record sbx-init writes into
 * memfd, as sbx_req_call. */
int sbx_req_record(struct sbx_sandbox *sb, uint32_t type, const char *p, int memfd,
                   struct sbx_chan_reply *rep, struct sbx_error *err);
/* What sbx-init wrote into our memfd (sized max, sealed against growth):
 * max bytes from 0, or -1; the record says how many count. */
ssize_t sbx_req_read_memfd(int fd, char *buf, size_t max);
/* "file", "dir", "symlink" or "other" for an SBX_PROTO_DT_*. */
const char *sbx_req_type_name(uint8_t t);

#endif
