/* test_sandbox.c — the sandbox client (runtime/sandbox.h) and sbx-init,
 * against real `process` sandboxes.  Needs the sbx-init binary: its path
 * comes in SBX_INIT_PATH (set by meson).  Each check names what broke. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "init/launch.h"
#include "init/proto.h"
#include "runtime/driver.h"
#include "runtime/sandbox.h"

static int failures;
#define CHECK(c)                                                                                \
  do {                                                                                          \
    if (!(c)) {                                                                                 \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, __func__, #c);       \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)

static char state_dir[256];
static bool private_mounts; /* main() unshared the mount namespace (root) */
static struct sbx_driver_env env;

static struct sbx_sandbox *make_sandbox(const char *id)
{
  struct sbx_sandbox_spec spec = {.id = id, .profile = "test", .image = "host"};
  struct sbx_sandbox *sb = NULL;
  struct sbx_error err = {0};
  if (sbx_drv_process.create(&spec, &sb, &err) < 0) {
    fprintf(stderr, "create %s: %s\n", id, err.msg);
    exit(1);
  }
  return sb;
}

static char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work", "FOO=bar baz", NULL};

static int run(struct sbx_sandbox *sb, struct sbx_exec_result *res, uint64_t timeout_ms,
               const char *stdin_data, char *const *argv)
{
  struct sbx_exec_request req = {.argv = argv,
                                 .env = envp,
                                 .timeout_ms = timeout_ms,
                                 .stdin_data = stdin_data,
                                 .stdin_len = stdin_data ? strlen(stdin_data) : 0};
  struct sbx_error err = {0};
  int r = sbx_sandbox_exec(sb, &req, res, &err);
  if (r < 0)
    fprintf(stderr, "  exec %s: %s\n", argv[0], err.msg);
  return r;
}

static int sh(struct sbx_sandbox *sb, struct sbx_exec_result *res, uint64_t timeout_ms,
              const char *script)
{
  char *argv[] = {"sh", "-c", (char *)script, NULL};
  return run(sb, res, timeout_ms, NULL, argv);
}

/* Does any process on the host have marker in its command line? */
static bool marker_alive(const char *marker)
{
  DIR *d = opendir("/proc");
  struct dirent *e;
  bool found = false;
  while (d && (e = readdir(d)) && !found) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    char p[64], buf[4096];
    snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
      if (!buf[i])
        buf[i] = ' ';
    if (n > 0) {
      buf[n] = 0;
      found = strstr(buf, marker) != NULL;
    }
  }
  if (d)
    closedir(d);
  return found;
}

static void test_basic(struct sbx_sandbox *sb)
{
  struct sbx_exec_result res;
  char *echo[] = {"echo", "hello", NULL};
  CHECK(run(sb, &res, 5000, NULL, echo) == 0);
  CHECK(res.status == SBX_ST_SUCCEEDED && res.reason == SBX_RS_EXIT && res.exit_code == 0);
  CHECK(res.std_out.len == 6 && !strcmp(res.std_out.buf, "hello\n"));
  CHECK(res.std_err.len == 0 && !res.std_out.truncated);
  sbx_exec_result_free(&res);

  /* argv bigger than one datagram travels in a sealed memfd */
  size_t big = 100000; /* > one datagram, < MAX_ARG_STRLEN */
  char *arg = malloc(big + 1);
  memset(arg, 'y', big);
  arg[big] = 0;
  char *len[] = {"sh", "-c", "printf %s \"${#1}\"", "sh", arg, NULL};
  CHECK(run(sb, &res, 5000, NULL, len) == 0);
  CHECK(res.status == SBX_ST_SUCCEEDED && !strcmp(res.std_out.buf, "100000"));
  sbx_exec_result_free(&res);
  free(arg);

  CHECK(sh(sb, &res, 5000, "exit 3") == 0);
  CHECK(res.status == SBX_ST_FAILED && res.reason == SBX_RS_EXIT && res.exit_code == 3);
  sbx_exec_result_free(&res);

  CHECK(sh(sb, &res, 5000, "kill -9 $$") == 0);
  CHECK(res.status == SBX_ST_KILLED && res.reason == SBX_RS_SIGNAL && res.signal == 9);
  CHECK(res.exit_code == -1);
  sbx_exec_result_free(&res);

  CHECK(sh(sb, &res, 5000, "echo \"$FOO\"; echo $HOME; echo err >&2") == 0);
  CHECK(!strncmp(res.std_out.buf, "bar baz\n", 8));
  /* process driver: HOME=/work is translated to the sandbox's dir */
  char home[80];
  snprintf(home, sizeof home, "/%s/work\n", sb->id);
  CHECK(strstr(res.std_out.buf, home) != NULL);
  CHECK(!strcmp(res.std_err.buf, "err\n"));
  sbx_exec_result_free(&res);
}

