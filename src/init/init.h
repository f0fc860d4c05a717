/* init.h — internal interfaces between the files of sbx-init (not used by
 * the daemon; the daemon's view is init/proto.h and init/launch.h).
 *
 *   main.c      argv, privilege drop, the serve loop on the daemon channel
 *   exec.c      EXEC: parse, fork the per-exec shepherd
 *   shepherd.c  the shepherd: fork+exec the workload, report, kill its tree
 *   tree.c      listing, killing and reaping our descendants
 *   fileops.c   OPEN_READ / OPEN_WRITE / LIST / REMOVE
 *   glob.c      GLOB
 *   fsops.c     STAT / MKDIR / MOVE / READLINK / SYMLINK (issue 4)
 *   watch.c     WATCH: the inotify watcher child (issue 4)
 *   pty.c       terminals (EXEC with SBX_PROTO_EXEC_PTY)
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

struct sbxi_pty;

/* EXEC: consumes fds (4 of them). */
void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds);
/* Never returns. */
_Noreturn void sbxi_shepherd(const struct sbxi *in, const char *cwd, char **argv, char **env,
                             const int fds[4], struct sbxi_pty *pty /* NULL: pipes */);

/* SIGKILLs every descendant of this process, reaping each, until none is
 * left.  If main > 0 and is reaped here its wait status goes to *main_status
 * and *main_reaped is set. */
void sbxi_kill_tree(pid_t main, int *main_status, bool *main_reaped);

/* pty.c (issue 4): EXEC with SBX_PROTO_EXEC_PTY. */
struct sbxi_pty {
  uint32_t cols, rows;  /* requested size */
  int master, slave;    /* O_CLOEXEC; -1 when unused */
};
/* Opens the sandbox's /dev/ptmx under rootfd, unlocks it, sets the size and
 * opens the slave through the master (TIOCGPTPEER); -1 with errno. */
int sbxi_pty_open(int rootfd, struct sbxi_pty *p);
/* In the workload, after setsid(): slave → stdio and controlling tty. */
void sbxi_pty_attach(const struct sbxi_pty *p);

void sbxi_fileop(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r);
/* Writes GLOB records for pattern to memfd; at most max+1; -errno on error. */
int sbxi_glob(int rootfd, const char *pattern, uint32_t max, int memfd, uint64_t *count);

/* fsops.c (issue 4): STAT, MKDIR, MOVE, READLINK, SYMLINK, WATCH (types
 * 60–79).  Closes any fds sent with them (none is expected). */
void sbxi_fsop(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
               int *fds, size_t nfds);
/* Splits path into parent (into buf) and last component (-EINVAL for "/",
 * "." or ".." as the last component). */
int sbxi_split_path(const char *path, char *buf, size_t len, const char **name);
/* watch.c: WATCH of dir; dirfd (dir opened O_RDONLY|O_DIRECTORY in the
 * root) is consumed.  0 once the watcher runs, with *read_end the read end
 * of its event pipe (ours alone: the watcher holds only the write end);
 * -errno otherwise. */
int sbxi_watch(const struct sbxi *in, int dirfd, const char *dir, uint32_t flags, uint32_t max,
               int *read_end);

/* connect.c (issue 4, ports): CONNECT → a TCP socket to the sandbox's own
 * loopback (connected or connecting) back to the daemon. */
void sbxi_connect(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r);

#endif
