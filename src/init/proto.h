/* proto.h — the wire protocol between the daemon and sbx-init, and the
 * contract every runtime driver relies on to start sbx-init.
 *
 * == Starting sbx-init (drivers) ==
 * sbx-init is a statically linked executable (build: src/init/sbx-init) with
 * no dependency beyond libc, so it runs inside any image rootfs.  Drivers
 * exec it; the container driver execs a sealed memfd copy
 * (init/launch.h: sbx_init_memfd + execveat(fd, "", argv, envp,
 * AT_EMPTY_PATH)), so it need not exist in the sandbox rootfs and the
 * sandbox cannot overwrite the host binary (CVE-2019-5736 class).
 *
 *   argv: sbx-init [--root DIR] [--uid N --gid N] [--chan-fd N]
 *   fd 3: the daemon channel, an AF_UNIX SOCK_SEQPACKET socket.
 *   fd 0-2: /dev/null or anything; every other fd is closed at entry.
 *
 *   --root DIR  the directory that is "/" for every path the daemon sends
 *               (file ops, exec cwd): "/" in a container after pivot_root,
 *               the sandbox's host directory for the process driver.  When
 *               DIR is not "/", env HOME=/work and TMPDIR=/tmp of an exec
 *               are rewritten to DIR/work and DIR/tmp (process driver only;
 *               nothing else is translated: the workload sees host paths).
 *   --chan-fd N the channel arrives as fd N instead of 3 (the gvisor driver
 *               passes it as the container's stdin, the one fd runsc lets
 *               through); sbx-init moves it to 3 and puts /dev/null on N.
 *   --fd-in     say FDIN in READY even where fds could go out (tests; see
 *               "fd-in" below).  Takes no value.
 *   --uid/--gid drop to these (setgroups([]), setresgid, setresuid) after
 *               opening DIR and before serving.
 *
 * At start sbx-init: closes fds >= 4, opens DIR, drops ids, sets
 * PR_SET_DUMPABLE 0, ignores SIGPIPE; when it is not PID 1 it also sets
 * PR_SET_PDEATHSIG SIGKILL (NB: tied to the *thread* that forked it) and
 * PR_SET_CHILD_SUBREAPER.  It reaps every zombie (as PID 1 orphans too).
 * Then it sends READY{version, pid, flags} — the driver waits for it with
 * sbx_init_handshake() to measure start latency and detect failures.
 * READY goes with a throw-away fd attached (a pipe end): if the kernel
 * refuses to pass it (gVisor's host socket: EINVAL) READY is sent again
 * without it and with flags SBX_PROTO_READY_FDIN, and the daemon must use
 * the fd-in forms below for this sandbox.  The daemon reads the
 * flags with sbx_init_handshake_ex() (init/launch.h).
 * EOF on fd 3 → SIGKILL everything it started (kill(-1) as PID 1, else a
 * subreaper walk), reap, exit 0.
 *
 * == Messages ==
 * Every datagram is a struct sbx_proto_hdr followed by `len` payload bytes
 * (little-endian host order: both ends run on the same host).  Payload
 * fields: u32, u64, str (u32 n, n bytes, a NUL; no NUL inside), strv (u32
 * count, count strs).  Every length is checked; a short, long or malformed
 * message is rejected.  The daemon treats everything sbx-init sends as
 * hostile input (the sandbox may own sbx-init): bounded sizes, validated
 * types, unexpected fds closed.
 *
 * == fd-in ==
 * gVisor cannot pass an fd from the sandbox out to the host, so no reply
 * carries an fd where the daemon can pass one in instead: the daemon makes
 * the object (memfd, pipe, socketpair), sends its sandbox end with the
 * request and sbx-init fills or uses it.  LIST, GLOB, STAT, READLINK and
 * WATCH always work so (same cost as before).  For OPEN_READ, OPEN_WRITE,
 * CONNECT and terminals the fd-out form hands the daemon the sandbox's own
 * object (zero copy, no relay) and stays the default; a sandbox whose
 * READY says FDIN gets READ_TO, WRITE_FROM, CONNECT + socket and
 * EXEC_PTY_RELAY instead, in which sbx-init moves the bytes: its main loop
 * polls the channel and every transfer in flight (init/xfer.c) and never
 * blocks on one (64 KiB buffered a direction; at most 64 transfers at
 * once, a new one beyond that is ERR EBUSY; processes sbx-init forks drop
 * their copies of the transfers' fds, so EOFs arrive).  sbx-init serves
 * both forms whatever READY said.  The memfds the daemon passes for
 * records are sized and sealed (F_SEAL_GROW) by it: records start at
 * offset 0, the rest is zeros, nothing can grow them.
 *
 * Main channel (fd 3), request → one reply with the same id, except EXEC:
 *   PING                                     → PONG
 *   EXEC  u32 flags, str cwd, strv argv, strv env
 *         fds [stdin_r, stdout_w, stderr_w, ctl] (+ payload memfd when
 *         hdr.flags & SBX_PROTO_F_MEMFD: payload of hdr.len bytes in it,
 *         for requests larger than SBX_PROTO_MAX_INLINE)
 *         no reply on the main channel; everything comes on ctl.
 *   OPEN_READ  str path                      → OK{u64 size} + fd | ERR
 *   OPEN_WRITE str path, u32 mode, u32 flags(SBX_PROTO_W_MKDIR)
 *                                            → OK{0} + fd | ERR
 *   LIST  str dir, u32 max + fd [memfd]      → OK{u64 count} | ERR
 *         records written to the memfd: u8 type(SBX_PROTO_DT_*), u32 mode,
 *         u64 size, i64 mtime, u16 namelen, name bytes (no NUL).  At most
 *         max+1.
 *   REMOVE str path                          → OK{0} | ERR
 *   GLOB  str pattern, u32 max + fd [memfd]  → OK{u64 count} | ERR
 *         memfd records: u16 len, absolute path bytes.  At most max+1.
 *   Files, archives, watch (paths never follow a final symlink):
 *   STAT  str path + fd [memfd]              → OK{1}; the memfd gets u8
 *         type, u32 mode, u64 size, i64 mtime, u16 linklen, link target
 *         bytes (lstat semantics; linklen 0 unless a symlink)
 *   MKDIR str path, u32 mode, u32 flags       → OK{0} | ERR (EEXIST)
 *   MOVE  str from, str to, u32 flags         → OK{0} | ERR: renameat2 on
 *         the two parents resolved in the root (RENAME_NOREPLACE unless
 *         SBX_PROTO_MV_OVERWRITE); "/" and mount points cannot move.
 *   READLINK str path + fd [memfd]           → OK{len}; memfd: the target
 *   SYMLINK  str path, str target            → OK{0} | ERR (target verbatim)
 *   WATCH str dir, u32 flags, u32 max + fd [pipe write end] → OK{0} | ERR:
 *         sbx-init forks a watcher holding an inotify fd on dir (and its
 *         subdirectories if RECURSIVE, added as they appear, at most max
 *         watches) that writes SBX_PROTO_WEV_* records to the pipe; when
 *         the daemon closes its read end the watcher exits.  Events it
 *         cannot write at once are buffered (64 KiB), then dropped and
 *         counted.
 *   fd-in forms (for FDIN sandboxes):
 *   READ_TO str path + fd [pipe write end]   → OK{u64 size, u64 mode} | ERR;
 *         then exactly size bytes of the regular file go into the pipe
 *         and sbx-init closes it (fewer if the file shrank meanwhile).
 *   WRITE_FROM str path, u32 mode, u32 flags(SBX_PROTO_W_*), u64 mtime
 *         + fd [SOCK_STREAM socket]           → OK{0} | ERR (the open);
 *         then what the daemon writes to its end, up to its shutdown
 *         (SHUT_WR), goes into the file; sbx-init applies W_MODE / W_MTIME
 *         and answers on the socket with one u32 errno (0: every byte is
 *         in the file).  After a write error it reads on and discards, so
 *         the daemon learns the errno at the end, never as EPIPE midway.
 *   CONNECT u32 port, u32 family + fd [SOCK_STREAM socket]
 *         → OK{SBX_PROTO_CONN_*} | ERR: sbx-init connects (non-blocking) to
 *         loopback:port, writes a u32 errno to the socket once the connect
 *         is done (0: connected) and then relays bytes both ways,
 *         half-closes included; a full close of the daemon's end ends it.
 *   ERR is {i32 errno}.  OK is {u64 value} or {u64 value, u64 aux}.
 *
 * Per-exec ctl socket (SOCK_SEQPACKET socketpair end given with EXEC):
 *   shepherd → daemon: STARTED{u32 pid} then EXITED{u32 wait status,
 *     u64 cpu_usec (ru_utime+ru_stime of RUSAGE_CHILDREN), u64 maxrss_kb};
 *     or EXEC_FAILED{i32 errno, u32 stage} (stage 0 exec, 1 cwd, 2 the
 *     code file of SBX_PROTO_EXEC_CODE could not be written);
 *     or ERR{i32 errno} when sbx-init could not start the exec at all.
 *   daemon → shepherd: KILL.  KILL or EOF on ctl → the shepherd SIGKILLs
 *     the whole tree at once, then reports EXITED.
 *   SIGNAL{u32 signo} (1..64) → the shepherd sends signo to the
 *     workload's process group (kill(-pid)) and keeps supervising; any
 *     other message still means KILL.  With EXEC flag SBX_PROTO_EXEC_PTY
 *     the shepherd opens /dev/ptmx in the sandbox, sets the window size,
 *     makes the slave the workload's stdio and controlling tty, and sends
 *     PTY{} + the master fd before STARTED (the daemon checks the fd is a
 *     pty master).  Resizing is ioctl(TIOCSWINSZ) on the master by the
 *     daemon: no message.
 *   with SBX_PROTO_EXEC_PTY_RELAY as well the master never
 *     leaves the sandbox: the shepherd copies the exec's stdin pipe to the
 *     master and the master to its stdout pipe (no PTY message; stderr's
 *     pipe is closed at once), and the daemon resizes with RESIZE{u32 cols,
 *     u32 rows} on ctl (ignored without a relay).  At the end the shepherd
 *     drains the master into stdout (≤ 2 s) before EXITED.  Where the
 *     kernel lacks TIOCGPTPEER (gVisor 2022) the slave is opened as
 *     /dev/pts/N in the root.
 *   When the workload exits the shepherd SIGKILLs what is left of its
 *   tree (it is a child subreaper), so the pipes reach EOF.
 *
 * All paths are absolute inside the sandbox, resolved by sbx-init with
 * openat2(rootfd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); paths with
 * a ".." component are refused (EINVAL) by both ends.
 *
 * This file and proto.c are shared by sbx-init and the daemon: libc only. */