static void test_stdin_cwd_missing(struct sbx_sandbox *sb)
{
  struct sbx_exec_result res;
  /* 300 KB of stdin: more than a pipe buffer, so writes and reads interleave */
  size_t n = 300 * 1024;
  char *in = malloc(n + 1);
  for (size_t i = 0; i < n; i++)
    in[i] = (char)('a' + i % 26);
  in[n] = 0;
  char *cat[] = {"cat", NULL};
  CHECK(run(sb, &res, 5000, in, cat) == 0);
  CHECK(res.status == SBX_ST_SUCCEEDED && res.std_out.len == n &&
        !memcmp(res.std_out.buf, in, n));
  sbx_exec_result_free(&res);
  free(in);

  struct sbx_error err = {0};
  CHECK(sbx_sandbox_file_write(sb, "/work/sub/dir/f.txt", "x", 1, &err) == 0);
  char *pwd[] = {"pwd", NULL};
  struct sbx_exec_request req = {.argv = pwd, .env = envp, .cwd = "sub/dir"};
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  CHECK(res.std_out.len > 0 && strstr(res.std_out.buf, "/work/sub/dir\n") != NULL);
  sbx_exec_result_free(&res);
  req.cwd = "/work/nope";
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  CHECK(res.status == SBX_ST_FAILED && res.exit_code == 127);
  CHECK(strstr(res.std_err.buf, "directory") != NULL);
  sbx_exec_result_free(&res);

  char *missing[] = {"no-such-command-xyz", "a", NULL};
  CHECK(run(sb, &res, 5000, NULL, missing) == 0);
  CHECK(res.status == SBX_ST_FAILED && res.reason == SBX_RS_EXIT && res.exit_code == 127);
  CHECK(strstr(res.std_err.buf, "no-such-command-xyz: command not found") != NULL);
  sbx_exec_result_free(&res);
}

static void test_timeout(struct sbx_sandbox *sb)
{
  struct sbx_exec_result res;
  uint64_t t0 = sbx_now_ms();
  CHECK(sh(sb, &res, 1000, "echo before; trap '' TERM; sleep 100") == 0);
  uint64_t dt = sbx_now_ms() - t0;
  CHECK(res.status == SBX_ST_TIMEOUT && res.reason == SBX_RS_TIMEOUT);
  CHECK(dt >= 1000 && dt < 2000);
  CHECK(res.duration_ms >= 1000 && res.duration_ms < 2000);
  CHECK(!strcmp(res.std_out.buf, "before\n"));
  sbx_exec_result_free(&res);

  /* a double-forked, setsid'd grandchild is found and killed */
  CHECK(sh(sb, &res, 800, "(setsid sleep 1000.111 &) ; sleep 100") == 0);
  CHECK(res.status == SBX_ST_TIMEOUT);
  CHECK(!marker_alive("sleep 1000.111"));
  sbx_exec_result_free(&res);

  /* the main process exits leaving a background child: prompt, child gone */
  t0 = sbx_now_ms();
  CHECK(sh(sb, &res, 10000, "sleep 1000.222 & echo done") == 0);
  CHECK(sbx_now_ms() - t0 < 2000);
  CHECK(res.status == SBX_ST_SUCCEEDED && !strcmp(res.std_out.buf, "done\n"));
  CHECK(!marker_alive("sleep 1000.222"));
  sbx_exec_result_free(&res);
}

static void test_big_output(struct sbx_sandbox *sb)
{
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  char *argv[] = {"sh", "-c", "printf HEAD; head -c 60000000 /dev/zero; printf TAIL", NULL};
  struct sbx_exec_request req = {.argv = argv,
                                 .env = envp,
                                 .timeout_ms = 30000,
                                 .output_cap = 1048576};
  struct sbx_exec_result res;
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  uint64_t dt = sbx_now_ms() - t0;
  getrusage(RUSAGE_SELF, &ru1);
  CHECK(res.status == SBX_ST_SUCCEEDED);
  CHECK(res.std_out.truncated && res.std_out.len == 1048576);
  CHECK(res.std_out.dropped == 60000008ull - 1048576);
  CHECK(!memcmp(res.std_out.buf, "HEAD\0\0", 6));
  CHECK(!memcmp(res.std_out.buf + res.std_out.len - 5, "\0TAIL", 5));
  CHECK(dt < 10000);
  /* bounded memory: the capture (2 × 1 MiB) plus slack, not 60 MB */
  CHECK(ru1.ru_maxrss - ru0.ru_maxrss < 24 * 1024);
  fprintf(stderr, "  60 MB output: %llu ms, maxrss +%ld KiB\n", (unsigned long long)dt,
          ru1.ru_maxrss - ru0.ru_maxrss);
  sbx_exec_result_free(&res);
}

struct cancel_arg {
  struct sbx_cancel *c;
};

static void *fire_later(void *p)
{
  struct cancel_arg *a = p;
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
  sbx_cancel_fire(a->c, SBX_RS_CANCELLED);
  return NULL;
}

static void test_cancel(struct sbx_sandbox *sb)
{
  struct sbx_cancel c;
  CHECK(sbx_cancel_init(&c) == 0);
  struct cancel_arg a = {&c};
  pthread_t t;
  pthread_create(&t, NULL, fire_later, &a);
  char *argv[] = {"sleep", "1000.333", NULL};
  struct sbx_exec_request req = {.argv = argv, .env = envp, .timeout_ms = 20000, .cancel = &c};
  struct sbx_exec_result res;
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  CHECK(sbx_now_ms() - t0 < 2000);
  CHECK(res.status == SBX_ST_KILLED && res.reason == SBX_RS_CANCELLED);
  CHECK(!marker_alive("sleep 1000.333"));
  sbx_exec_result_free(&res);
  pthread_join(t, NULL);
  sbx_cancel_destroy(&c);
}

