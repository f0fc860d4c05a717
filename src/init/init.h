/* init.h — internal interfaces between the files of sbx-init (not used by
 * the daemon; the daemon's view is init/proto.h and init/launch.h).
 *
 *   main.c      argv, privilege drop, the serve loop on the daemon channel
 *   exec.c      EXEC: parse, fork the per-exec shepherd
 *   shepherd.c  the shepherd: fork+exec the workload, report, kill its tree
 *   tree.c      listing, killing and reaping our descendants
 *   ops.c       the request table (by message type), parsing, replies
 *   path.c      paths resolved in the sandbox root, the regular-file opens
 *   files.c     a file's bytes: OPEN_READ / OPEN_WRITE / READ_TO / WRITE_FROM
 *   dirs.c      the tree: LIST / REMOVE / STAT / READLINK / MKDIR / MOVE / SYMLINK
 *   glob.c      GLOB
 *   watch.c     WATCH: the inotify watcher child
 *   pty.c       terminals (EXEC with SBX_PROTO_EXEC_PTY), the PTY_RELAY copy loop
 *   connect.c   CONNECT (ports)
 *   xfer.c      fd-in transfers: READ_TO, WRITE_FROM, the CONNECT relay
 *
 * sbx-init is single-threaded; everything here runs in its one thread (or in
 * a forked shepherd). */
#ifndef SBX_INIT_INIT_H
#define SBX_INIT_INIT_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "init/proto.h"

struct sbxi {
  int chan;         /* daemon channel (fd 3) */
  int rootfd;       /* the directory that is "/" for the daemon's paths */
  const char *root; /* its path as given (for HOME/TMPDIR rewriting) */
  pid_t self;       /* our pid */
  bool pid1;
};

/* openat2(rootfd, path, flags, mode) with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS
 * and O_CLOEXEC; -1 with errno. */
int sbxi_open_in_root(int rootfd, const char *path, int flags, unsigned mode);

/* Sends OK{v} (+ fd if >= 0) / ERR{e} on the main channel. */
void sbxi_reply_ok(int chan, uint32_t id, uint64_t v, int fd);
void sbxi_reply_ok2(int chan, uint32_t id, uint64_t v, uint64_t aux);
void sbxi_reply_err(int chan, uint32_t id, int e);

/* The one fd a request carries (fd-in): exactly one, of file type
 * kind (S_IFREG, S_IFIFO, S_IFSOCK; 0: any), else -1.  Every fd in fds is
 * consumed either way (the one returned now belongs to the caller). */
int sbxi_take_fd(int *fds, size_t nfds, unsigned kind);
void sbxi_close_fds(int *fds, size_t nfds);

struct sbxi_pty;

/* The file an EXEC with SBX_PROTO_EXEC_CODE runs (both in its payload). */
struct sbxi_code {
  const char *path;
  const char *text;
};

/* EXEC: consumes fds (4 of them). */
void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds);
/* HERD: forks an idle shepherd unless one is idle already or the herd is
 * full. */
void sbxi_exec_prepare(const struct sbxi *in);
/* In a child about to execve: SIGPIPE back to its default and no signal
 * blocked (sbx-init set every other signal to its default at start-up,
 * and a handler ends at execve). */
void sbxi_signals_for_exec(void);
/* Once, as a shepherd process begins: leaves sbx-init's channel and
 * transfers, dies with sbx-init, becomes a subreaper taking SIGCHLD on a
 * signalfd; false if that fails (the shepherd then exits). */
bool sbxi_shepherd_setup(const struct sbxi *in);
/* Runs one exec on this shepherd process and reports it on fds[3] (ctl),
 * which it closes.  back: the shepherd's socket to sbx-init, or -1 for a
 * shepherd that ends with its exec.  True when the exec ended cleanly and
 * the shepherd said so on back ('r'): it may take another. */
bool sbxi_shepherd(const struct sbxi *in, const char *cwd, char **argv, char **env,
                   const int fds[4], struct sbxi_pty *pty /* NULL: pipes */,
                   const struct sbxi_code *code /* NULL: none */, int back);

/* engine.c: an engine sandbox (sbx-init --engine PROG --engine-arg A …).
 * The runner is started by sbxi_engine_ensure (again after it died:
 * sbxi_engine_reaped from the SIGCHLD handler); an EXEC's workload becomes
 * sbxi_engine_client instead of exec'ing argv. */
bool sbxi_engine_on(void);
int sbxi_engine_arg(char *arg); /* -1: too many */
void sbxi_engine_reaped(pid_t pid);
void sbxi_engine_ensure(void);
_Noreturn void sbxi_engine_client(char **argv, char **env);

/* SIGKILLs every descendant of this process, reaping each, until none is
 * left.  If main > 0 and is reaped here its wait status goes to *main_status
 * and *main_reaped is set.  False if the children could not be listed
 * (no /proc): then only those already dead were reaped. */
bool sbxi_kill_tree(pid_t main, int *main_status, bool *main_reaped);

/* What the processes this one reaped (through sbxi_wait) used, as
 * getrusage(RUSAGE_CHILDREN) counts it, since a shepherd last reset it:
 * one exec's worth, although the shepherd runs many. */
struct sbxi_reaped {
  uint64_t cpu_us, maxrss_kb;
};
extern struct sbxi_reaped sbxi_reaped;
/* wait4, adding the reaped process's rusage to sbxi_reaped. */
pid_t sbxi_wait(pid_t pid, int *status, int options);