#ifndef SBX_INIT_PROTO_H
#define SBX_INIT_PROTO_H

#include <stdbool.h>

#include "common/buf.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SBX_PROTO_VERSION 1
#define SBX_PROTO_CHAN_FD 3
/* An engine sandbox's runner listens on this abstract unix socket
 * (init/engine.c, docs/wasm.md). */
#define SBX_PROTO_ENGINE_SOCKET "sbx-engine"

/* Limits shared by both ends. */
#define SBX_PROTO_MAX_INLINE (60u * 1024)        /* one datagram */
#define SBX_PROTO_MAX_PAYLOAD (4u * 1024 * 1024) /* EXEC via memfd */
#define SBX_PROTO_MAX_STRV 65536u
#define SBX_PROTO_MAX_PATH 4096u
#define SBX_PROTO_MAX_FDS 5

enum sbx_proto_type {
  SBX_MSG_READY = 1,
  SBX_MSG_PING,
  SBX_MSG_PONG,
  SBX_MSG_EXEC,
  SBX_MSG_OPEN_READ,
  SBX_MSG_OPEN_WRITE,
  SBX_MSG_LIST,
  SBX_MSG_REMOVE,
  SBX_MSG_GLOB,
  SBX_MSG_OK,
  SBX_MSG_ERR,
  /* daemon → sbx-init, no reply: have an idle shepherd ready for the next
   * EXEC (sent when a warm sandbox is handed over, so that its first EXEC
   * does not wait for a fork) */
  SBX_MSG_HERD,
  /* ctl */
  SBX_MSG_STARTED = 32,
  SBX_MSG_EXEC_FAILED,
  SBX_MSG_EXITED,
  SBX_MSG_KILL,
  /* ctl (streaming, processes, terminals): 40–59 */
  SBX_MSG_PTY = 40, /* shepherd → daemon: the pty master fd (EXEC with SBX_PROTO_EXEC_PTY) */
  SBX_MSG_SIGNAL = 41, /* daemon → shepherd: u32 signo for the workload's process group */
  SBX_MSG_RESIZE = 42, /* daemon → shepherd (PTY_RELAY): u32 cols, u32 rows */
  /* main channel (files, archives, watch): 60–79 */
  SBX_MSG_STAT = 60,     /* str path → OK{1} + memfd: STAT record */
  SBX_MSG_MKDIR = 61,    /* str path, u32 mode, u32 flags(SBX_PROTO_MK_*) → OK{0} */
  SBX_MSG_MOVE = 62,     /* str from, str to, u32 flags(SBX_PROTO_MV_*) → OK{0} */
  SBX_MSG_READLINK = 63, /* str path → OK{len} + memfd: target bytes */
  SBX_MSG_SYMLINK = 64,  /* str path, str target → OK{0} */
  SBX_MSG_WATCH = 65,    /* str dir, u32 flags, u32 max_watches → OK{0} + pipe read end */
  SBX_MSG_STATFS = 66,   /* str path → OK{1} + memfd: STATFS record */
  /* main channel (ports, contexts): 80–99 */
  SBX_MSG_CONNECT = 80, /* u32 port, u32 family (4|6) → OK{SBX_PROTO_CONN_*} + fd | ERR */
  /* main channel (fd-in forms): 100–119 */
  SBX_MSG_READ_TO = 100,    /* str path + pipe → OK{size, mode}, then the bytes */
  SBX_MSG_WRITE_FROM = 101, /* str path, u32 mode, u32 flags, u64 mtime + socket → OK{0} */
};