struct conc {
  struct sbx_sandbox *sb;
  int i;
  bool ok;
};

static void *conc_exec(void *p)
{
  struct conc *c = p;
  char script[64], want[32];
  snprintf(script, sizeof script, "sleep 0.2; echo job%d", c->i);
  snprintf(want, sizeof want, "job%d\n", c->i);
  struct sbx_exec_result res;
  c->ok = sh(c->sb, &res, 10000, script) == 0 && res.status == SBX_ST_SUCCEEDED &&
          !strcmp(res.std_out.buf, want);
  sbx_exec_result_free(&res);
  return NULL;
}

static void test_concurrent(struct sbx_sandbox *sb)
{
  struct conc c[8];
  pthread_t t[8];
  uint64_t t0 = sbx_now_ms();
  for (int i = 0; i < 8; i++) {
    c[i] = (struct conc){sb, i, false};
    pthread_create(&t[i], NULL, conc_exec, &c[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(t[i], NULL);
    CHECK(c[i].ok);
  }
  CHECK(sbx_now_ms() - t0 < 1500); /* they ran in parallel */
}

static char *read_file(struct sbx_sandbox *sb, const char *path, struct sbx_error *err)
{
  int fd;
  uint64_t size;
  if (sbx_sandbox_file_open_read(sb, path, &fd, &size, err) < 0)
    return NULL;
  char *buf = calloc(1, size + 1);
  if (sbx_read_all(fd, buf, size) != (ssize_t)size) {
    free(buf);
    buf = NULL;
  }
  close(fd);
  return buf;
}

static void test_files(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  CHECK(sbx_sandbox_file_write(sb, "/work/a/b/c.txt", "content", 7, &err) == 0);
  char *s = read_file(sb, "a/b/c.txt", &err);
  CHECK(s && !strcmp(s, "content"));
  free(s);
  struct sbx_exec_result res;
  CHECK(sh(sb, &res, 5000, "cat a/b/c.txt; stat -c %U a/b/c.txt") == 0);
  CHECK(!strncmp(res.std_out.buf, "content", 7));
  CHECK(geteuid() != 0 || strstr(res.std_out.buf, "nobody") != NULL);
  sbx_exec_result_free(&res);

  CHECK(sbx_sandbox_file_write(sb, "/work/a/b/d", "12345", 5, &err) == 0);
  struct sbx_dirent *ents = NULL;
  size_t n = 0;
  CHECK(sbx_sandbox_list(sb, "/work/a/b", &ents, &n, 100, &err) == 0);
  CHECK(n == 2);
  if (n == 2) {
    CHECK(!strcmp(ents[0].name, "c.txt") && !strcmp(ents[0].type, "file") && ents[0].size == 7);
    CHECK(!strcmp(ents[0].path, "/work/a/b/c.txt") && ents[0].mode == 0644);
    CHECK(!strcmp(ents[1].name, "d") && ents[1].size == 5 && ents[1].mtime > 1600000000);
  }
  free(ents);
  CHECK(sbx_sandbox_list(sb, "/work/a/b", &ents, &n, 1, &err) < 0 &&
        err.code == SBX_E_TOO_LARGE);
  CHECK(sbx_sandbox_list(sb, "/work/a/b/c.txt", &ents, &n, 10, &err) < 0 &&
        err.code == SBX_E_INVALID);
  CHECK(sbx_sandbox_remove(sb, "/work/a", &err) == 0);
  CHECK(read_file(sb, "/work/a/b/c.txt", &err) == NULL && err.code == SBX_E_NOT_FOUND);
  CHECK(sbx_sandbox_remove(sb, "/work/a", &err) < 0 && err.code == SBX_E_NOT_FOUND);
  CHECK(read_file(sb, "/work", &err) == NULL && err.code == SBX_E_INVALID);
}

static void test_glob(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  const char *files[] = {"/work/out/a.txt", "/work/out/b.txt", "/work/out/c.log",
                         "/work/out/.hidden.txt", "/work/out/sub/d.txt"};
  for (int i = 0; i < 5; i++)
    CHECK(sbx_sandbox_file_write(sb, files[i], "x", 1, &err) == 0);
  char **v = NULL;
  size_t n = 0;
  CHECK(sbx_sandbox_glob(sb, "/work/out/*.txt", &v, &n, 100, &err) == 0);
  CHECK(n == 2);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    seen |= !strcmp(v[i], "/work/out/a.txt") ? 1 : !strcmp(v[i], "/work/out/b.txt") ? 2 : 4;
    free(v[i]);
  }
  free(v);
  CHECK(seen == 3);
  CHECK(sbx_sandbox_glob(sb, "out/*/d.txt", &v, &n, 100, &err) == 0);
  CHECK(n == 1 && !strcmp(v[0], "/work/out/sub/d.txt"));
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
  CHECK(sbx_sandbox_glob(sb, "/work/out/*", &v, &n, 1, &err) < 0 && err.code == SBX_E_TOO_LARGE);
  CHECK(sbx_sandbox_glob(sb, "/work/nothing/*", &v, &n, 10, &err) == 0 && n == 0);
  free(v);
  CHECK(sbx_sandbox_glob(sb, "/work/../../etc/*", &v, &n, 10, &err) < 0);
}

static void test_hostile_paths(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  CHECK(read_file(sb, "../../etc/passwd", &err) == NULL && err.code == SBX_E_INVALID);
  CHECK(read_file(sb, "/../../etc/shadow", &err) == NULL && err.code == SBX_E_INVALID);
  struct sbx_exec_result res;
  CHECK(sh(sb, &res, 5000,
           "ln -s / escape && ln -s /etc/passwd pw && ln -s /etc etc && "
           "mkfifo fifo") == 0);
  CHECK(res.status == SBX_ST_SUCCEEDED);
  sbx_exec_result_free(&res);
  /* "/" planted by the sandbox resolves to the sandbox root, not the host */
  CHECK(read_file(sb, "/work/escape/etc/hostname", &err) == NULL && err.code == SBX_E_NOT_FOUND);
  CHECK(read_file(sb, "/work/etc/hostname", &err) == NULL && err.code == SBX_E_NOT_FOUND);
  CHECK(read_file(sb, "/work/pw", &err) == NULL); /* final symlink never followed */
  CHECK(sbx_sandbox_file_write(sb, "/work/escape/sbx_escape_test", "x", 1, &err) < 0 ||
        access("/sbx_escape_test", F_OK) < 0);
  CHECK(access("/sbx_escape_test", F_OK) < 0);
  CHECK(sbx_sandbox_file_write(sb, "/work/pw", "x", 1, &err) < 0);
  /* a planted FIFO must fail fast, not hang sbx-init */
  uint64_t t0 = sbx_now_ms();
  CHECK(read_file(sb, "/work/fifo", &err) == NULL && err.code == SBX_E_INVALID);
  int fd = -1;
  CHECK(sbx_sandbox_file_open_write(sb, "/work/fifo", 0644, &fd, &err) < 0);
  CHECK(sbx_now_ms() - t0 < 1000);
  /* removing through a symlink removes the link only */
  CHECK(sbx_sandbox_remove(sb, "/work/etc", &err) == 0);
  CHECK(access("/etc/passwd", F_OK) == 0);
  /* globbing through the planted "/" sees the sandbox root, not host /etc */
  char **v = NULL;
  size_t n = 99;
  CHECK(sbx_sandbox_glob(sb, "/work/escape/etc/*", &v, &n, 10, &err) == 0 && n == 0);
  free(v);
  CHECK(sbx_sandbox_alive(sb));
}

/* ---- fd-in: the forms a gVisor sandbox needs, forced on a
 * process sandbox (sb->fd_in), so each is tested without gVisor. ---- */

/* sbx-init's READY says FDIN with --fd-in, and not without (fds can leave
 * a process sandbox). */
static void test_fdin_ready(void)
{
  const char *init = getenv("SBX_INIT_PATH");
  for (int forced = 0; forced < 2; forced++) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(sv[1], 3);
      char *argv[] = {(char *)init, "--root", state_dir, forced ? "--fd-in" : NULL, NULL};
      execv(init, argv);
      _exit(127);
    }
    close(sv[1]);
    uint32_t flags = 99;
    struct sbx_error err = {0};
    CHECK(sbx_init_handshake_ex(sv[0], 5000, &flags, &err) > 0);
    CHECK(flags == (forced ? SBX_PROTO_READY_FDIN : 0));
    close(sv[0]); /* EOF: sbx-init exits */
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
}

