/* watch.c — WATCH: an inotify watcher child inside the sandbox.
 *
 * sbx-init makes the inotify fd and the first watch itself (so "no such
 * directory" or "too many watchers" is a synchronous ERR), then forks a
 * watcher that owns them, like an exec shepherd owns its workload.  The
 * watcher adds subdirectories as they appear (RECURSIVE), at most `max`
 * watches, and writes SBX_PROTO_WEV_* records (init/proto.h) to the pipe
 * the daemon gave.  The pipe end is non-blocking and records wait in a
 * bounded buffer: a slow daemon makes us drop (and count) events, never
 * block; the workload is never slowed by watching anyway (the kernel queues
 * inotify events and reports an overflow itself).  When the daemon closes
 * its end (POLLERR on ours) or the watched directory goes away, we exit.
 *
 * Subdirectories are opened below the watched directory with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS and watched through fchdir + ".",
 * so a watch never follows a symlink nor leaves the watched tree.  The
 * watcher keeps no fd or cwd on the watched tree (only the sandbox root),
 * so removing the directory ends the watch (IN_DELETE_SELF). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/init.h"

#define OUT_MAX (64 * 1024)
#define MAX_DEPTH 64
#define MOVE_WAIT_MS 20 /* how long a MOVED_FROM waits for its MOVED_TO */
#define MASK                                                                                    \
  (IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |           \
   IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

struct wentry {
  int wd;
  char *rel; /* relative to the watched directory; "" for itself */
};

struct watcher {
  int ifd, out, rootfd;
  const char *dir; /* the watched directory, resolved in the root afresh */
  uint32_t max;
  bool recursive;
  int root_wd;
  struct wentry *w;
  size_t n;
  char buf[OUT_MAX];
  size_t len;
  uint32_t dropped;
  bool pending; /* a MOVED_FROM waiting for its MOVED_TO */
  uint32_t cookie;
  bool pending_dir;
  char from[SBX_PROTO_MAX_PATH];
  char last_mod[SBX_PROTO_MAX_PATH]; /* coalesces repeated MODIFY of one file */
};

static void put_record(struct watcher *w, uint8_t kind, bool dir, const char *a, const char *b,
                       uint32_t count)
{
  size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
  uint16_t l1 = (uint16_t)la, l2 = (uint16_t)lb;
  uint8_t hdr[SBX_PROTO_WEV_HDR] = {kind, dir};
  memcpy(hdr + 2, &l1, 2);
  memcpy(hdr + 4, &l2, 2);
  memcpy(hdr + 6, &count, 4);
  memcpy(w->buf + w->len, hdr, sizeof hdr);
  memcpy(w->buf + w->len + sizeof hdr, a, la);
  memcpy(w->buf + w->len + sizeof hdr + la, b, lb);
  w->len += sizeof hdr + la + lb;
}

/* Queues one event; drops it (counting) when the buffer is full. */
static void emit(struct watcher *w, uint8_t kind, bool dir, const char *a, const char *b)
{
  size_t need = SBX_PROTO_WEV_HDR + strlen(a) + (b ? strlen(b) : 0);
  if (kind == SBX_PROTO_WEV_MODIFY) {
    if (!strcmp(w->last_mod, a))
      return;
    snprintf(w->last_mod, sizeof w->last_mod, "%s", a);
  } else {
    w->last_mod[0] = '\0';
  }
  if (w->dropped && w->len + SBX_PROTO_WEV_HDR + need <= OUT_MAX) {
    put_record(w, SBX_PROTO_WEV_OVERFLOW, false, NULL, NULL, w->dropped);
    w->dropped = 0;
  }
  if (w->dropped || w->len + need > OUT_MAX) {
    w->dropped++;
    return;
  }
  put_record(w, kind, dir, a, b, 0);
}

static void flush_out(struct watcher *w)
{
  while (w->len) {
    ssize_t n = write(w->out, w->buf, w->len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0)
      _exit(0); /* the daemon went away */
    memmove(w->buf, w->buf + n, w->len - (size_t)n);
    w->len -= (size_t)n;
  }
}

static const char *rel_of(struct watcher *w, int wd)
{
  for (size_t i = 0; i < w->n; i++)
    if (w->w[i].wd == wd)
      return w->w[i].rel;
  return NULL;
}

static void forget_wd(struct watcher *w, int wd)
{
  for (size_t i = 0; i < w->n; i++)
    if (w->w[i].wd == wd) {
      free(w->w[i].rel);
      w->w[i] = w->w[--w->n];
      return;
    }
}

static int add_watch_fd(struct watcher *w, int fd, const char *rel)
{
  if (fchdir(fd) < 0)
    return -1;
  int wd = inotify_add_watch(w->ifd, ".", MASK);
  /* Our cwd must not pin a directory the workload removes. */
  if (chdir("/") < 0 || wd < 0)
    return -1;
  for (size_t i = 0; i < w->n; i++)
    if (w->w[i].wd == wd) { /* the same directory again (renamed): new name */
      char *r = strdup(rel);
      if (r) {
        free(w->w[i].rel);
        w->w[i].rel = r;
      }
      return 0;
    }
  char *r = strdup(rel);
  if (!r || w->n >= w->max) {
    free(r);
    inotify_rm_watch(w->ifd, wd);
    return -1;
  }
  w->w[w->n++] = (struct wentry){wd, r};
  return 0;
}

static bool join(char *out, const char *rel, const char *name)
{
  size_t a = strlen(rel), b = strlen(name);
  if (a + b + 2 > SBX_PROTO_MAX_PATH)
    return false;
  if (a) {
    memcpy(out, rel, a);
    out[a++] = '/';
  }
  memcpy(out + a, name, b + 1);
  return true;
}

/* Watches rel (below the watched dir) and, recursively, its subdirectories;
 * with report, entries found there are reported as created (they appeared
 * before the watch could see them). */
static void add_tree(struct watcher *w, const char *rel, int depth, bool report)
{
  if (depth > MAX_DEPTH || w->n >= w->max)
    return;
  struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                         .resolve =
                             RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  /* No fd on the watched directory is kept: it would pin its dentry, and
   * its removal would then never show as IN_DELETE_SELF. */
  int base = sbxi_open_in_root(w->rootfd, w->dir, O_RDONLY | O_DIRECTORY, 0);
  if (base < 0)
    return;
  int fd = *rel ? (int)syscall(SYS_openat2, base, rel, &how, sizeof how) : dup(base);
  close(base);
  if (fd < 0)
    return;
  if (add_watch_fd(w, fd, rel) < 0 || !w->recursive) {
    close(fd);
    return;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *e;
  char sub[SBX_PROTO_MAX_PATH];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !join(sub, rel, e->d_name))
      continue;
    bool isdir = e->d_type == DT_DIR;
    if (report)
      emit(w, SBX_PROTO_WEV_CREATE, isdir, sub, NULL);
    if (isdir)
      add_tree(w, sub, depth + 1, report);
  }
  closedir(d);
}

