/* sandbox.h — exec and file operations on a live sandbox, whatever its
 * driver: each is a message to the sandbox's sbx-init (init/proto.h).
 *
 * Exec: the daemon makes the stdio pipes and a per-exec control socket and
 * passes them to sbx-init with SCM_RIGHTS; sbx-init forks a per-exec
 * shepherd (a child subreaper) that forks the workload.  The daemon reads
 * stdout/stderr itself into head+tail captures (never blocking the child),
 * feeds stdin, and enforces the wall-clock timeout; on timeout or cancel it
 * tells the shepherd to SIGKILL the whole tree (double-forked grandchildren
 * included, since they reparent to the shepherd).  When the main process
 * exits the shepherd kills what is left of its tree, so an exec never leaks
 * processes and its pipes always reach EOF.
 *
 * File operations resolve the path inside the sandbox (openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS from sbx-init), never on the host,
 * whatever symlinks the sandbox made; sbx-init hands back an fd and the
 * daemon moves the bytes.  Where no fd can leave the sandbox (sb->fd_in:
 * gVisor) sbx-init moves them instead through an fd the daemon
 * passes in (runtime/sandbox_fdin.c); the functions below keep their
 * contracts either way.
 *
 * All functions are thread-safe per sandbox (several execs may run at once
 * in one session).  They borrow the sandbox; the caller keeps it alive. */
#ifndef SBX_RUNTIME_SANDBOX_H
#define SBX_RUNTIME_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/capture.h"
#include "common/err.h"
#include "runtime/driver.h"

/* Final status of an exec (DESIGN §4 "Statuses"). */
enum sbx_status {
  SBX_ST_QUEUED,
  SBX_ST_RUNNING,
  SBX_ST_SUCCEEDED,
  SBX_ST_FAILED,
  SBX_ST_TIMEOUT,
  SBX_ST_OOM_KILLED,
  SBX_ST_KILLED,
  SBX_ST_ERROR,
};
/* Why it ended (DESIGN §4 "reason"). */
enum sbx_reason {
  SBX_RS_NONE,
  SBX_RS_EXIT,
  SBX_RS_SIGNAL,
  SBX_RS_TIMEOUT,
  SBX_RS_MEMORY,
  SBX_RS_PIDS,
  SBX_RS_DISK,
  SBX_RS_OUTPUT,
  SBX_RS_CANCELLED,
  SBX_RS_SESSION_DELETED,
  SBX_RS_DAEMON_RESTARTED,
  SBX_RS_DAEMON_SHUTDOWN,
  SBX_RS_RUNTIME_UNAVAILABLE,
  SBX_RS_SANDBOX_LOST,
  /* The exec's shepherd died under it (a workload's kill -9 -1 reaches it)
   * while the sandbox lives on. */
  SBX_RS_SHEPHERD_LOST,
  /* The fleet declared the node dead (core/fleet.c). */
  SBX_RS_NODE_LOST,
};
const char *sbx_status_name(enum sbx_status s);
const char *sbx_reason_name(enum sbx_reason r);
int sbx_status_parse(const char *s, enum sbx_status *out);
bool sbx_status_final(enum sbx_status s);

/* A cancel token: anyone may fire it (execution cancel, session delete,
 * daemon shutdown); an exec polling it kills its tree with that reason. */
struct sbx_cancel {
  int efd; /* eventfd, readable once fired */
  volatile enum sbx_reason why;
};
int sbx_cancel_init(struct sbx_cancel *c);
void sbx_cancel_fire(struct sbx_cancel *c, enum sbx_reason why);
void sbx_cancel_destroy(struct sbx_cancel *c);

struct sbx_exec_live;