/* open_write hands out a spool file; it lands (bytes, mode, mtime) once
 * closed, before the next request sees the sandbox. */
static void test_fdin_open_write(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  int fd = -1;
  CHECK(sbx_sandbox_file_open_write(sb, "/work/ow/f", 0600, &fd, &err) == 0 && fd >= 0);
  CHECK(write(fd, "hello", 5) == 5);
  CHECK(fchmod(fd, 0751) == 0);
  struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1234567890}};
  CHECK(futimens(fd, ts) == 0);
  struct sbx_stat st;
  /* still open: created empty, not committed yet */
  CHECK(sbx_sandbox_stat(sb, "/work/ow/f", &st, &err) == 0 && st.size == 0);
  close(fd);
  CHECK(sbx_sandbox_stat(sb, "/work/ow/f", &st, &err) == 0);
  CHECK(st.size == 5 && st.mode == 0751 && st.mtime == 1234567890);
  /* statfs: the filesystem holding a path, read inside the sandbox */
  struct sbx_statfs fs;
  CHECK(sbx_sandbox_statfs(sb, "/work/ow", &fs, &err) == 0);
  CHECK(fs.total_bytes > 0 && fs.free_bytes <= fs.total_bytes);
  CHECK(sbx_sandbox_statfs(sb, "/work/ow/missing", &fs, &err) < 0);
  uint64_t size = 0;
  CHECK(sbx_sandbox_file_open_read(sb, "/work/ow/f", &fd, &size, &err) == 0);
  struct stat hs;
  char buf[16] = {0};
  CHECK(size == 5 && fstat(fd, &hs) == 0 && S_ISREG(hs.st_mode) && (hs.st_mode & 0777) == 0751);
  CHECK(pread(fd, buf, sizeof buf, 0) == 5 && !strcmp(buf, "hello"));
  close(fd);
  /* errors come at open, as with a real file: a directory is refused */
  CHECK(sbx_sandbox_file_open_write(sb, "/work/ow", 0644, &fd, &err) < 0);

  /* empty (and /proc-like size 0) files: EOF at once, no transfer */
  CHECK(sbx_sandbox_file_write(sb, "/work/ow/empty", "", 0, &err) == 0);
  uint64_t t0 = sbx_now_ms();
  CHECK(sbx_sandbox_file_open_read(sb, "/work/ow/empty", &fd, &size, &err) == 0 && size == 0);
  CHECK(sbx_now_ms() - t0 < 1000);
  if (fd >= 0)
    close(fd);

  /* bigger than every buffer on the way, both directions */
  size_t big = 3u << 20;
  char *data = malloc(big);
  for (size_t i = 0; i < big; i++)
    data[i] = (char)(i * 131 + (i >> 12));
  CHECK(sbx_sandbox_file_write(sb, "/work/ow/big", data, big, &err) == 0);
  char *back = read_file(sb, "/work/ow/big", &err);
  CHECK(back && !memcmp(back, data, big));
  free(back);
  free(data);
}

