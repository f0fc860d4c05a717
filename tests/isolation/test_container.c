/* test_container.c — the container driver against real sandboxes: the
 * attacks of isolation.md §3 that apply at this layer, the posture probe,
 * limits, teardown, leaks, and create timings (cold and pooled).
 *
 * Runs the static probe (tests/isolation/probe.c) inside sandboxes built
 * by sbx_drv_container, through sbx-init and sbx_sandbox_exec, exactly as
 * the daemon does.  Needs root.  Env: SBX_INIT_PATH, SBX_PROBE_PATH. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/check.h"
#include "common/util.h"
#include "isolation/iso.h"
#include "isolation/pool.h"
#include "runtime/driver.h"
#include "runtime/sandbox.h"

static const struct sbx_driver *drv = &sbx_drv_container;
static char *probe_bytes;
static size_t probe_len;
static unsigned long seq;

static char *envp[] = {"PATH=/usr/bin:/bin", "HOME=/work", NULL};

static struct sbx_sandbox *make(struct sbx_limits lim)
{
  char id[64];
  snprintf(id, sizeof id, "t%d_%lu", (int)getpid(), ++seq);
  struct sbx_sandbox_spec spec = {.id = id, .profile = "test", .image = "host", .limits = lim};
  struct sbx_sandbox *sb = NULL;
  struct sbx_error err = {0};
  if (drv->create(&spec, &sb, &err) < 0) {
    fprintf(stderr, "create: %s\n", err.msg);
    return NULL;
  }
  if (sbx_sandbox_file_write(sb, "/work/probe", probe_bytes, probe_len, &err) < 0) {
    fprintf(stderr, "upload probe: %s\n", err.msg);
    drv->destroy(sb);
    return NULL;
  }
  return sb;
}

/* Runs the probe with verbs; returns its stdout (caller frees) and fills res. */
static char *run(struct sbx_sandbox *sb, const char *const *verbs, struct sbx_exec_result *res)
{
  char *argv[96] = {"/bin/sh", "-c", "chmod 755 /work/probe && exec /work/probe \"$@\"",
                    "probe"};
  int n = 4;
  for (int i = 0; verbs[i] && n < 95; i++)
    argv[n++] = (char *)verbs[i];
  argv[n] = NULL;
  struct sbx_exec_request req = {.argv = argv, .env = envp, .timeout_ms = 30000};
  struct sbx_error err = {0};
  memset(res, 0, sizeof *res);
  if (sbx_sandbox_exec(sb, &req, res, &err) < 0) {
    fprintf(stderr, "exec: %s\n", err.msg);
    return NULL;
  }
  char *out = strdup(res->std_out.buf ? res->std_out.buf : "");
  if (res->std_err.len)
    fprintf(stderr, "probe stderr: %s\n", res->std_err.buf);
  return out;
}

/* The result word after "<verb> " on its line, e.g. "BLOCKED EPERM". */
static const char *outcome(const char *out, const char *verb, char *buf, size_t len)
{
  size_t vl = strlen(verb);
  for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, verb, vl) && l[vl] == ' ') {
      const char *e = strchr(l, '\n');
      size_t n = e ? (size_t)(e - l - vl - 1) : strlen(l + vl + 1);
      snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), l + vl + 1);
      return buf;
    }
  snprintf(buf, len, "(missing)");
  return buf;
}

#define EXPECT(out, verb, want)                                                                 \
  do {                                                                                          \
    char b_[128];                                                                               \
    const char *got_ = outcome(out, verb, b_, sizeof b_);                                       \
    check_total++;                                                                              \
    if (strncmp(got_, want, strlen(want))) {                                                    \
      check_failed_count++;                                                                     \
      fprintf(stderr, "%s:%d: %s: got \"%s\", want \"%s\"\n", __FILE__, __LINE__, verb, got_,   \
              want);                                                                            \
    }                                                                                           \
  } while (0)