struct sbx_exec_request {
  char *const *argv;      /* argv[0] looked up in the sandbox's PATH */
  char *const *env;       /* full environment, NULL-terminated (already scrubbed/merged) */
  const char *cwd;        /* inside the sandbox; NULL → "/work" */
  const void *stdin_data; /* may be NULL: stdin is then /dev/null-like EOF */
  size_t stdin_len;
  uint64_t timeout_ms;       /* 0 → no timeout */
  uint64_t output_cap;       /* per stream; 0 → 1 MiB */
  struct sbx_cancel *cancel; /* may be NULL */
  /* Optional live sink (streaming): called from the exec thread for
   * each chunk read, before it goes into the capture.  stream 1 = stdout,
   * 2 = stderr.  offset = byte offset of this chunk in its stream. */
  void (*on_output)(void *ctx, int stream, const char *data, size_t len, uint64_t offset);
  void *on_output_ctx;
  /* Optional: background processes and terminals, see the
   * sbx_exec_live block at the end of this file.  NULL: a plain exec. */
  const struct sbx_exec_live *live;
  /* Optional: a file the exec runs (`language`+`code`), written inside the
   * sandbox before the command starts and removed once it ended, in the
   * same EXEC.  A failed write fails the exec (err, status error, reason
   * disk when the sandbox is full).  code at most SBX_EXEC_CODE_MAX. */
  const char *code_path;
  const char *code;
};
#define SBX_EXEC_CODE_MAX (1u << 20)

struct sbx_exec_result {
  enum sbx_status status;
  enum sbx_reason reason;
  int exit_code;                      /* -1 if killed by a signal */
  int signal;                         /* 0 if exited */
  struct sbx_output std_out, std_err; /* buf: head+tail; caller frees */
  uint64_t duration_ms;
  double cpu_seconds;         /* user+sys of the whole exec tree */
  uint64_t memory_peak_bytes; /* max RSS seen in the tree */
  /* OOM kills in the sandbox's cgroup while the exec ran (its counter read
   * before and after).  Concurrent execs of one session share the cgroup,
   * so a kill counts in every exec running at the time.  0 without a
   * cgroup (process driver). */
  uint64_t oom_kills;
  char error[256]; /* which limit was hit, or the service failure */
};
void sbx_exec_result_free(struct sbx_exec_result *r);

/* Run one command to completion (or timeout/cancel) and fill res.  Returns 0
 * when there is a result, whatever it says: the command's exit (argv[0] not
 * found is status failed, exit 127, message on stderr), oom_killed/memory
 * when the cgroup's OOM counter moved and it did not exit 0, killed/
 * shepherd_lost when its shepherd died while sbx-init lives, error/
 * sandbox_lost when sbx-init is gone (before or during the exec), failed/
 * pids when no process could be forked for it.  -1 with err only when the
 * service failed (a bad request, out of memory, an unexpected errno). */
int sbx_sandbox_exec(struct sbx_sandbox *sb, const struct sbx_exec_request *req,
                     struct sbx_exec_result *res, struct sbx_error *err);

/* Files.  Paths are absolute inside the sandbox ("/work/a.txt"); relative
 * paths are taken relative to /work.  Errors: SBX_E_NOT_FOUND, SBX_E_INVALID
 * (not a regular file / directory, hostile path), SBX_E_TOO_LARGE. */

/* Opens a regular file for reading; returns an fd the caller owns and its size. */
int sbx_sandbox_file_open_read(struct sbx_sandbox *sb, const char *path, int *fd_out,
                               uint64_t *size_out, struct sbx_error *err);
/* Creates/truncates a regular file (parents created, mode 0644 or given),
 * owned by the sandbox user; returns a write fd the caller owns.  fd-in
 * sandboxes: the fd is a spool file (write, fchmod, futimens work); its
 * bytes, mode and mtime reach the sandbox once it is closed, before the
 * next request on the sandbox is served. */
int sbx_sandbox_file_open_write(struct sbx_sandbox *sb, const char *path, unsigned mode,
                                int *fd_out, struct sbx_error *err);
/* fd-in sandboxes: commits now every file_open_write fd already closed,
 * so its errors (ENOSPC → SBX_E_TOO_LARGE) reach the caller instead of the
 * next request.  No-op elsewhere. */
int sbx_sandbox_file_flush(struct sbx_sandbox *sb, struct sbx_error *err);
/* Convenience: write len bytes to path. */
int sbx_sandbox_file_write(struct sbx_sandbox *sb, const char *path, const void *data,
                           size_t len, struct sbx_error *err);

struct sbx_dirent {
  char name[256];
  char path[4096];
  char type[8]; /* "file", "dir", "symlink", "other" */
  uint64_t size;
  unsigned mode; /* permission bits */
  int64_t mtime; /* seconds */
};
/* Lists a directory (not recursive); *out is malloc'd, caller frees.
 * At most max entries (more → SBX_E_TOO_LARGE). */