struct term {
  pthread_mutex_t lock;
  int pty_fd;
  char out[4096];
  size_t len;
};

static void term_out(void *ctx, int stream, const char *data, size_t len, uint64_t off)
{
  struct term *t = ctx;
  pthread_mutex_lock(&t->lock);
  if (stream == 1 && t->len + len < sizeof t->out) {
    memcpy(t->out + t->len, data, len);
    t->len += len;
  }
  pthread_mutex_unlock(&t->lock);
}

static void term_started(void *ctx, pid_t pid, int ctl_fd, int pty_fd)
{
  struct term *t = ctx;
  close(ctl_fd);
  pthread_mutex_lock(&t->lock);
  t->pty_fd = pty_fd;
  pthread_mutex_unlock(&t->lock);
}

static bool term_has(struct term *t, const char *s)
{
  pthread_mutex_lock(&t->lock);
  t->out[t->len] = '\0';
  bool r = strstr(t->out, s) != NULL;
  pthread_mutex_unlock(&t->lock);
  return r;
}

static void *term_drive(void *p)
{
  struct term *t = p;
  uint64_t t0 = sbx_now_ms();
  while (!term_has(t, "24 80") && sbx_now_ms() - t0 < 5000)
    usleep(10000);
  pthread_mutex_lock(&t->lock);
  int fd = t->pty_fd;
  pthread_mutex_unlock(&t->lock);
  struct sbx_error err = {0};
  CHECK(fd >= 0 && sbx_exec_resize(fd, 100, 40, &err) == 0);
  usleep(100000);
  CHECK(fd >= 0 && write(fd, "abc\n", 4) == 4);
  return NULL;
}

/* A process sandbox has no /dev: give it a devpts instance of its own
 * (in this test's private mount namespace) and dev/ptmx → pts/ptmx. */
static bool give_ptys(struct sbx_sandbox *sb)
{
  char dev[4200], pts[4300], ptmx[4300];
  snprintf(dev, sizeof dev, "%s/dev", sb->host_root);
  snprintf(pts, sizeof pts, "%s/pts", dev);
  snprintf(ptmx, sizeof ptmx, "%s/ptmx", dev);
  mkdir(dev, 0755);
  mkdir(pts, 0755);
  symlink("pts/ptmx", ptmx);
  return mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620") == 0;
}

/* PTY_RELAY: output, input, window size and resize through the shepherd. */
static void test_fdin_terminal(struct sbx_sandbox *sb)
{
  if (!private_mounts || !give_ptys(sb)) {
    fprintf(stderr, "  skipped: needs root for a devpts in the sandbox\n");
    return;
  }
  struct term t = {.lock = PTHREAD_MUTEX_INITIALIZER, .pty_fd = -1};
  struct sbx_exec_live live = {
      .stdin_fd = -1, .pty = true, .cols = 80, .rows = 24, .on_started = term_started};
  char *argv[] = {"sh", "-c", "stty size; [ -t 0 ] && echo tty; read l; stty size; echo got:$l",
                  NULL};
  struct sbx_exec_request req = {.argv = argv,
                                 .env = envp,
                                 .timeout_ms = 10000,
                                 .on_output = term_out,
                                 .on_output_ctx = &t,
                                 .live = &live};
  pthread_t th;
  pthread_create(&th, NULL, term_drive, &t);
  struct sbx_exec_result res;
  struct sbx_error err = {0};
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  if (res.status != SBX_ST_SUCCEEDED)
    fprintf(stderr, "  terminal exec: %s %s\n", err.msg, res.error);
  pthread_join(th, NULL);
  CHECK(res.status == SBX_ST_SUCCEEDED);
  CHECK(term_has(&t, "24 80") && term_has(&t, "tty") && term_has(&t, "40 100") &&
        term_has(&t, "got:abc"));
  if (!term_has(&t, "got:abc"))
    fprintf(stderr, "  terminal said: %s\n", t.out);
  /* the exec is over: resizing is a conflict now, not a crash */
  CHECK(t.pty_fd >= 0 && sbx_exec_resize(t.pty_fd, 10, 10, &err) < 0 &&
        err.code == SBX_E_CONFLICT);
  if (t.pty_fd >= 0)
    close(t.pty_fd);
  sbx_exec_result_free(&res);
}

