/* init.h — internal interfaces between the files of sbx-init (not used by
 * the daemon; the daemon's view is init/proto.h and init/launch.h).
 *
 *   main.c      argv, privilege drop, the serve loop on the daemon channel
 *   exec.c      EXEC: parse, fork the per-exec shepherd
 *   shepherd.c  the shepherd: fork+exec the workload, report, kill its tree
 *   tree.c      listing, killing and reaping our descendants
 *   fileops.c   OPEN_READ / OPEN_WRITE / LIST / REMOVE
 *   glob.c      GLOB
 *
 * sbx-init is single-threaded; everything here runs in its one thread (or in
 * a forked shepherd). */
#ifndef SBX_INIT_INIT_H
#define SBX_INIT_INIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "init/proto.h"

struct sbxi {
  int chan;          /* daemon channel (fd 3) */
  int rootfd;        /* the directory that is "/" for the daemon's paths */
  const char *root;  /* its path as given (for HOME/TMPDIR rewriting) */
  pid_t self;        /* our pid */
  bool pid1;
};

/* openat2(rootfd, path, flags, mode) with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS
 * and O_CLOEXEC; -1 with errno. */
int sbxi_open_in_root(int rootfd, const char *path, int flags, unsigned mode);

/* Sends OK{v} (+ fd if >= 0) / ERR{e} on the main channel. */
void sbxi_reply_ok(int chan, uint32_t id, uint64_t v, int fd);
void sbxi_reply_err(int chan, uint32_t id, int e);

/* EXEC: consumes fds (4 of them). */
void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds);
/* Never returns. */
_Noreturn void sbxi_shepherd(const struct sbxi *in, const char *cwd, char **argv, char **env,
                             const int fds[4]);

/* SIGKILLs every descendant of this process, reaping each, until none is
 * left.  If main > 0 and is reaped here its wait status goes to *main_status
 * and *main_reaped is set. */
void sbxi_kill_tree(pid_t main, int *main_status, bool *main_reaped);

void sbxi_fileop(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r);
/* Writes GLOB records for pattern to memfd; at most max+1; -errno on error. */
int sbxi_glob(int rootfd, const char *pattern, uint32_t max, int memfd, uint64_t *count);

#endif
