/* launch.h — daemon-side helpers for drivers that start sbx-init.
 *
 * The start contract (argv, fd 3, what sbx-init does at entry) is written
 * in init/proto.h.  A driver typically:
 *   1. socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC) → {daemon, child};
 *   2. in the child: dup2(child, 3) (clear CLOEXEC if it already is 3), then
 *      execveat(sbx_init_memfd(), "", argv, envp, AT_EMPTY_PATH) or execv;
 *   3. in the daemon: close(child), sbx_init_handshake(daemon, 5000, err),
 *      sb->init_fd = daemon. */
#ifndef SBX_INIT_LAUNCH_H
#define SBX_INIT_LAUNCH_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* Waits up to timeout_ms for sbx-init's READY on chan_fd and checks its
 * protocol version.  Returns sbx-init's own idea of its pid (1 in a pid
 * namespace) or -1 with err (SBX_E_RUNTIME_UNAVAILABLE: it died, said
 * something else, or was too slow). */
int sbx_init_handshake(int chan_fd, uint64_t timeout_ms, struct sbx_error *err);
/* The same, also giving READY's flags (SBX_PROTO_READY_FDIN: this sandbox
 * needs the fd-in forms, init/proto.h; the caller sets sb->fd_in). */
int sbx_init_handshake_ex(int chan_fd, uint64_t timeout_ms, uint32_t *flags,
                          struct sbx_error *err);

/* Has a started sbx-init on chan_fd fork an idle shepherd (HERD), then
 * waits up to timeout_ms for the PONG to a PING sent after it: sbx-init
 * takes messages in order, so on return the shepherd exists (or could
 * not be forked, which only means the first EXEC forks one).  For a
 * sandbox built ahead of its request; nothing else may use chan_fd
 * meanwhile.  0, or -1 with err. */
int sbx_init_herd(int chan_fd, uint64_t timeout_ms, struct sbx_error *err);

/* Returns a new fd (caller owns and closes it, O_CLOEXEC) of a memfd holding
 * a copy of init_path, sealed F_SEAL_SEAL|F_SEAL_SHRINK|F_SEAL_GROW|
 * F_SEAL_WRITE, for execveat(fd, "", argv, envp, AT_EMPTY_PATH).  The copy
 * is made once per init_path and cached for the life of the daemon; each
 * call returns a dup of it.  -1 with err on failure. */
int sbx_init_memfd(const char *init_path, struct sbx_error *err);

#endif