static void *echo_server(void *p)
{
  int lfd = *(int *)p;
  int c = accept(lfd, NULL, NULL);
  char buf[65536];
  ssize_t n;
  while (c >= 0 && (n = read(c, buf, sizeof buf)) > 0)
    CHECK(sbx_write_all(c, buf, (size_t)n) == n);
  if (c >= 0)
    close(c); /* after the client's half-close: the relay passes it on */
  return NULL;
}

/* CONNECT + socket: sbx-init connects and relays (the process sandbox
 * shares the host's loopback, so a host listener stands in). */
static void test_fdin_connect(struct sbx_sandbox *sb)
{
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0 &&
        getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
  unsigned port = ntohs(a.sin_port);
  pthread_t th;
  pthread_create(&th, NULL, echo_server, &lfd);
  struct sbx_error err = {0};
  int fd = -1;
  CHECK(sbx_sandbox_connect(sb, port, 2000, &fd, &err) == 0 && fd >= 0);
  size_t big = 1u << 20, sent = 0, got = 0;
  char *out = malloc(big), *in = malloc(big + 1);
  for (size_t i = 0; i < big; i++)
    out[i] = (char)(i % 251);
  uint64_t t0 = sbx_now_ms();
  bool eof = false;
  while (!eof && sbx_now_ms() - t0 < 10000) { /* non-blocking both ways */
    struct pollfd pf = {.fd = fd, .events = POLLIN | (sent < big ? POLLOUT : 0)};
    poll(&pf, 1, 100);
    if (sent < big) {
      ssize_t n = write(fd, out + sent, big - sent);
      if (n > 0 && (sent += (size_t)n) == big)
        shutdown(fd, SHUT_WR);
    }
    ssize_t n = read(fd, in + got, big + 1 - got);
    if (n > 0)
      got += (size_t)n;
    eof = n == 0;
  }
  CHECK(eof && got == big && !memcmp(in, out, big));
  close(fd);
  pthread_join(th, NULL);
  close(lfd);
  free(out);
  free(in);
  /* nothing listens there any more: refused on both families → 502 */
  CHECK(sbx_sandbox_connect(sb, port, 2000, &fd, &err) < 0 && err.code == SBX_E_BAD_GATEWAY);
  CHECK(sbx_sandbox_alive(sb));
}

/* WATCH with the daemon's pipe (every sandbox now). */
static void test_fdin_watch(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  CHECK(sbx_sandbox_mkdir(sb, "/work/wd", 0, SBX_MKDIR_PARENTS, &err) == 0);
  int fd = -1;
  CHECK(sbx_sandbox_watch(sb, "/work/wd", true, 16, &fd, &err) == 0 && fd >= 0);
  static struct sbx_watch_reader r;
  struct sbx_watch_event ev;
  bool ready = false, created = false;
  uint64_t t0 = sbx_now_ms();
  while (!created && sbx_now_ms() - t0 < 5000) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    poll(&pf, 1, 100);
    if (sbx_watch_reader_fill(&r, fd) != 0)
      break;
    while (sbx_watch_reader_next(&r, &ev) == 1) {
      if (ev.kind == SBX_WATCH_READY) {
        ready = true;
        CHECK(sbx_sandbox_file_write(sb, "/work/wd/x", "1", 1, &err) == 0);
      }
      created |= ev.kind == SBX_WATCH_CREATE && !strcmp(ev.path, "x");
    }
  }
  CHECK(ready && created);
  close(fd);
}

static void test_init_killed(void)
{
  struct sbx_sandbox *sb = make_sandbox("t_killed");
  CHECK(sbx_sandbox_alive(sb));
  CHECK(kill(sb->init_pid, SIGKILL) == 0);
  waitpid(sb->init_pid, NULL, 0);
  struct sbx_exec_result res;
  char *echo[] = {"echo", "x", NULL};
  struct sbx_exec_request req = {.argv = echo, .env = envp};
  struct sbx_error err = {0};
  /* A result, not an error: the sandbox is gone and the result says so. */
  CHECK(sbx_sandbox_exec(sb, &req, &res, &err) == 0);
  CHECK(res.status == SBX_ST_ERROR && res.reason == SBX_RS_SANDBOX_LOST);
  CHECK(strstr(res.error, "sandbox lost") != NULL);
  sbx_exec_result_free(&res);
  CHECK(!sbx_sandbox_alive(sb));
  sbx_drv_process.destroy(sb);
}

/* The workload kills its own shepherd (its parent): sbx-init still
 * answers, so the exec is killed/shepherd_lost and the sandbox serves on. */