/* READY flags. */
#define SBX_PROTO_READY_FDIN 1u /* no fd can leave this sandbox: use the fd-in forms */

#define SBX_PROTO_F_MEMFD 1u /* hdr.flags: payload is in the last fd */
#define SBX_PROTO_W_MKDIR 1u /* OPEN_WRITE/WRITE_FROM flags: create missing parents */
#define SBX_PROTO_W_MODE 2u  /* WRITE_FROM: at the end, chmod to mode & 0777 exactly */
#define SBX_PROTO_W_MTIME 4u /* WRITE_FROM: at the end, set the mtime (seconds) */
/* EXEC payload flags.  PTY: u32 cols, u32 rows follow env; the
 * workload's stdio is a pty from the sandbox's devpts (the pipes given with
 * EXEC are unused) and its master comes back on ctl as PTY before STARTED. */
#define SBX_PROTO_EXEC_PTY 1u
#define SBX_PROTO_EXEC_PTY_RELAY 2u /* with PTY: the shepherd relays, see above */
/* CODE: str path, str text follow (after the PTY fields): the shepherd
 * writes text to path (a new file, parents made) before the workload
 * starts and removes it before EXITED, so `language`+`code` is one EXEC
 * instead of a write, an exec and a remove. */
#define SBX_PROTO_EXEC_CODE 4u
#define SBX_PROTO_PTY_MAX 4096u /* cols/rows ceiling */
/* files/archives/watch (60–79). */
#define SBX_PROTO_MK_PARENTS 1u   /* MKDIR: create missing parents (mkdir -p) */
#define SBX_PROTO_MK_EXIST_OK 2u  /* MKDIR: an existing directory is success */
#define SBX_PROTO_MK_MODE 4u      /* MKDIR: apply mode & 0777 exactly (no umask) */
#define SBX_PROTO_MV_OVERWRITE 1u /* MOVE: replace an existing target */
#define SBX_PROTO_WATCH_RECURSIVE 1u
#define SBX_PROTO_WATCH_MAX 8192u /* max_watches ceiling */
#define SBX_PROTO_STAT_REC 23u    /* u8 type, u32 mode, u64 size, i64 mtime, u16 linklen */
/* STATFS: the filesystem holding path (followed inside the root):
 * u64 st_dev, u64 total bytes, u64 free bytes, u32 flags. */
