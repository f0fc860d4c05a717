/* main.c — sbx-init: PID 1 of every sandbox.  Parses argv, drops
 * privileges, says READY and serves the daemon channel (init/proto.h) until
 * it closes, then kills everything it started.  Static, libc only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"

struct args {
  const char *root;
  long uid, gid;
  long chan_fd; /* --chan-fd: where the driver put the channel (gvisor: 0) */
  bool fd_in;   /* --fd-in: say FDIN in READY whatever the probe finds */
};

static _Noreturn void die(const char *what)
{
  /* stderr is whatever the driver gave us; best effort. */
  dprintf(2, "sbx-init: %s: %s\n", what, strerror(errno));
  _exit(1);
}

static long parse_id(const char *s)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0 || v > 0x7fffffff) {
    errno = EINVAL;
    die("bad --uid/--gid");
  }
  return v;
}

static void parse_args(int argc, char **argv, struct args *a)
{
  a->root = "/";
  a->uid = a->gid = -1;
  a->chan_fd = SBX_PROTO_CHAN_FD;
  a->fd_in = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--fd-in")) {
      a->fd_in = true;
      continue;
    }
    if (i + 1 >= argc) {
      errno = EINVAL;
      die(argv[i]);
    }
    if (!strcmp(argv[i], "--root"))
      a->root = argv[++i];
    else if (!strcmp(argv[i], "--engine") || !strcmp(argv[i], "--engine-arg")) {
      if (sbxi_engine_arg(argv[++i]) < 0)
        die("too many --engine-arg");
    } else if (!strcmp(argv[i], "--uid"))
      a->uid = parse_id(argv[++i]);
    else if (!strcmp(argv[i], "--gid"))
      a->gid = parse_id(argv[++i]);
    else if (!strcmp(argv[i], "--chan-fd"))
      a->chan_fd = parse_id(argv[++i]);
    else {
      errno = EINVAL;
      die(argv[i]);
    }
  }
  if ((a->uid < 0) != (a->gid < 0)) {
    errno = EINVAL;
    die("--uid and --gid go together");
  }
}

/* Everything but stdio and the channel goes: we must not hold anything of
 * the driver's that the sandbox could reach through us. */
static void close_extra_fds(void)
{
  if (syscall(SYS_close_range, 4u, ~0u, 0u) == 0)
    return;
  /* No close_range (gVisor's 2022 kernel): close what /proc/self/fd
   * lists (collected first: closing while reading the dir would skip some),
   * not the whole range — one syscall per slot costs seconds under ptrace. */
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    for (int fd = 4; fd < 65536; fd++)
      close(fd);
    return;
  }
  int fds[1024], n = 0;
  bool more = false;
  struct dirent *de;
  while ((de = readdir(d))) {
    int fd = atoi(de->d_name);
    if (fd < 4 || fd == dirfd(d))
      continue;
    if (n < (int)(sizeof fds / sizeof fds[0]))
      fds[n++] = fd;
    else
      more = true;
  }
  closedir(d);
  for (int i = 0; i < n; i++)
    close(fds[i]);
  if (more)
    close_extra_fds();
}

static void drop_ids(const struct args *a)
{
  if (a->uid < 0)
    return;
  if (setgroups(0, NULL) < 0 && errno != EPERM)
    die("setgroups");
  if (setresgid((gid_t)a->gid, (gid_t)a->gid, (gid_t)a->gid) < 0)
    die("setresgid");
  if (setresuid((uid_t)a->uid, (uid_t)a->uid, (uid_t)a->uid) < 0)
    die("setresuid");
  /* Fail closed: if any id did not change, refuse to serve. */
  uid_t r, e, s;
  if (getresuid(&r, &e, &s) < 0 || r != (uid_t)a->uid || e != r || s != r)
    die("uid drop did not take");
}

static void on_sigchld(int sig)
{
  int saved = errno;
  pid_t pid;
  while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
    sbxi_engine_reaped(pid);
  errno = saved;
}