int sbx_sandbox_list(struct sbx_sandbox *sb, const char *dir, struct sbx_dirent **out,
                     size_t *count, size_t max, struct sbx_error *err);
/* Removes a file or a directory tree inside the sandbox. */
int sbx_sandbox_remove(struct sbx_sandbox *sb, const char *path, struct sbx_error *err);
/* Expands a glob (such as /work/out/ and a star pattern) inside the sandbox to regular files;
 * *out is a malloc'd array of malloc'd absolute paths (free each + array). */
int sbx_sandbox_glob(struct sbx_sandbox *sb, const char *pattern, char ***out, size_t *count,
                     size_t max, struct sbx_error *err);

/* True while sbx-init answers (socket open, process alive). */
bool sbx_sandbox_alive(struct sbx_sandbox *sb);
/* Asks sbx-init to have a shepherd idle for the next exec, without
 * waiting: a driver calls it as it hands a sandbox to a request, so that
 * the first exec finds a shepherd instead of waiting for a fork.  Only
 * before the sandbox is shared with other threads. */
void sbx_sandbox_herd(struct sbx_sandbox *sb);

/* ---- Long-lived execs (background processes, terminals).  sbx_sandbox_exec() still runs the exec to its end on the
 * calling thread (a background process is an exec on a thread of its
 * own); `live` lets the caller feed stdin later, get a terminal, and
 * signal or resize the workload while it runs. ---- */
struct sbx_exec_live {
  /* >= 0: the workload's stdin is this fd (the caller keeps it and e.g.
   * writes to the other end of a pipe); stdin_data is ignored.  -1: as
   * without `live`.  Ignored with pty. */
  int stdin_fd;
  /* A pseudo-terminal from the sandbox's own devpts as the workload's
   * stdio and controlling tty; its output is reported as stream 1. */
  bool pty;
  unsigned cols, rows; /* 1..SBX_PROTO_PTY_MAX (4096) */
  /* Called once from the exec thread when the workload has started: pid is
   * its pid inside the sandbox; ctl_fd a dup of the exec's control socket
   * (for sbx_exec_signal); pty_fd a dup of the terminal's master (fd-in
   * sandboxes: of its input pipe's write end; writing to it and
   * sbx_exec_resize work the same), -1 without pty.  The callee owns both
   * fds (they stay valid after the exec ends: signalling then is a
   * harmless EPIPE).  ctx is on_output_ctx. */
  void (*on_started)(void *ctx, pid_t pid, int ctl_fd, int pty_fd);
};

/* Sends signo (1..64) to the workload's process group through its shepherd. */
int sbx_exec_signal(int ctl_fd, int signo, struct sbx_error *err);
/* Sets a terminal's window size (the kernel sends SIGWINCH to its
 * foreground process group).  fd-in sandboxes: pty_fd is the write end of
 * the terminal's input pipe and the size goes to its shepherd (RESIZE). */
int sbx_exec_resize(int pty_fd, unsigned cols, unsigned rows, struct sbx_error *err);

/* ---- Ports (Upstream). ---- */
/* A TCP connection to port (1..65535) on the sandbox's own loopback
 * (127.0.0.1, then ::1 if v4 is refused), made by sbx-init inside the
 * sandbox's network namespace and finished here within timeout_ms.  Only
 * for drivers with SBX_CAP_UPSTREAM (a driver sharing the host's network
 * namespace would reach host services).  *fd_out is a connected,
 * non-blocking, close-on-exec TCP socket the caller owns (fd-in
 * sandboxes: an AF_UNIX stream socket sbx-init relays to that TCP
 * connection, half-closes included).  Nothing listens
 * (refused on both) or no answer in time → SBX_E_BAD_GATEWAY. */
int sbx_sandbox_connect(struct sbx_sandbox *sb, unsigned port, unsigned timeout_ms, int *fd_out,
                        struct sbx_error *err);

/* ---- stat, mkdir, move, symlinks (runtime/sandbox_files.c), recursive
 * listing (sandbox_list.c), watch (sandbox_watch.c).  Same path rules as the file
 * operations above; a final symlink is never followed.  Errors: as above,
 * plus SBX_E_CONFLICT when the target already exists. ---- */