#define SBX_PROTO_STATFS_REC 28u
#define SBX_PROTO_FS_RDONLY 1u
/* WATCH event records on the pipe (a byte stream, watcher → daemon):
 * u8 kind (SBX_PROTO_WEV_*), u8 isdir, u16 len1, u16 len2, u32 count, then
 * len1 + len2 bytes: path1 (and path2, the new name of a MOVE), relative to
 * the watched directory ("" is the directory itself), no NUL, no "..".
 * count is the number of dropped events for OVERFLOW, else 0. */
enum {
  SBX_PROTO_WEV_CREATE = 1,
  SBX_PROTO_WEV_MODIFY,
  SBX_PROTO_WEV_DELETE,
  SBX_PROTO_WEV_MOVE,
  SBX_PROTO_WEV_OVERFLOW,
  SBX_PROTO_WEV_GONE,
  SBX_PROTO_WEV_READY, /* once, when the initial (recursive) watches are in place */
};
#define SBX_PROTO_WEV_HDR 10u

/* ports (80–99).  CONNECT: sbx-init makes a TCP socket in the
 * sandbox's network namespace, starts a non-blocking connect to the
 * loopback address of that family (never anything else) and hands the
 * socket back at once, connected or still connecting; sbx-init never waits
 * on it.  The daemon finishes the connect (poll POLLOUT, SO_ERROR) and
 * checks the fd is a TCP socket whose peer is loopback:port. */