/* A directory left the tree (moved out): stop watching it and below. */
static void drop_prefix(struct watcher *w, const char *prefix)
{
  size_t n = strlen(prefix);
  for (size_t i = 0; i < w->n;) {
    const char *r = w->w[i].rel;
    if (!strncmp(r, prefix, n) && (r[n] == '\0' || r[n] == '/')) {
      inotify_rm_watch(w->ifd, w->w[i].wd);
      free(w->w[i].rel);
      w->w[i] = w->w[--w->n];
    } else {
      i++;
    }
  }
}

/* A directory was renamed inside the tree: its watches keep their wds. */
static void rename_prefix(struct watcher *w, const char *from, const char *to)
{
  size_t n = strlen(from);
  for (size_t i = 0; i < w->n; i++) {
    const char *r = w->w[i].rel;
    if (strncmp(r, from, n) || (r[n] != '\0' && r[n] != '/'))
      continue;
    char np[SBX_PROTO_MAX_PATH];
    size_t tl = strlen(to);
    if (tl + strlen(r + n) + 1 > sizeof np)
      continue;
    memcpy(np, to, tl);
    memcpy(np + tl, r + n, strlen(r + n) + 1);
    char *dup_rel = strdup(np);
    if (dup_rel) {
      free(w->w[i].rel);
      w->w[i].rel = dup_rel;
    }
  }
}

/* A MOVED_FROM with no MOVED_TO: it left the watched tree. */
static void flush_pending(struct watcher *w)
{
  if (!w->pending)
    return;
  w->pending = false;
  emit(w, SBX_PROTO_WEV_DELETE, w->pending_dir, w->from, NULL);
  if (w->pending_dir)
    drop_prefix(w, w->from);
}

static void moved_to(struct watcher *w, const struct inotify_event *e, const char *path,
                     bool dir)
{
  if (w->pending && w->cookie == e->cookie) {
    w->pending = false;
    emit(w, SBX_PROTO_WEV_MOVE, dir, w->from, path);
    if (dir)
      rename_prefix(w, w->from, path);
    return;
  }
  flush_pending(w);
  emit(w, SBX_PROTO_WEV_CREATE, dir, path, NULL);
  if (dir && w->recursive)
    add_tree(w, path, 1, true);
}

static _Noreturn void gone(struct watcher *w)
{
  flush_pending(w);
  emit(w, SBX_PROTO_WEV_GONE, true, "", NULL);
  /* Best effort: the daemon ends the stream on GONE or on EOF alike. */
  int fl = fcntl(w->out, F_GETFL);
  if (fl >= 0)
    fcntl(w->out, F_SETFL, fl & ~O_NONBLOCK);
  flush_out(w);
  _exit(0);
}