struct sbx_stat {
  char type[8];  /* "file", "dir", "symlink", "other" */
  unsigned mode; /* permission bits (07777) */
  uint64_t size;
  int64_t mtime;          /* seconds */
  char link_target[4096]; /* symlinks: the target verbatim; else "" */
};
/* lstat inside the sandbox. */
int sbx_sandbox_stat(struct sbx_sandbox *sb, const char *path, struct sbx_stat *out,
                     struct sbx_error *err);
struct sbx_statfs {
  uint64_t dev; /* st_dev of path: two paths on one filesystem share it */
  uint64_t total_bytes, free_bytes;
  bool read_only;
};
/* statvfs of the filesystem holding path inside the sandbox. */
int sbx_sandbox_statfs(struct sbx_sandbox *sb, const char *path, struct sbx_statfs *out,
                       struct sbx_error *err);
#define SBX_MKDIR_PARENTS 1u /* create missing parents; an existing dir is fine */
#define SBX_MKDIR_MODE 2u    /* apply mode & 0777 exactly (else 0755) */
int sbx_sandbox_mkdir(struct sbx_sandbox *sb, const char *path, unsigned mode, unsigned flags,
                      struct sbx_error *err);
/* rename(2) inside the sandbox; "/" cannot move; without overwrite an
 * existing `to` is SBX_E_CONFLICT. */
int sbx_sandbox_move(struct sbx_sandbox *sb, const char *from, const char *to, bool overwrite,
                     struct sbx_error *err);
/* The target of symlink path into buf (len >= 4096). */
int sbx_sandbox_readlink(struct sbx_sandbox *sb, const char *path, char *buf, size_t len,
                         struct sbx_error *err);
/* Creates symlink path → target (stored verbatim; every later resolution by
 * the daemon stays inside the sandbox). */
int sbx_sandbox_symlink(struct sbx_sandbox *sb, const char *path, const char *target,
                        struct sbx_error *err);
/* Recursive listing of dir, depth-first pre-order; symlinks are listed, never
 * descended.  max_depth 0 → SBX_TREE_MAX_DEPTH; 1 → like sbx_sandbox_list.
 * More than max entries → SBX_E_TOO_LARGE.  *out is malloc'd. */
#define SBX_TREE_MAX_DEPTH 64u
int sbx_sandbox_list_tree(struct sbx_sandbox *sb, const char *dir, unsigned max_depth,
                          struct sbx_dirent **out, size_t *count, size_t max,
                          struct sbx_error *err);

/* Watch: sbx-init forks an inotify watcher on dir (recursive: and its
 * subdirectories as they appear, at most max_watches in all) and hands back
 * the read end of its event pipe (*fd_out, non-blocking, caller owns;
 * closing it stops the watcher).  Parse it with sbx_watch_reader. */
int sbx_sandbox_watch(struct sbx_sandbox *sb, const char *dir, bool recursive,
                      unsigned max_watches, int *fd_out, struct sbx_error *err);
enum sbx_watch_kind {
  SBX_WATCH_CREATE = 1,
  SBX_WATCH_MODIFY,
  SBX_WATCH_DELETE,
  SBX_WATCH_MOVE,
  SBX_WATCH_OVERFLOW,
  SBX_WATCH_GONE,
  SBX_WATCH_READY,
};
struct sbx_watch_event {
  enum sbx_watch_kind kind;
  bool dir;
  char path[4096];  /* relative to the watched dir ("" = the dir itself) */
  char to[4096];    /* MOVE: the new name */
  uint32_t dropped; /* OVERFLOW: events the watcher dropped */
};
/* Validating parser of the pipe's byte stream (hostile input). */
struct sbx_watch_reader {
  char buf[16384];
  size_t len;
};
/* Reads what the pipe has (non-blocking).  0 ok, 1 EOF, -1 error. */
int sbx_watch_reader_fill(struct sbx_watch_reader *r, int fd);
/* Next complete event: 1 got one, 0 need more bytes, -1 malformed. */
int sbx_watch_reader_next(struct sbx_watch_reader *r, struct sbx_watch_event *ev);

#endif