/* Every signal at its default but the two below, whatever the process
 * that started us ignored (a daemon under nohup ignores SIGHUP, and an
 * ignored signal stays ignored across execve): our children inherit these,
 * so a workload's shepherd only has SIGPIPE to put back. */
static void setup_signals(void)
{
  /* The raw call: libc refuses the signals it keeps for its threads (32
   * and 33 in glibc), but those stay ignored across execve too, and
   * nothing here uses threads.  All-zero is SIG_DFL, no flags, an empty
   * mask, whatever the architecture's layout of the kernel's struct. */
  static const unsigned long dfl[4];
  for (int s = 1; s < NSIG; s++)
    if (s != SIGKILL && s != SIGSTOP)
      syscall(SYS_rt_sigaction, s, dfl, NULL, (size_t)8);
  struct sigaction sa = {.sa_handler = SIG_IGN};
  sigaction(SIGPIPE, &sa, NULL);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The daemon went away: nothing we started may outlive us. */
static _Noreturn void shutdown_all(const struct sbxi *in)
{
  signal(SIGCHLD, SIG_DFL);
  sbxi_xfer_drop_all();
  if (in->pid1)
    kill(-1, SIGKILL);
  sbxi_kill_tree(0, NULL, NULL);
  _exit(0);
}

/* EXEC with a payload too big for one datagram: it comes in a memfd. */
static char *memfd_payload(int fd, size_t len)
{
  struct stat st;
  if (len > SBX_PROTO_MAX_PAYLOAD || fstat(fd, &st) < 0 || (uint64_t)st.st_size != len)
    return NULL;
  char *p = malloc(len ? len : 1);
  if (p && pread(fd, p, len, 0) != (ssize_t)len) {
    free(p);
    return NULL;
  }
  return p;
}

static void handle_exec(const struct sbxi *in, const struct sbx_proto_hdr *h, char *payload,
                        int *fds, size_t nfds)
{
  if (!(h->flags & SBX_PROTO_F_MEMFD)) {
    sbxi_exec(in, payload, h->len, fds, nfds);
    return;
  }
  if (nfds == 0)
    return;
  char *big = memfd_payload(fds[nfds - 1], h->len);
  close(fds[--nfds]);
  sbxi_exec(in, big, big ? h->len : 0, fds, nfds);
  free(big);
}

/* One request from the channel. */
static void serve_one(const struct sbxi *in)
{
  static char buf[sizeof(struct sbx_proto_hdr) + SBX_PROTO_MAX_INLINE];
  int fds[SBX_PROTO_MAX_FDS];
  size_t nfds = SBX_PROTO_MAX_FDS;
  ssize_t n = sbx_proto_recv(in->chan, buf, sizeof buf, fds, &nfds);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n == 0 || (n < 0 && errno != EMSGSIZE && errno != EBADMSG))
    shutdown_all(in);
  if (n < 0)
    return; /* malformed: dropped, its fds closed */
  struct sbx_proto_hdr h;
  memcpy(&h, buf, sizeof h);
  char *payload = buf + sizeof h;
  if (h.type == SBX_MSG_EXEC) {
    sbxi_engine_ensure(); /* started again if it died (its OOM kill, say) */
    handle_exec(in, &h, payload, fds, nfds);
    return;
  }
  if (h.type == SBX_MSG_HERD) {
    sbxi_close_fds(fds, nfds);
    sbxi_exec_prepare(in);
    return;
  }
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, payload, h.len);
  sbxi_dispatch(in, &h, &r, fds, nfds);
}

/* The channel and every fd-in transfer in flight (xfer.c) in one poll:
 * a transfer never blocks the channel, nor the channel a transfer. */
static void serve(const struct sbxi *in)
{
  static struct pollfd p[1 + 256];
  for (;;) {
    p[0] = (struct pollfd){.fd = in->chan, .events = POLLIN};
    size_t n = 1 + sbxi_xfer_poll(p + 1, sizeof p / sizeof p[0] - 1);
    if (poll(p, n, -1) < 0) {
      if (errno == EINTR)
        continue;
      shutdown_all(in);
    }
    if (n > 1)
      sbxi_xfer_service(p + 1);
    if (p[0].revents)
      serve_one(in);
  }
}