#define SBX_PROTO_CONN_DONE 0u        /* OK value: connected already */
#define SBX_PROTO_CONN_IN_PROGRESS 1u /* OK value: connect still in progress */

enum { SBX_PROTO_DT_FILE = 1, SBX_PROTO_DT_DIR, SBX_PROTO_DT_LINK, SBX_PROTO_DT_OTHER };
#define SBX_PROTO_LIST_REC 27u /* fixed bytes of a LIST record before the name */

struct sbx_proto_hdr {
  uint32_t type;
  uint32_t id;
  uint32_t flags;
  uint32_t len; /* payload bytes */
};

/* Growable write buffer, bounded by max: a common/buf.h buffer whose
 * fields keep the names encoders use, and a sticky failure flag so an
 * encoder checks once at the end. */
struct sbx_wbuf {
  union {
    struct sbx_buf b;
    struct {
      char *buf;
      size_t len, cap, max;
    };
  };
  bool bad; /* ENOMEM or over max */
};
void sbx_wbuf_init(struct sbx_wbuf *w, size_t max);
void sbx_wbuf_free(struct sbx_wbuf *w);
void sbx_wbuf_put(struct sbx_wbuf *w, const void *p, size_t n);
void sbx_wbuf_u8(struct sbx_wbuf *w, uint8_t v);
void sbx_wbuf_u16(struct sbx_wbuf *w, uint16_t v);
void sbx_wbuf_u32(struct sbx_wbuf *w, uint32_t v);
void sbx_wbuf_u64(struct sbx_wbuf *w, uint64_t v);
void sbx_wbuf_str(struct sbx_wbuf *w, const char *s);
void sbx_wbuf_strv(struct sbx_wbuf *w, char *const *v);

/* Bounds-checked reader over a borrowed buffer; any failure sets bad. */
struct sbx_rbuf {
  const char *p;
  size_t len, off;
  bool bad;
};
void sbx_rbuf_init(struct sbx_rbuf *r, const void *p, size_t len);
uint32_t sbx_rbuf_u32(struct sbx_rbuf *r);
uint64_t sbx_rbuf_u64(struct sbx_rbuf *r);
/* Returns a pointer into the buffer (NUL-terminated there) or NULL. */
const char *sbx_rbuf_str(struct sbx_rbuf *r, size_t maxlen);
/* Returns a malloc'd NULL-terminated array of pointers into the buffer. */
char **sbx_rbuf_strv(struct sbx_rbuf *r, size_t maxcount);

/* Sends one message with up to SBX_PROTO_MAX_FDS fds (MSG_NOSIGNAL).
 * Returns 0, or -1 with errno. */
int sbx_proto_send(int sock, uint32_t type, uint32_t id, uint32_t flags, const void *payload,
                   size_t len, const int *fds, size_t nfds);
/* Receives one message into buf (cap bytes, header included).  Received fds
 * go to fds (at most *nfds, which is updated; extras are closed, always
 * MSG_CMSG_CLOEXEC).  Returns the datagram length, 0 on EOF, -1 with errno
 * (EMSGSIZE for a truncated datagram or fd list, EBADMSG for a short or
 * inconsistent header — fds are closed then). */
ssize_t sbx_proto_recv(int sock, void *buf, size_t cap, int *fds, size_t *nfds);

/* True if path is absolute-or-relative text without NUL, not too long and
 * without a ".." component. */
bool sbx_proto_path_ok(const char *path);

#endif