static void test_attacks(void)
{
  struct sbx_sandbox *sb = make((struct sbx_limits){.memory_bytes = 256 << 20, .pids = 128});
  CHECK(sb != NULL);
  if (!sb)
    return;
  static const char *const blocked_eperm[] = {"mount",
                                              "umount_proc",
                                              "unshare_user",
                                              "unshare_ns",
                                              "clone_newuser",
                                              "setns",
                                              "pivot_root",
                                              "chroot",
                                              "fsopen",
                                              "open_tree",
                                              "ptrace",
                                              "ptrace_traceme",
                                              "process_vm_readv",
                                              "keyctl",
                                              "add_key",
                                              "bpf",
                                              "perf_event_open",
                                              "io_uring_setup",
                                              "userfaultfd",
                                              "tiocsti",
                                              "tiocsti_high",
                                              "tioclinux",
                                              "open_by_handle_at",
                                              "name_to_handle_at",
                                              "setuid0",
                                              "capset_raise",
                                              "socket_packet",
                                              "socket_raw_inet",
                                              "socket_vsock",
                                              "socket_alg",
                                              "socket_netlink_audit",
                                              "personality",
                                              NULL};
  char killv[32];
  snprintf(killv, sizeof killv, "kill:%d", (int)getpid()); /* the host test process */
  const char *verbs[80];
  int n = 0;
  for (int i = 0; blocked_eperm[i]; i++)
    verbs[n++] = blocked_eperm[i];
  const char *more[] = {"clone3",
                        "fork",
                        "ioctl_fionread",
                        "read_kcore",
                        "write_sysrq",
                        "write_proc_sys",
                        "read_shadow",
                        "write_root",
                        "write_usr",
                        "write_etc",
                        "write_work",
                        "write_tmp",
                        "socket_netlink_route",
                        "socket_inet",
                        "socket_unix",
                        "connect_out",
                        killv,
                        "personality_query",
                        "sys",
                        "ifaces",
                        "hostname",
                        "id",
                        "uid_map",
                        "cgroup",
                        NULL};
  for (int i = 0; more[i]; i++)
    verbs[n++] = more[i];
  verbs[n] = NULL;
  struct sbx_exec_result res;
  char *out = run(sb, verbs, &res);
  CHECK(out != NULL);
  if (out) {
    for (int i = 0; blocked_eperm[i]; i++)
      EXPECT(out, blocked_eperm[i], "BLOCKED EPERM");
    EXPECT(out, "clone3", "BLOCKED ENOSYS"); /* glibc falls back to clone */
    EXPECT(out, "fork", "OK");
    EXPECT(out, "ioctl_fionread", "OK");
    char b[128];
    CHECK(atol(outcome(out, "read_kcore", b, sizeof b)) <= 0); /* never kernel memory */
    CHECK(strncmp(outcome(out, "write_sysrq", b, sizeof b), "OK", 2) != 0);
    EXPECT(out, "write_proc_sys", "BLOCKED");
    EXPECT(out, "read_shadow", "FAILED ENOENT"); /* no host /etc/shadow inside */
    EXPECT(out, "write_root", "BLOCKED EROFS");
    EXPECT(out, "write_usr", "BLOCKED EROFS");
    EXPECT(out, "write_etc", "BLOCKED EROFS");
    EXPECT(out, "write_work", "OK");
    EXPECT(out, "write_tmp", "OK");
    EXPECT(out, "socket_netlink_route", "OK");
    EXPECT(out, "socket_inet", "OK");
    EXPECT(out, "socket_unix", "OK");
    EXPECT(out, "connect_out", "FAILED ENETUNREACH");
    EXPECT(out, "kill", "FAILED ESRCH"); /* host pids are not visible */
    EXPECT(out, "personality_query", "OK");
    EXPECT(out, "sys", "FAILED ENOENT"); /* no /sys */
    CHECK(strstr(out, "iface: lo\n") != NULL);
    CHECK(strstr(out, "iface: ") == strstr(out, "iface: lo\n") &&
          !strstr(strstr(out, "iface: lo\n") + 1, "iface: "));
    CHECK(strstr(out, "hostname: sandbox\n") != NULL);
    CHECK(strstr(out, "id: uid=1000 gid=1000 euid=1000") != NULL);
    CHECK(strstr(out, "cgroup: 0::/\n") != NULL);
    /* uid map: inside 0 is some unprivileged host uid, never host 0 */
    const char *um = strstr(out, "uid_map:");
    unsigned in = 1, host = 0, cnt = 0;
    CHECK(um && sscanf(um, "uid_map: %u %u %u", &in, &host, &cnt) == 3 && in == 0 &&
          host >= 1000 && cnt == SBX_ISO_UID_RANGE);
    free(out);
  }
  sbx_exec_result_free(&res);
  /* foreign syscall ABIs kill the process (the int 0x80 path may also
   * fault with SIGSEGV on kernels without IA32 emulation) */
  const char *x32[] = {"x32", NULL}, *i386[] = {"int80", NULL};
  out = run(sb, x32, &res);
  CHECK(out && !strstr(out, "x32 OK") && res.signal == SIGSYS);
  free(out);
  sbx_exec_result_free(&res);
  out = run(sb, i386, &res);
  CHECK(out && !strstr(out, "int80 OK") && (res.signal == SIGSYS || res.signal == SIGSEGV));
  free(out);
  sbx_exec_result_free(&res);
  drv->destroy(sb);
}

