/* fdpass.h — sending file descriptors over a unix socket (SCM_RIGHTS).
 * libc only: sbx-init and sbx-vm link it too. */
#ifndef SBX_COMMON_FDPASS_H
#define SBX_COMMON_FDPASS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The most fds one call passes. */
#define SBX_FDPASS_MAX 8

/* sendmsg of iov with fds[0..nfds) attached (nfds ≤ SBX_FDPASS_MAX; 0:
 * none), retried on EINTR; flags are sendmsg's (MSG_NOSIGNAL is added).
 * Bytes sent, or -1 with errno (EINVAL for too many fds). */
ssize_t sbx_sendmsg_fds(int sock, const struct iovec *iov, size_t niov, const int *fds,
                        size_t nfds, int flags);

#endif
