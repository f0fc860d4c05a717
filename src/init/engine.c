/* engine.c — sbx-init's side of an engine sandbox (the wasm driver,
 * docs/wasm.md): the runner, a long-lived program started with sbx-init's
 * own stdin (the runner's script) and started again when it dies; and the
 * client every EXEC's workload becomes instead of exec'ing argv: it hands
 * argv, env and cwd to the runner over the sandbox's abstract unix socket
 * (the sandbox's network namespace is its own, so nobody else can reach
 * it), relays the job's stdin, stdout and stderr through three pipes of its
 * own that the runner opens through /proc/<pid>/fd (the exec's own pipes
 * come from the daemon, whose pipe inodes the sandbox user may not reopen),
 * and exits with the job's code.  The client stays the exec's process:
 * timeouts, cancels and the process-group kill work as for any workload,
 * and the runner stops the job when the client's connection closes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "init/init.h"

#define ENGINE_ARGS_MAX 32
#define CONNECT_WAIT_MS 15000  /* a runner that is still starting (node, its script) */
#define REQUEST_MAX (8u << 20) /* the runner refuses more */
#define REPLY_MAX 4096

static char *engine_argv[ENGINE_ARGS_MAX + 1];
static size_t engine_argc;
static volatile pid_t engine_pid; /* 0: not running */

bool sbxi_engine_on(void) { return engine_argc > 0; }

int sbxi_engine_arg(char *arg)
{
  if (engine_argc == ENGINE_ARGS_MAX)
    return -1;
  engine_argv[engine_argc++] = arg;
  return 0;
}

void sbxi_engine_reaped(pid_t pid)
{
  if (pid > 0 && pid == engine_pid)
    engine_pid = 0;
}

/* The runner: its own session, stdin the script (from the start), output
 * to /dev/null, nothing else open, an environment of PATH and HOME only. */
static _Noreturn void runner(void)
{
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  int null_fd = open("/dev/null", O_RDWR);
  /* A private open of the script: the memfd's offset is shared with
   * every other sandbox's runner reading it at the same time. */
  int script = open("/proc/self/fd/0", O_RDONLY);
  if (script < 0 || dup2(script, 0) < 0 || null_fd < 0 || dup2(null_fd, 1) < 0 ||
      dup2(null_fd, 2) < 0)
    _exit(127);
  syscall(SYS_close_range, 3u, ~0u, 0u);
  sbxi_signals_for_exec();
  char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", NULL};
  execve(engine_argv[0], engine_argv, env);
  _exit(127);
}

void sbxi_engine_ensure(void)
{
  if (!sbxi_engine_on() || engine_pid > 0)
    return;
  /* SIGCHLD held until the pid is recorded: a runner that dies at once is
   * then seen by sbxi_engine_reaped, and started again at the next exec. */
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old);
  pid_t pid = fork();
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    runner();
  }
  if (pid > 0)
    engine_pid = pid;
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ---- the client (in the workload's process, never returns) ---- */

static _Noreturn void fail(const char *what, int code)
{
  dprintf(2, "sandboxd: %s\n", what);
  _exit(code);
}

struct req {
  char *buf;
  size_t len, cap;
};

static void put(struct req *q, const void *p, size_t n)
{
  if (q->len + n > REQUEST_MAX)
    fail("the command, its environment and cwd are over 8 MiB", 127);
  if (q->len + n > q->cap) {
    q->cap = (q->len + n) * 2;
    if (!(q->buf = realloc(q->buf, q->cap)))
      fail("out of memory", 127);
  }
  memcpy(q->buf + q->len, p, n);
  q->len += n;
}

static void put_u32(struct req *q, uint32_t v) /* little-endian, as the runner reads */
{
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  put(q, b, 4);
}

static void put_str(struct req *q, const char *s)
{
  size_t n = strlen(s);
  put_u32(q, (uint32_t)n);
  put(q, s, n);
}

static void put_strv(struct req *q, char **v)
{
  uint32_t n = 0;
  while (v && v[n])
    n++;
  put_u32(q, n);
  for (uint32_t i = 0; i < n; i++)
    put_str(q, v[i]);
}

static int connect_runner(void)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(SBX_PROTO_ENGINE_SOCKET);
  memcpy(a.sun_path + 1, SBX_PROTO_ENGINE_SOCKET, n); /* abstract: sun_path[0] is NUL */
  /* The name is its bytes, or (libuv before uv_pipe_bind2, Node 20) the
   * whole sun_path, NUL-padded: both are tried. */
  socklen_t lens[2] = {(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n),
                       (socklen_t)sizeof a};
  for (int waited = 0; waited < CONNECT_WAIT_MS; waited += 5) {
    for (int i = 0; i < 2; i++) {
      int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0)
        fail("socket for the wasm engine", 127);
      if (connect(s, (struct sockaddr *)&a, lens[i]) == 0)
        return s;
      close(s);
    }
    if (errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN)
      break;
    nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
  }
  fail("the wasm engine is not running", 127);
}