static void test_shepherd_killed(void)
{
  struct sbx_sandbox *sb = make_sandbox("t_shepherd");
  struct sbx_exec_result res;
  CHECK(sh(sb, &res, 20000, "echo before; kill -9 $PPID; sleep 5; echo after") == 0);
  CHECK(res.status == SBX_ST_KILLED && res.reason == SBX_RS_SHEPHERD_LOST);
  CHECK(res.std_out.buf && !strstr(res.std_out.buf, "after"));
  CHECK(res.oom_kills == 0 && res.error[0]);
  CHECK(!strcmp(sbx_reason_name(SBX_RS_SHEPHERD_LOST), "shepherd_lost"));
  sbx_exec_result_free(&res);
  CHECK(sbx_sandbox_alive(sb));
  for (int i = 0; i < 3; i++) { /* idle shepherds went too: the next execs fork afresh */
    CHECK(sh(sb, &res, 20000, "echo ok") == 0);
    CHECK(res.status == SBX_ST_SUCCEEDED && res.std_out.buf && !strcmp(res.std_out.buf, "ok\n"));
    sbx_exec_result_free(&res);
  }
  sbx_drv_process.destroy(sb);
}

static void *exec_long(void *p)
{
  struct sbx_exec_result res;
  sh(p, &res, 60000, "sleep 1000.444");
  sbx_exec_result_free(&res);
  return NULL;
}

static void test_destroy(void)
{
  struct sbx_sandbox *sb = make_sandbox("t_destroy");
  pid_t init = sb->init_pid;
  char dir[512];
  snprintf(dir, sizeof dir, "%s/sandboxes/t_destroy", state_dir);
  pthread_t t;
  pthread_create(&t, NULL, exec_long, sb);
  for (int i = 0; i < 200 && !marker_alive("sleep 1000.444"); i++)
    usleep(10000);
  CHECK(marker_alive("sleep 1000.444"));
  sbx_drv_process.destroy(sb);
  pthread_join(t, NULL);
  CHECK(!marker_alive("sleep 1000.444"));
  CHECK(kill(init, 0) < 0);
  CHECK(access(dir, F_OK) < 0);
}

static void *create_in_thread(void *p)
{
  *(struct sbx_sandbox **)p = make_sandbox("t_thread");
  return NULL;
}

/* sbx-init's PDEATHSIG follows the forking *thread*: a sandbox made by a
 * thread that then exits must stay alive. */
static void test_creator_thread_exits(void)
{
  struct sbx_sandbox *sb = NULL;
  pthread_t t;
  pthread_create(&t, NULL, create_in_thread, &sb);
  pthread_join(t, NULL);
  usleep(100000);
  CHECK(sbx_sandbox_alive(sb));
  struct sbx_exec_result res;
  CHECK(sh(sb, &res, 5000, "echo ok") == 0 && res.status == SBX_ST_SUCCEEDED);
  sbx_exec_result_free(&res);
  sbx_drv_process.destroy(sb);
}

static void test_recover(void)
{
  struct sbx_sandbox *sb = make_sandbox("t_recover");
  pid_t init = sb->init_pid;
  CHECK(sbx_drv_process.recover(&env) >= 1);
  bool gone = false;
  for (int i = 0; i < 300 && !gone; i++) {
    gone = waitpid(init, NULL, WNOHANG) == init;
    if (!gone)
      usleep(10000);
  }
  CHECK(gone);
  if (!gone) {
    kill(init, SIGKILL);
    waitpid(init, NULL, 0);
  }
  char dir[512];
  snprintf(dir, sizeof dir, "%s/sandboxes/t_recover", state_dir);
  CHECK(access(dir, F_OK) < 0);
  free(sb->priv);
  sbx_sandbox_free(sb);
}

static void test_registry(void)
{
  char why[256];
  struct sbx_driver_env off = env;
  off.unsafe_process_enabled = false;
  CHECK(sbx_drv_process.probe(&off, why, sizeof why) < 0 && strstr(why, "--enable-unsafe"));
  CHECK(sbx_driver_find("process") == &sbx_drv_process);
  CHECK(sbx_driver_find("nope") == NULL);
  const struct sbx_driver *g = sbx_driver_find("gvisor");
  if (g) {
    struct sbx_sandbox *sb = NULL;
    struct sbx_error err = {0};
    struct sbx_sandbox_spec spec = {.id = "g"};
    /* a missing runsc fails closed (the real runsc is exercised by
     * tests/integration/test_gvisor.py) */
    struct sbx_driver_env broken = env;
    broken.runsc_path = "/nonexistent/runsc";
    CHECK(g->probe(&broken, why, sizeof why) < 0 && strstr(why, "runsc not found"));
    CHECK(g->create(&spec, &sb, &err) < 0 && err.code == SBX_E_RUNTIME_UNAVAILABLE && !sb);
  }
  CHECK(!strcmp(sbx_cap_name(SBX_CAP_CONTEXTS), "contexts"));
  enum sbx_status s;
  CHECK(sbx_status_parse("oom_killed", &s) == 0 && s == SBX_ST_OOM_KILLED);
  CHECK(!strcmp(sbx_reason_name(SBX_RS_SANDBOX_LOST), "sandbox_lost"));
  CHECK(!strcmp(sbx_reason_name(SBX_RS_NONE), ""));
  CHECK(sbx_drv_process.probe(&env, why, sizeof why) == 0);
}

/* ---- the microVM link: sbx-vm's two relays (vm/link.h) between the
 * client and a real sbx-init, outside any VM, so every form a microVM
 * sandbox uses crosses the byte-stream link and its windows. ---- */