static void host_ns(const char *name, char *buf, size_t len)
{
  char p[64];
  snprintf(p, sizeof p, "/proc/self/ns/%s", name);
  ssize_t n = readlink(p, buf, len - 1);
  buf[n > 0 ? n : 0] = '\0';
}

static void test_posture(void)
{
  struct sbx_sandbox *sb = make((struct sbx_limits){0});
  CHECK(sb != NULL);
  if (!sb)
    return;
  const char *verbs[] = {"fds", "status", "ns", NULL};
  struct sbx_exec_result res;
  char *out = run(sb, verbs, &res);
  CHECK(out != NULL);
  if (out) {
    static const char *const zero[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    char want[64];
    for (int i = 0; i < 5; i++) {
      snprintf(want, sizeof want, "status: %s:\t0000000000000000\n", zero[i]);
      CHECK(strstr(out, want) != NULL);
    }
    CHECK(strstr(out, "status: NoNewPrivs:\t1\n") != NULL);
    CHECK(strstr(out, "status: Seccomp:\t2\n") != NULL);
    static const char *const nss[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
    for (int i = 0; i < 7; i++) {
      char h[128], line[192];
      host_ns(nss[i], h, sizeof h);
      snprintf(line, sizeof line, "ns: %s %s\n", nss[i], h);
      CHECK(h[0] && strstr(out, line) == NULL); /* differs from the host's */
      snprintf(line, sizeof line, "ns: %s %s:[", nss[i], nss[i]);
      CHECK(strstr(out, line) != NULL);
    }
    /* only 0-2, plus the fd of the listing itself (3) */
    int nfd = 0;
    for (const char *l = out; (l = strstr(l, "fd: ")); l += 4)
      nfd++;
    CHECK(nfd == 4);
    CHECK(strstr(out, "fd: 0\nfd: 1\nfd: 2\nfd: 3\n") != NULL);
    free(out);
  }
  sbx_exec_result_free(&res);
  drv->destroy(sb);
}

static void test_limits(void)
{
  struct sbx_exec_result res;
  struct sbx_usage u;
  /* memory bomb → the cgroup's OOM killer fires */
  struct sbx_sandbox *sb = make((struct sbx_limits){.memory_bytes = 64 << 20, .pids = 64});
  CHECK(sb != NULL);
  if (sb) {
    const char *v[] = {"memhog:512", NULL};
    char *out = run(sb, v, &res);
    CHECK(out && !strstr(out, "memhog OK"));
    CHECK(drv->usage(sb, &u) == 0 && u.oom_kills > 0);
    CHECK(u.memory_peak_bytes > 0 && u.memory_peak_bytes <= (64u << 20));
    printf("memory bomb: status %s signal %d, oom_kills %llu, peak %llu\n",
           sbx_status_name(res.status), res.signal, (unsigned long long)u.oom_kills,
           (unsigned long long)u.memory_peak_bytes);
    free(out);
    sbx_exec_result_free(&res);
    drv->destroy(sb);
  }
  /* fork bomb → pids.max stops it; the host stays responsive */
  sb = make((struct sbx_limits){.memory_bytes = 256 << 20, .pids = 32});
  CHECK(sb != NULL);
  if (sb) {
    const char *v[] = {"forkbomb:500", NULL};
    uint64_t t0 = sbx_now_ms();
    char *out = run(sb, v, &res);
    int made = -1, failed = -1;
    CHECK(out && sscanf(strstr(out, "forkbomb") ? strstr(out, "forkbomb") : "",
                        "forkbomb made %d failed %d", &made, &failed) == 2);
    CHECK(made >= 0 && made < 32 && failed > 0);
    CHECK(drv->usage(sb, &u) == 0 && u.pids_current <= 32);
    uint64_t t1 = sbx_now_ms();
    pid_t p = fork();
    if (p == 0)
      _exit(0);
    waitpid(p, NULL, 0);
    CHECK(sbx_now_ms() - t1 < 1000);
    printf("fork bomb: made %d failed %d in %llu ms\n", made, failed,
           (unsigned long long)(t1 - t0));
    free(out);
    sbx_exec_result_free(&res);
    drv->destroy(sb);
  }
  /* /tmp fill → ENOSPC at the disk limit (tmpfs size) */
  sb = make((struct sbx_limits){.memory_bytes = 512 << 20, .disk_bytes = 16 << 20});
  CHECK(sb != NULL);
  if (sb) {
    const char *v[] = {"fill_tmp", NULL};
    char *out = run(sb, v, &res);
    CHECK(out && strstr(out, "fill STOPPED ENOSPC"));
    free(out);
    sbx_exec_result_free(&res);
    drv->destroy(sb);
  }
}

static int count_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (d && readdir(d))
    n++;
  if (d)
    closedir(d);
  return n;
}

static void test_destroy_and_cycles(void)
{
  const struct sbx_cg_host *h = sbx_cg_host_default();
  struct sbx_sandbox *sb = make((struct sbx_limits){.pids = 64});
  CHECK(sb != NULL);
  if (!sb)
    return;
  /* leave background processes behind on purpose */
  const char *v[] = {"forkbomb:5", NULL};
  struct sbx_exec_result res;
  free(run(sb, v, &res));
  sbx_exec_result_free(&res);
  pid_t init = sb->init_pid;
  CHECK(sbx_cg_count(h) == 1);
  drv->destroy(sb);
  CHECK(kill(init, 0) < 0 && errno == ESRCH);
  CHECK(sbx_cg_count(h) == 0);

  int base = count_fds();
  uint64_t t0 = sbx_now_ns();
  for (int i = 0; i < 50; i++) {
    char id[64];
    snprintf(id, sizeof id, "cycle%d_%d", (int)getpid(), i);
    struct sbx_sandbox_spec spec = {.id = id, .profile = "cycle", .limits = {.pids = 16}};
    struct sbx_error err = {0};
    struct sbx_sandbox *c = NULL;
    CHECK(drv->create(&spec, &c, &err) == 0);
    if (!c) {
      fprintf(stderr, "cycle %d: %s\n", i, err.msg);
      break;
    }
    drv->destroy(c);
  }
  uint64_t t1 = sbx_now_ns();
  CHECK(count_fds() == base);
  CHECK(sbx_cg_count(h) == 0);
  printf("50 create/destroy cycles: %.2f ms per cycle, fds %d → %d\n", (t1 - t0) / 50e6, base,
         count_fds());
}

static double create_ms(const char *profile, struct sbx_sandbox **out)
{
  char id[64];
  snprintf(id, sizeof id, "time%d_%lu", (int)getpid(), ++seq);
  struct sbx_sandbox_spec spec = {.id = id, .profile = profile, .limits = {.pids = 64}};
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ns();
  if (drv->create(&spec, out, &err) < 0) {
    fprintf(stderr, "create: %s\n", err.msg);
    *out = NULL;
    return -1;
  }
  return (sbx_now_ns() - t0) / 1e6;
}

static void test_timing_and_pool(void)
{
  struct sbx_sandbox *sb;
  double cold = 0;
  for (int i = 0; i < 10; i++) {
    double t = create_ms("cold", &sb);
    CHECK(t >= 0);
    cold += t;
    if (sb)
      drv->destroy(sb);
  }
  printf("create cold (pool off): %.2f ms average of 10\n", cold / 10);

  sbx_container_pool_configure(2);
  /* A profile is pooled once wanted (the core prewarms pool_size > 0). */
  CHECK(create_ms("unwanted", &sb) >= 0);
  if (sb)
    drv->destroy(sb);
  struct sbx_limits defaults = {0};
  drv->prewarm("warm", &defaults);
  double first = create_ms("warm", &sb); /* the pool may not be full yet */
  if (sb)
    drv->destroy(sb);
  uint64_t deadline = sbx_now_ms() + 10000;
  while (sbx_pool_idle("warm", SBX_ISO_DEFAULT_DISK) < 2 && sbx_now_ms() < deadline)
    usleep(5000);
  CHECK(sbx_pool_idle("warm", SBX_ISO_DEFAULT_DISK) == 2);
  CHECK(sbx_pool_idle("unwanted", SBX_ISO_DEFAULT_DISK) == 0); /* pool_size 0 */
  double warm = create_ms("warm", &sb);
  CHECK(sb != NULL);
  if (sb) {
    /* a pooled sandbox works and carries the request's limits */
    struct sbx_usage u;
    CHECK(drv->usage(sb, &u) == 0);
    const char *v[] = {"id", NULL};
    struct sbx_exec_result res;
    struct sbx_error err = {0};
    CHECK(sbx_sandbox_file_write(sb, "/work/probe", probe_bytes, probe_len, &err) == 0);
    char *out = run(sb, v, &res);
    CHECK(out && strstr(out, "id: uid=1000"));
    free(out);
    sbx_exec_result_free(&res);
    drv->destroy(sb);
  }
  printf("create first-for-key %.2f ms, from the pool %.3f ms\n", first, warm);
  sbx_container_pool_configure(0);
  CHECK(sbx_pool_idle("warm", SBX_ISO_DEFAULT_DISK) == 0);
}

static void test_recover(void)
{
  const struct sbx_cg_host *h = sbx_cg_host_default();
  struct sbx_cgroup cg;
  struct sbx_iso_limits lim = {.pids = 8};
  struct sbx_error err = {0};
  CHECK(sbx_cg_create(h, "leftover", &lim, &cg, &err) == 0);
  pid_t p = fork();
  if (p == 0) {
    for (;;)
      pause();
  }
  CHECK(sbx_cg_attach(&cg, p, &err) == 0);
  struct sbx_driver_env env = {0};
  CHECK(drv->recover(&env) == 1);
  int st = 0;
  CHECK(waitpid(p, &st, 0) == p && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  CHECK(sbx_cg_count(h) == 0);
  if (cg.v2_dirfd >= 0)
    close(cg.v2_dirfd);
}

static int load_probe(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  struct stat st;
  fstat(fileno(f), &st);
  probe_len = (size_t)st.st_size;
  probe_bytes = malloc(probe_len);
  size_t got = fread(probe_bytes, 1, probe_len, f);
  fclose(f);
  return got == probe_len ? 0 : -1;
}

int main(void)
{
  const char *init = getenv("SBX_INIT_PATH"), *probe = getenv("SBX_PROBE_PATH");
  if (geteuid() != 0 || !init || !probe) {
    return check_skip("isolation: needs root, SBX_INIT_PATH and SBX_PROBE_PATH");
  }
  if (load_probe(probe) < 0) {
    perror(probe);
    return 1;
  }
  /* this run's own cgroup parent: never touch a real daemon's sandboxes */
  char parent[64];
  snprintf(parent, sizeof parent, "sandboxd-test-%d", (int)getpid());
  sbx_container_pool_configure(0);
  struct sbx_driver_setting set[] = {{"cgroup_parent", parent}};
  struct sbx_driver_env env = {.state_dir = "/tmp",
                               .init_path = init,
                               .settings = set,
                               .nsettings = 1};
  char why[256];
  if (drv->probe(&env, why, sizeof why) < 0) {
    fprintf(stderr, "probe: %s\n", why);
    return 1;
  }
  test_attacks();
  test_posture();
  test_limits();
  test_destroy_and_cycles();
  test_timing_and_pool();
  test_recover();
  drv->shutdown();
  const struct sbx_cg_host *h = sbx_cg_host_default();
  for (int i = 0; i < h->nctrl; i++)
    rmdir(h->ctrl[i].parent);
  return check_finish("isolation");
}