/* READY{version, pid, flags}, sent with a throw-away fd: where the kernel
 * refuses to pass it (gVisor: EINVAL) no fd can leave this sandbox, and
 * READY goes again without it, saying FDIN (init/proto.h "fd-in"). */
static void send_ready(const struct sbxi *in, bool fd_in)
{
  int pp[2] = {-1, -1};
  uint32_t flags = fd_in ? SBX_PROTO_READY_FDIN : 0;
  bool probe = pipe2(pp, O_CLOEXEC) == 0;
  if (!probe)
    flags |= SBX_PROTO_READY_FDIN; /* cannot tell: the form that always works */
  for (int attempt = 0; attempt < 2; attempt++) {
    struct sbx_wbuf w;
    sbx_wbuf_init(&w, 64);
    sbx_wbuf_u32(&w, SBX_PROTO_VERSION);
    sbx_wbuf_u32(&w, (uint32_t)in->self);
    sbx_wbuf_u32(&w, flags);
    int rc = w.bad ? (errno = ENOMEM, -1)
                   : sbx_proto_send(in->chan, SBX_MSG_READY, 0, 0, w.buf, w.len,
                                    probe ? &pp[0] : NULL, probe ? 1 : 0);
    sbx_wbuf_free(&w);
    if (rc == 0)
      break;
    if (!probe || errno != EINVAL || attempt)
      die("READY");
    probe = false;
    flags |= SBX_PROTO_READY_FDIN;
  }
  if (pp[0] >= 0) {
    close(pp[0]);
    close(pp[1]);
  }
}

extern char **environ;

/* PR_SET_DUMPABLE 0 (below) makes the kernel refuse /proc/1/environ to the
 * workload, but gVisor (2022) serves it to any task of the same uid
 * whatever the flag.  Wipe the strings it shows there — the block on our
 * stack between the mm's env_start and env_end — so nothing in sbx-init's
 * start environment (a runtime's HOME, say) reaches a workload either way.
 * sbx-init reads no variable: every exec brings its own environment. */
static void wipe_environ(void)
{
  for (char **e = environ; e && *e; e++)
    memset(*e, 0, strlen(*e));
  clearenv();
}

/* --chan-fd N: a runtime that can pass only stdio through (runsc: the
 * container's stdin) hands the channel over as fd N; it becomes fd 3 and
 * N gets /dev/null, so the rest of sbx-init sees the usual layout. */
static void move_channel(long fd)
{
  if (fd == SBX_PROTO_CHAN_FD)
    return;
  if (dup2((int)fd, SBX_PROTO_CHAN_FD) < 0)
    die("--chan-fd");
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd < 0 || dup2(null_fd, (int)fd) < 0)
    die("/dev/null");
  if (null_fd != (int)fd)
    close(null_fd);
}

int main(int argc, char **argv)
{
  struct args a;
  parse_args(argc, argv, &a);
  wipe_environ();
  move_channel(a.chan_fd);
  close_extra_fds();
  struct stat st;
  if (fstat(SBX_PROTO_CHAN_FD, &st) < 0 || !S_ISSOCK(st.st_mode))
    die("fd 3 is not the daemon socket");
  fcntl(SBX_PROTO_CHAN_FD, F_SETFD, FD_CLOEXEC);

  struct sbxi in = {.chan = SBX_PROTO_CHAN_FD, .root = a.root};
  /* Opened before the uid drop: the sandbox dir's ancestors (the daemon's
   * state dir) need not be searchable by the sandbox user. */
  in.rootfd = open(a.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (in.rootfd < 0)
    die(a.root);
  drop_ids(&a);
  /* After the drop: a credential change resets both of these. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  in.self = getpid();
  in.pid1 = in.self == 1;
  if (!in.pid1) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  }
  umask(022);
  setup_signals();

  sbxi_engine_ensure(); /* warm before the first exec asks */
  send_ready(&in, a.fd_in);
  serve(&in);
  return 0;
}