/* pty.c: EXEC with SBX_PROTO_EXEC_PTY. */
struct sbxi_pty {
  uint32_t cols, rows; /* requested size */
  int master, slave;   /* O_CLOEXEC; -1 when unused */
  bool relay;          /* SBX_PROTO_EXEC_PTY_RELAY: the master stays here */
};
/* Opens the sandbox's /dev/ptmx under rootfd, unlocks it, sets the size and
 * opens the slave through the master (TIOCGPTPEER); -1 with errno. */
int sbxi_pty_open(int rootfd, struct sbxi_pty *p);
/* In the workload, after setsid(): slave → stdio and controlling tty. */
void sbxi_pty_attach(const struct sbxi_pty *p);

/* Terminal relay state of a shepherd (PTY_RELAY): stdin pipe → master,
 * master → stdout pipe, each through a bounded buffer. */
struct sbxi_relay;
struct sbxi_relay *sbxi_relay_new(int master, int in, int out);
/* Adds its fds to p (at most 4); returns how many. */
size_t sbxi_relay_poll(struct sbxi_relay *r, struct pollfd *p);
void sbxi_relay_service(struct sbxi_relay *r, const struct pollfd *p, size_t n);
/* At the end: what the master still holds goes out (bounded wait), then
 * the stdout pipe closes. */
void sbxi_relay_drain(struct sbxi_relay *r);
/* RESIZE{u32 cols, u32 rows} on ctl. */
void sbxi_relay_resize(struct sbxi_relay *r, uint32_t cols, uint32_t rows);

/* ops.c: a request on the main channel other than EXEC, served through
 * the table of message types; consumes fds. */
void sbxi_dispatch(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                   int *fds, size_t nfds);
/* A request as the table parsed it: its path (checked with
 * sbx_proto_path_ok), MOVE's "to" or SYMLINK's target, the u32 fields in
 * order (a, b), WRITE_FROM's u64 (c), and the fd it carries (the op owns
 * it; -1 if the type carries none). */
struct sbxi_req {
  const char *path, *second;
  uint32_t a, b;
  uint64_t c;
  int fd;
};
/* Serves one request and replies (OK/ERR) on the channel. */
typedef void sbxi_op_fn(const struct sbxi *in, uint32_t id, const struct sbxi_req *q);
/* files.c */
sbxi_op_fn sbxi_op_open_read, sbxi_op_open_write, sbxi_op_read_to, sbxi_op_write_from;
/* dirs.c */
sbxi_op_fn sbxi_op_list, sbxi_op_glob, sbxi_op_remove, sbxi_op_stat, sbxi_op_statfs,
    sbxi_op_readlink, sbxi_op_mkdir, sbxi_op_move, sbxi_op_symlink;
/* watch.c */
sbxi_op_fn sbxi_op_watch;

/* Writes GLOB records for pattern to memfd; at most max+1; -errno on error. */
int sbxi_glob(int rootfd, const char *pattern, uint32_t max, int memfd, uint64_t *count);

/* path.c: splits path into parent (into buf) and last component (-EINVAL
 * for "/", "." or ".." as the last component). */
int sbxi_split_path(const char *path, char *buf, size_t len, const char **name);
/* The parent directory of path, resolved in the root and opened with
 * flags | O_DIRECTORY (O_PATH, or O_RDONLY where it is read), or -errno;
 * *name points into buf. */
int sbxi_open_parent(int rootfd, const char *path, int flags, char *buf, size_t len,
                     const char **name);
/* SBX_PROTO_DT_* of a file mode. */
uint8_t sbxi_dtype(mode_t m);
/* watch.c: WATCH of dir; dirfd (dir opened O_RDONLY|O_DIRECTORY in the
 * root) and out (the write end of the daemon's event pipe) are consumed.
 * 0 once the watcher runs (it alone holds out); -errno otherwise. */
int sbxi_watch(const struct sbxi *in, int dirfd, const char *dir, uint32_t flags, uint32_t max,
               int out);

/* connect.c (ports): CONNECT → a TCP socket to the sandbox's own
 * loopback (connected or connecting) back to the daemon; with a socket
 * from the daemon the connection is relayed to it instead. */
void sbxi_connect(const struct sbxi *in, const struct sbx_proto_hdr *h, struct sbx_rbuf *r,
                  int *fds, size_t nfds);

/* Regular-file opens shared by OPEN_* and READ_TO/WRITE_FROM: the fd or
 * -errno. */
int sbxi_open_read(int rootfd, const char *path, uint64_t *size, uint32_t *mode);
int sbxi_open_write(int rootfd, const char *path, unsigned mode, uint32_t flags);

/* xfer.c: transfers serviced by the main loop.  Each consumes
 * its fds (also on failure); -errno (EBUSY: too many at once). */
int sbxi_xfer_read_to(int file, uint64_t size, int pipe_w);
int sbxi_xfer_write_from(int sock, int file, uint32_t flags, uint32_t mode, uint64_t mtime);
int sbxi_xfer_connect(int sock, int tcp, bool connected);
bool sbxi_xfer_room(void);
/* Fills p (cap entries) with what the transfers wait for; returns how many. */
size_t sbxi_xfer_poll(struct pollfd *p, size_t cap);
/* After poll() on what sbxi_xfer_poll gave. */
void sbxi_xfer_service(const struct pollfd *p);
void sbxi_xfer_drop_all(void);

#endif