static void on_event(struct watcher *w, const struct inotify_event *e)
{
  if (e->mask & IN_Q_OVERFLOW) {
    w->dropped++;
    return;
  }
  if (e->wd == w->root_wd && (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)))
    gone(w);
  if ((e->mask & IN_ATTRIB) && !(e->mask & ~(IN_ATTRIB | IN_ISDIR)))
    return; /* chmod/touch: not reported */
  if (e->mask & IN_IGNORED) {
    forget_wd(w, e->wd);
    return;
  }
  const char *rel = rel_of(w, e->wd);
  char path[SBX_PROTO_MAX_PATH];
  if (!rel || !e->len || !join(path, rel, e->name))
    return; /* self events of subdirectories: their parent reports them */
  bool dir = (e->mask & IN_ISDIR) != 0;
  if (w->pending && !(e->mask & IN_MOVED_TO))
    flush_pending(w);
  if (e->mask & IN_CREATE) {
    emit(w, SBX_PROTO_WEV_CREATE, dir, path, NULL);
    if (dir && w->recursive)
      add_tree(w, path, 1, true);
  } else if (e->mask & IN_MODIFY) {
    emit(w, SBX_PROTO_WEV_MODIFY, dir, path, NULL);
  } else if (e->mask & IN_DELETE) {
    emit(w, SBX_PROTO_WEV_DELETE, dir, path, NULL);
  } else if (e->mask & IN_MOVED_FROM) {
    flush_pending(w);
    w->pending = true;
    w->cookie = e->cookie;
    w->pending_dir = dir;
    snprintf(w->from, sizeof w->from, "%s", path);
  } else if (e->mask & IN_MOVED_TO) {
    moved_to(w, e, path, dir);
  }
}

static void read_events(struct watcher *w)
{
  static char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(w->ifd, buf, sizeof buf);
    if (n <= 0)
      return;
    for (char *p = buf; p < buf + n;) {
      struct inotify_event *e = (struct inotify_event *)(void *)p;
      on_event(w, e);
      p += sizeof *e + e->len;
    }
    w->last_mod[0] = '\0'; /* coalesce within one read only */
  }
}

static _Noreturn void serve(struct watcher *w)
{
  for (;;) {
    struct pollfd p[2] = {{.fd = w->ifd, .events = POLLIN},
                          {.fd = w->out, .events = w->len ? POLLOUT : 0}};
    int r = poll(p, 2, w->pending ? MOVE_WAIT_MS : -1);
    if (r < 0 && errno != EINTR)
      _exit(1);
    if (p[1].revents & (POLLERR | POLLHUP))
      _exit(0);
    if (r == 0)
      flush_pending(w);
    if (p[0].revents & POLLIN)
      read_events(w);
    flush_out(w);
  }
}

static _Noreturn void watcher_main(const struct sbxi *in, struct watcher *w)
{
  close(in->chan);
  sbxi_xfer_drop_all(); /* sbx-init's transfers: their ends are not ours */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != in->self)
    _exit(0);
  signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  w->w = calloc(w->max, sizeof *w->w);
  if (!w->w)
    _exit(1);
  w->w[w->n++] = (struct wentry){w->root_wd, strdup("")};
  if (w->recursive)
    add_tree(w, "", 0, false);
  emit(w, SBX_PROTO_WEV_READY, true, "", NULL);
  serve(w);
}

int sbxi_watch(const struct sbxi *in, int dirfd, const char *dir, uint32_t flags, uint32_t max,
               int out)
{
  static struct watcher w; /* the child's; big, so not on the stack */
  int e = 0, wd = -1;
  int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  int cwd = open(".", O_PATH | O_CLOEXEC);
  if (ifd < 0 || cwd < 0 || fchdir(dirfd) < 0 || (wd = inotify_add_watch(ifd, ".", MASK)) < 0)
    e = errno ? errno : EIO;
  if (cwd >= 0) {
    if (fchdir(cwd) < 0 && !e)
      e = errno;
    close(cwd);
  }
  /* The daemon's pipe (fd-in): its read end lives in the daemon
   * only, so closing it there reaches the watcher as POLLERR. */
  int fl = fcntl(out, F_GETFL);
  if (!e && (fl < 0 || fcntl(out, F_SETFL, fl | O_NONBLOCK) < 0))
    e = errno;
  pid_t pid = e ? -1 : fork();
  if (pid == 0) {
    close(dirfd);
    w = (struct watcher){.ifd = ifd,
                         .out = out,
                         .rootfd = in->rootfd,
                         .dir = dir,
                         .max = max,
                         .recursive = flags & SBX_PROTO_WATCH_RECURSIVE,
                         .root_wd = wd};
    watcher_main(in, &w);
  }
  if (!e && pid < 0)
    e = errno;
  if (ifd >= 0)
    close(ifd);
  close(dirfd);
  close(out);
  return e ? -e : 0;
}

/* WATCH: the watcher writes to the daemon's pipe (out, consumed). */
void sbxi_op_watch(const struct sbxi *in, uint32_t id, const struct sbxi_req *q)
{
  const char *dir = q->path;
  uint32_t flags = q->a, max = q->b;
  int out = q->fd;
  int r = 0;
  int dfd = max == 0 || max > SBX_PROTO_WATCH_MAX
                ? (errno = EINVAL, -1)
                : sbxi_open_in_root(in->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
  if (dfd < 0) {
    r = -errno;
    close(out);
  } else
    r = sbxi_watch(in, dfd, dir, flags, max, out); /* consumes dfd and out */
  if (r < 0)
    sbxi_reply_err(in->chan, id, -r);
  else
    sbxi_reply_ok(in->chan, id, 0, -1);
}