static pid_t spawn_relay(const char *vm, bool guest, int chan, int link)
{
  pid_t p = fork();
  if (p == 0) {
    char c[16], l[16];
    fcntl(chan, F_SETFD, 0);
    fcntl(link, F_SETFD, 0);
    snprintf(c, sizeof c, "%d", chan);
    snprintf(l, sizeof l, "%d", link);
    if (guest)
      execl(vm, "sbx-vm", "relay", "--guest", "--chan-fd", c, "--link-fd", l, (char *)NULL);
    else
      execl(vm, "sbx-vm", "relay", "--chan-fd", c, "--link-fd", l, (char *)NULL);
    _exit(127);
  }
  return p;
}

/* Puts the host relay, the link and the guest relay between sb's client
 * and its sbx-init; the relays' pids go to pids[2]. */
static void interpose_link(struct sbx_sandbox *sb, const char *vm, pid_t pids[2])
{
  int d[2], l[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, d) < 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l) < 0) {
    perror("socketpair");
    exit(1);
  }
  pids[0] = spawn_relay(vm, false, d[1], l[0]);
  pids[1] = spawn_relay(vm, true, sb->init_fd, l[1]);
  close(d[1]);
  close(l[0]);
  close(l[1]);
  close(sb->init_fd);
  sb->init_fd = d[0];
}

static void run_case(struct sbx_sandbox *sb, const char *pass, const char *name,
                     void (*fn)(struct sbx_sandbox *))
{
  int before = failures;
  uint64_t t0 = sbx_now_ms();
  fn(sb);
  fprintf(stderr, "%s %s %s (%llu ms)\n", failures == before ? "ok  " : "FAIL", pass, name,
          (unsigned long long)(sbx_now_ms() - t0));
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  /* Before any thread: mounts the tests make stay in here. */
  private_mounts = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
                   mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
  const char *init = getenv("SBX_INIT_PATH");
  if (!init) {
    fprintf(stderr, "SBX_INIT_PATH not set\n");
    return 1;
  }
  snprintf(state_dir, sizeof state_dir, "/tmp/sbx-test-sandbox-XXXXXX");
  if (!mkdtemp(state_dir))
    return 1;
  env = (struct sbx_driver_env){.state_dir = state_dir,
                                .init_path = init,
                                .unsafe_process_enabled = true};
  test_registry();
  struct sbx_sandbox *sb = make_sandbox("t_main");
  struct {
    const char *name;
    void (*fn)(struct sbx_sandbox *);
  } tests[] = {
      {"basic", test_basic},
      {"stdin_cwd_missing", test_stdin_cwd_missing},
      {"timeout", test_timeout},
      {"big_output", test_big_output},
      {"cancel", test_cancel},
      {"concurrent", test_concurrent},
      {"files", test_files},
      {"glob", test_glob},
      {"hostile_paths", test_hostile_paths},
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    int before = failures;
    uint64_t t0 = sbx_now_ms();
    tests[i].fn(sb);
    fprintf(stderr, "%s %s (%llu ms)\n", failures == before ? "ok  " : "FAIL", tests[i].name,
            (unsigned long long)(sbx_now_ms() - t0));
  }
  sbx_drv_process.destroy(sb);

  /* fd-in: the same client over the forms gVisor needs. */
  test_fdin_ready();
  sb = make_sandbox("t_fdin");
  sb->fd_in = true;
  sb->spool_dir = strdup(state_dir);
  struct {
    const char *name;
    void (*fn)(struct sbx_sandbox *);
  } fdin[] = {
      {"fdin files", test_files},
      {"fdin glob", test_glob},
      {"fdin hostile_paths", test_hostile_paths},
      {"fdin open_write", test_fdin_open_write},
      {"fdin terminal", test_fdin_terminal},
      {"fdin connect", test_fdin_connect},
      {"fdin watch", test_fdin_watch},
  };
  for (size_t i = 0; i < sizeof fdin / sizeof fdin[0]; i++) {
    int before = failures;
    uint64_t t0 = sbx_now_ms();
    fdin[i].fn(sb);
    fprintf(stderr, "%s %s (%llu ms)\n", failures == before ? "ok  " : "FAIL", fdin[i].name,
            (unsigned long long)(sbx_now_ms() - t0));
  }
  sbx_drv_process.destroy(sb);

  /* The microVM link: the same client and sbx-init, both relays between. */
  const char *vm = getenv("SBX_VM_PATH");
  if (vm) {
    pid_t relays[2];
    sb = make_sandbox("t_link");
    sb->fd_in = true;
    sb->spool_dir = strdup(state_dir);
    interpose_link(sb, vm, relays);
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
      run_case(sb, "link", tests[i].name, tests[i].fn);
    for (size_t i = 3; i < sizeof fdin / sizeof fdin[0]; i++) /* the fd-in-only ones */
      run_case(sb, "link", fdin[i].name, fdin[i].fn);
    sbx_drv_process.destroy(sb);
    for (int i = 0; i < 2; i++) {
      int st = -1;
      CHECK(waitpid(relays[i], &st, 0) == relays[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
  }
  test_init_killed();
  test_shepherd_killed();
  test_destroy();
  test_creator_thread_exits();
  test_recover();
  sbx_rm_rf(state_dir);
  fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