static void send_all(int s, const char *p, size_t n)
{
  while (n) {
    ssize_t w = write(s, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      fail("the wasm engine went away", 137);
    p += w;
    n -= (size_t)w;
  }
}

/* The message of {"refused": "…"}, its JSON escapes undone (\uXXXX
 * outside printable ASCII shown as '?'); false when the reply refuses
 * nothing. */
static bool print_refusal(const char *reply)
{
  const char *m = strstr(reply, "\"refused\":\"");
  if (!m)
    return false;
  char out[REPLY_MAX];
  size_t n = 0;
  for (m += 11; *m && *m != '"' && n + 1 < sizeof out; m++) {
    char c = *m;
    if (c == '\\' && m[1]) {
      c = *++m;
      if (c == 'u') {
        unsigned v = 0;
        for (int i = 0; i < 4 && m[1]; i++, m++)
          v = v * 16 + (unsigned)(m[1] <= '9' ? m[1] - '0' : (m[1] | 32) - 'a' + 10);
        c = v >= 0x20 && v < 0x7f ? (char)v : '?';
      } else {
        c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
      }
    }
    out[n++] = c;
  }
  out[n] = '\0';
  dprintf(2, "sandboxd: %s\n", out);
  return true;
}

/* The job's three pipes: the runner reads pipes[0][0] as stdin and
 * writes pipes[1][1] and pipes[2][1]; this side moves bytes between them
 * and its own stdio. */
struct relay {
  int pipes[3][2];
  int sock;
  bool in_open; /* our stdin still to copy */
};

/* Copies what is ready from `from` to `to`; false at EOF or error. */
static bool pump(int from, int to)
{
  char buf[65536];
  ssize_t n = read(from, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (n <= 0)
    return false;
  for (ssize_t off = 0; off < n;) {
    ssize_t w = write(to, buf + off, (size_t)(n - off));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false; /* the reader went away: drain and drop */
    off += w;
  }
  return true;
}

/* Reads one '\n'-terminated line of the reply into line (NUL-terminated);
 * false on EOF before a newline. */
static bool read_line(int s, char *line, size_t size)
{
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = read(s, line + n, 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    if (line[n] == '\n')
      break;
    n++;
  }
  line[n] = '\0';
  return true;
}

/* Until the job's output has ended and its reply came: stdin in, stdout
 * and stderr out.  The reply, or "" when the runner died first. */
static void relay_run(struct relay *r, char *reply, size_t size)
{
  bool out_open = true, err_open = true, replied = false;
  reply[0] = '\0';
  while (out_open || err_open || !replied) {
    struct pollfd p[4] = {{.fd = r->in_open ? 0 : -1, .events = POLLIN},
                          {.fd = out_open ? r->pipes[1][0] : -1, .events = POLLIN},
                          {.fd = err_open ? r->pipes[2][0] : -1, .events = POLLIN},
                          {.fd = replied ? -1 : r->sock, .events = POLLIN}};
    if (poll(p, 4, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (p[0].revents && !pump(0, r->pipes[0][1])) {
      r->in_open = false;
      close(r->pipes[0][1]); /* the job sees EOF */
    }
    if (p[1].revents && !pump(r->pipes[1][0], 1))
      out_open = false;
    if (p[2].revents && !pump(r->pipes[2][0], 2))
      err_open = false;
    if (p[3].revents) {
      replied = true;
      if (!read_line(r->sock, reply, size)) {
        reply[0] = '\0'; /* died mid-job: its pipes' ends closed with it */
      }
    }
  }
}

_Noreturn void sbxi_engine_client(char **argv, char **env)
{
  /* The runner (same uid) opens our pipes through /proc/<pid>/fd: a
   * credential change made us undumpable, which would refuse it. */
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  char cwd[SBX_PROTO_MAX_PATH];
  if (!getcwd(cwd, sizeof cwd))
    fail("cwd", 127);
  struct relay r = {.in_open = true};
  for (int i = 0; i < 3; i++)
    if (pipe2(r.pipes[i], O_CLOEXEC) < 0)
      fail("pipes for the wasm engine", 127);
  struct req q = {0};
  put(&q, "SBX1", 4);
  put_u32(&q, (uint32_t)getpid());
  put_strv(&q, argv);
  put_strv(&q, env);
  put_str(&q, cwd);
  put_u32(&q, (uint32_t)r.pipes[0][0]);
  put_u32(&q, (uint32_t)r.pipes[1][1]);
  put_u32(&q, (uint32_t)r.pipes[2][1]);
  r.sock = connect_runner();
  send_all(r.sock, q.buf, q.len);
  char line[REPLY_MAX];
  if (!read_line(r.sock, line, sizeof line) || !strstr(line, "\"started\"")) {
    if (print_refusal(line)) /* not a program this engine runs */
      _exit(127);
    fail("the wasm engine stopped before the run", 137);
  }
  /* The runner holds its ends now: ours go, so EOF means the job's. */
  close(r.pipes[0][0]);
  close(r.pipes[1][1]);
  close(r.pipes[2][1]);
  relay_run(&r, line, sizeof line);
  const char *e = strstr(line, "\"exit\":");
  if (!e) /* the runner died mid-job: the cgroup's OOM killer, most often */
    fail("the wasm engine stopped during the run", 137);
  print_refusal(line);
  _exit(atoi(e + 7) & 255);
}
