/* test_attacks.c — the attacks of isolation.md §3 that test_container.c
 * does not already cover, each asserting its safe outcome from inside a
 * real container sandbox (the probe) and, where it matters, from the host
 * (markers in /proc, host files, the test process itself).  Test names are
 * aNN_<what>, NN the attack's number in §3; docs/isolation.md maps all 30
 * to their tests. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"
#include "harness.h"

static char *run_verbs(struct sbx_sandbox *sb, const char *const *v, struct sbx_exec_result *res)
{
  char *out = h_run(sb, v, res);
  CHECK(out != NULL);
  return out;
}

/* 64-bit FNV-1a of a host file, to prove it did not change. */
static unsigned long long file_hash(const char *path)
{
  FILE *f = fopen(path, "rb");
  unsigned long long h = 1469598103934665603ull;
  int c;
  while (f && (c = getc(f)) != EOF)
    h = (h ^ (unsigned char)c) * 1099511628211ull;
  if (f)
    fclose(f);
  return f ? h : 0;
}

/* #4 hardlinks across mounts, mknod, a FIFO where an output is expected. */
static void a04_links_and_special_files(struct sbx_sandbox *sb)
{
  const char *v[] = {"hardlink:/usr/bin/passwd:/work/p", "mknod:/work/null",
                     "mkfifo:/work/out.txt", NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    EXPECT(out, "hardlink:/usr/bin/passwd:/work/p", "FAILED EXDEV");
    EXPECT(out, "mknod:/work/null", "BLOCKED EPERM");
    EXPECT(out, "mkfifo:/work/out.txt", "OK");
  }
  free(out);
  sbx_exec_result_free(&res);
  /* the daemon never blocks on a planted FIFO: it refuses it at once */
  int fd = -1;
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  CHECK(sbx_sandbox_file_open_read(sb, "/work/out.txt", &fd, NULL, &err) < 0 && fd < 0);
  CHECK(sbx_sandbox_file_open_write(sb, "/work/out.txt", 0644, &fd, &err) < 0 && fd < 0);
  CHECK(sbx_now_ms() - t0 < 1000);
}

/* #5 /proc/self/exe and /proc/1/exe for write (directly and through an
 * O_PATH re-open), and the loader and libc in the read-only binds. */
static void a05_proc_exe_overwrite(struct sbx_sandbox *sb)
{
  const char *init = getenv("SBX_INIT_PATH");
  unsigned long long h_init = file_hash(init), h_libc = file_hash("/lib64/ld-linux-x86-64.so.2");
  const char *v[] = {"openw:/proc/self/exe",
                     "openw_path:/proc/self/exe",
                     "openw:/proc/1/exe",
                     "openw_path:/proc/1/exe",
                     "openw:/lib64/ld-linux-x86-64.so.2",
                     "openw:/usr/bin/sh",
                     "openw:/work/probe",
                     NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    char b[64];
    for (int i = 0; i < 4; i++) /* ETXTBSY, EACCES or EPERM: never OK */
      CHECK(strncmp(h_outcome(out, v[i], b, sizeof b), "OK", 2) != 0 &&
            strcmp(b, "(missing)") != 0);
    /* EACCES (root-owned) before EROFS (read-only bind): both refusals */
    EXPECT(out, "openw:/lib64/ld-linux-x86-64.so.2", "BLOCKED");
    EXPECT(out, "openw:/usr/bin/sh", "BLOCKED");
    EXPECT(out, "openw:/work/probe", "FAILED ETXTBSY"); /* the running probe itself */
  }
  free(out);
  sbx_exec_result_free(&res);
  CHECK(file_hash(init) == h_init && h_init != 0);
  CHECK(file_hash("/lib64/ld-linux-x86-64.so.2") == h_libc && h_libc != 0);
}

/* #6 complement: the cwd is inside, and sbx-init (non-dumpable) lends the
 * workload none of its fds or environment. */
static void a06_cwd_and_init_fds(struct sbx_sandbox *sb)
{
  struct sbx_exec_result res;
  char *out = h_sh(sb, "pwd; ls /proc/1/fd 2>&1 | wc -l; ls -l /proc/self/cwd", &res);
  CHECK(out && !strncmp(out, "/work\n", 6));
  free(out);
  sbx_exec_result_free(&res);
  const char *v[] = {"read:/proc/1/environ", "list:/proc/1/fd", "read:/proc/1/mem", NULL};
  out = run_verbs(sb, v, &res);
  if (out) {
    EXPECT(out, "read:/proc/1/environ", "BLOCKED EACCES");
    EXPECT(out, "read:/proc/1/mem", "BLOCKED EACCES");
    CHECK(!strstr(out, "list ")); /* /proc/1/fd not listable */
  }
  free(out);
  sbx_exec_result_free(&res);
}

/* #7 the new mount API and bind/remount (the old API is in test_container). */
static void a07_mount_api(struct sbx_sandbox *sb)
{
  const char *v[] = {"move_mount", "mount_setattr", "mount_bind",
                     "remount_rw", "pidfd_getfd",   NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  for (int i = 0; out && v[i]; i++)
    EXPECT(out, v[i], "BLOCKED EPERM");
  free(out);
  sbx_exec_result_free(&res);
}

/* #8 ".." from "/" stays at the sandbox's root (pivot_root, old root
 * detached); chroot itself is EPERM in test_container. */
static void a08_dotdot_stays_inside(struct sbx_sandbox *sb)
{
  const char *v[] = {"dotdot", NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    CHECK(strstr(out, "dotdot cwd /\n") != NULL);
    CHECK(strstr(out, "dotdot: work\n") && strstr(out, "dotdot: usr\n"));
    static const char *const host_only[] = {"home",     "var", "root", "srv",  "opt", "boot",
                                            "old_root", "run", "sys",  "farm", NULL};
    for (int i = 0; host_only[i]; i++) {
      char l[64];
      snprintf(l, sizeof l, "dotdot: %s\n", host_only[i]);
      CHECK(strstr(out, l) == NULL);
    }
  }
  free(out);
  sbx_exec_result_free(&res);
}

static int status_uid(pid_t pid)
{
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  FILE *f = fopen(p, "re");
  int uid = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Uid:", 4))
      sscanf(line, "Uid: %d", &uid);
  if (f)
    fclose(f);
  return uid;
}

/* #9 and #10 with a neighbour: B holds a marked process; A cannot see,
 * signal or open it, and A's signal storms touch only A. */
static void a09_a10_neighbour_and_signals(struct sbx_sandbox *a, struct sbx_sandbox *b)
{
  char marker[64], tag[80], find[80], pidfd[64], kill0[64];
  snprintf(marker, sizeof marker, "nbr%d", (int)getpid());
  snprintf(tag, sizeof tag, "tag:%s", marker);
  const char *bv[] = {tag, "sleep:60000", NULL};
  struct h_bg bg;
  CHECK(h_bg_start(&bg, b, bv, 90000) == 0);
  CHECK(h_marker_wait(marker, 5000));
  snprintf(find, sizeof find, "find:%s", marker);
  snprintf(pidfd, sizeof pidfd, "pidfd_open:%d", (int)b->init_pid);
  snprintf(kill0, sizeof kill0, "kill0:%d", (int)b->init_pid);
  const char *v[] = {find, "pidscan:32768", pidfd, kill0, "ptrace", NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(a, v, &res);
  if (out) {
    CHECK(strstr(out, "find 0\n") != NULL);
    int seen = -1;
    const char *ps = strstr(out, "pidscan ");
    CHECK(ps && sscanf(ps, "pidscan %d", &seen) == 1 && seen >= 1 && seen <= 8);
    EXPECT(out, pidfd, "FAILED ESRCH");
    EXPECT(out, kill0, "FAILED ESRCH");
  }
  free(out);
  sbx_exec_result_free(&res);
  /* distinct unprivileged host uids per sandbox (isolate's model) */
  int ua = status_uid(a->init_pid), ub = status_uid(b->init_pid);
  CHECK(ua >= 100000 && ub >= 100000 && ua != ub);
  /* #10: kill(-1), kill(1), the parent's group: only A's own processes */
  const char *sv[] = {"killall", NULL};
  out = h_run(a, sv, &res); /* may kill its own shepherd: any outcome */
  free(out);
  sbx_exec_result_free(&res);
  const char *sv2[] = {"kill_init", "kill_parent_group", NULL};
  out = h_run(a, sv2, &res);
  free(out);
  sbx_exec_result_free(&res);
  CHECK(sbx_sandbox_alive(a)); /* PID 1 ignores signals from its namespace */
  const char *idv[] = {"id", NULL};
  out = run_verbs(a, idv, &res);
  CHECK(out && strstr(out, "id: uid=1000"));
  free(out);
  sbx_exec_result_free(&res);
  CHECK(h_marker_count(marker) >= 1); /* B untouched */
  CHECK(kill(getpid(), 0) == 0);
  h_bg_stop(&bg);
  CHECK(h_marker_gone(marker, 2000) >= 0);
}

static void write_host(const char *path, const char *data)
{
  FILE *f = fopen(path, "we");
  if (f) {
    fputs(data, f);
    fclose(f);
  }
}

/* #11 host and neighbour files, /tmp, /dev/shm, SysV IPC. */
static void a11_private_files_and_ipc(struct sbx_sandbox *a, struct sbx_sandbox *b)
{
  char htmp[96], hshm[96], key[32];
  snprintf(htmp, sizeof htmp, "/tmp/sbxhost-%d", (int)getpid());
  snprintf(hshm, sizeof hshm, "/dev/shm/sbxhost-%d", (int)getpid());
  write_host(htmp, "HOST\n");
  write_host(hshm, "HOST\n");
  snprintf(key, sizeof key, "%d", 0x5b0000 + (int)(getpid() & 0xffff));
  char shmc[64], shmg[64], rt[120], rs[120];
  snprintf(shmc, sizeof shmc, "shm_create:%s", key);
  snprintf(shmg, sizeof shmg, "shm_get:%s", key);
  const char *bv[] = {"write:/tmp/bfile", "write:/dev/shm/bfile", "write:/work/bfile", shmc,
                      NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(b, bv, &res);
  CHECK(out && strstr(out, "write:/tmp/bfile OK") && strstr(out, "shm_create"));
  CHECK(out && strstr(out, "write:/dev/shm/bfile OK"));
  free(out);
  sbx_exec_result_free(&res);
  snprintf(rt, sizeof rt, "read:%s", htmp);
  snprintf(rs, sizeof rs, "read:%s", hshm);
  const char *av[] = {rt,
                      rs,
                      "read:/tmp/bfile",
                      "read:/dev/shm/bfile",
                      "read:/work/bfile",
                      shmg,
                      "read:/run/sandboxd",
                      "read:/var/lib",
                      "list:/work",
                      NULL};
  out = run_verbs(a, av, &res);
  if (out) {
    EXPECT(out, rt, "FAILED ENOENT");
    EXPECT(out, rs, "FAILED ENOENT");
    EXPECT(out, "read:/tmp/bfile", "FAILED ENOENT");
    EXPECT(out, "read:/dev/shm/bfile", "FAILED ENOENT");
    EXPECT(out, "read:/work/bfile", "FAILED ENOENT");
    EXPECT(out, shmg, "FAILED ENOENT");
    EXPECT(out, "read:/run/sandboxd", "FAILED ENOENT");
    EXPECT(out, "read:/var/lib", "FAILED ENOENT");
    /* /work is this sandbox's own tmpfs, not the host's /work */
    CHECK(strstr(out, "list probe\n") && !strstr(out, "list main\n") &&
          !strstr(out, "list shared\n"));
  }
  free(out);
  sbx_exec_result_free(&res);
  unlink(htmp);
  unlink(hshm);
  /* the neighbour's files never reached the host either */
  CHECK(access("/tmp/bfile", F_OK) < 0 && access("/dev/shm/bfile", F_OK) < 0);
}

/* #12 /proc and /sys reads and writes. */
static void a12_proc_and_sys(struct sbx_sandbox *sb)
{
  static const char *const masked[] = {"read:/proc/keys",          "read:/proc/timer_list",
                                       "read:/proc/sched_debug",   "read:/proc/interrupts",
                                       "read:/proc/kallsyms",      "read:/proc/kmsg",
                                       "read:/proc/sysrq-trigger", NULL};
  const char *v[] = {masked[0],
                     masked[1],
                     masked[2],
                     masked[3],
                     masked[4],
                     masked[5],
                     masked[6],
                     "openw:/proc/sys/kernel/core_pattern",
                     "openw:/proc/sys/vm/panic_on_oom",
                     "openw:/proc/sysrq-trigger",
                     "openw:/sys/kernel/uevent_helper",
                     "openw:/sys/fs/cgroup/memory/release_agent",
                     "read:/sys/firmware",
                     "openw:/proc/self/oom_score_adj",
                     NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    char b[64];
    for (int i = 0; masked[i]; i++) { /* empty (masked) or refused, never content */
      const char *o = h_outcome(out, masked[i], b, sizeof b);
      CHECK(!strcmp(o, "OK 0") || !strncmp(o, "BLOCKED", 7) || !strncmp(o, "FAILED", 6));
      if (strcmp(o, "OK 0") && strncmp(o, "BLOCKED", 7) && strncmp(o, "FAILED", 6))
        fprintf(stderr, "  %s: %s\n", masked[i], o);
    }
    EXPECT(out, "openw:/proc/sys/kernel/core_pattern", "BLOCKED");
    EXPECT(out, "openw:/proc/sys/vm/panic_on_oom", "BLOCKED");
    EXPECT(out, "openw:/sys/kernel/uevent_helper", "FAILED ENOENT");
    EXPECT(out, "openw:/sys/fs/cgroup/memory/release_agent", "FAILED ENOENT");
    EXPECT(out, "read:/sys/firmware", "FAILED ENOENT");
  }
  free(out);
  sbx_exec_result_free(&res);
  /* the masked files are /dev/null (char 1:3), whatever a write "did" */
  out = h_sh(sb, "stat -c '%F %t:%T' /proc/keys /proc/timer_list /proc/kallsyms", &res);
  CHECK(out && !strcmp(out, "character special file 1:3\ncharacter special file 1:3\n"
                            "character special file 1:3\n"));
  free(out);
  sbx_exec_result_free(&res);
}

/* #13 #14 #16 #24 #27 #29: more syscalls, socket families, the tty,
 * negative nice, more egress, privilege regain. */
static void a13_to_a29_syscalls(struct sbx_sandbox *sb)
{
  static const char *const eperm[] = {"request_key",
                                      "kexec_load",
                                      "init_module",
                                      "finit_module",
                                      "syslog",
                                      "acct",
                                      "swapon",
                                      "reboot",
                                      "settimeofday",
                                      "clock_settime",
                                      "sethostname",
                                      "socket_key",
                                      "socket_netlink_xfrm",
                                      "uid_map_write",
                                      "setgroups",
                                      "ambient_raise",
                                      NULL};
  char host_before[256] = "", host_after[256] = "";
  gethostname(host_before, sizeof host_before);
  time_t t_before = time(NULL);
  const char *v[40];
  int n = 0;
  for (int i = 0; eperm[i]; i++)
    v[n++] = eperm[i];
  const char *more[] = {
      "open_tty", "nice_neg", "udp_out", "connect6_out", "suid_exec:/usr/bin/su", NULL};
  for (int i = 0; more[i]; i++)
    v[n++] = more[i];
  v[n] = NULL;
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    for (int i = 0; eperm[i]; i++)
      if (!strcmp(eperm[i], "uid_map_write"))
        EXPECT(out, eperm[i], "BLOCKED"); /* EPERM (writer lacks CAP_SETUID) or EACCES */
      else
        EXPECT(out, eperm[i], "BLOCKED EPERM");
    EXPECT(out, "open_tty", "FAILED ENXIO"); /* setsid: no controlling tty */
    EXPECT(out, "nice_neg", "BLOCKED EACCES");
    EXPECT(out, "udp_out", "FAILED ENETUNREACH");
    EXPECT(out, "connect6_out", "FAILED ENETUNREACH");
    long euid = -2;
    const char *s = strstr(out, "suid_exec ");
    CHECK(s && sscanf(s, "suid_exec %*s euid %ld", &euid) == 1 && euid != 0);
    if (s && !strncmp(s, "suid_exec ran", 13))
      CHECK(euid == 1000); /* the setuid bit is inert: nosuid + no_new_privs */
    printf("setuid su inside: %.40s\n", s ? s : "(none)");
  }
  free(out);
  sbx_exec_result_free(&res);
  gethostname(host_after, sizeof host_after);
  CHECK_STR(host_after, host_before);
  CHECK(time(NULL) - t_before < 60);
}

/* #28 the host's abstract unix sockets and well-known socket paths. */
static void a28_host_ipc(struct sbx_sandbox *sb)
{
  char name[64], verb[96];
  snprintf(name, sizeof name, "sbx-test-%d", (int)getpid());
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path + 1, name, strlen(name));
  socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
  CHECK(bind(s, (void *)&a, alen) == 0 && listen(s, 4) == 0);
  /* sanity: it is reachable on the host */
  int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(connect(c, (void *)&a, alen) == 0);
  close(c);
  snprintf(verb, sizeof verb, "connect_abstract:%s", name);
  const char *v[] = {verb, "connect_unix:/run/dbus/system_bus_socket",
                     "connect_unix:/var/run/docker.sock",
                     "connect_unix:/run/sandboxd/sandboxd.sock", NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    EXPECT(out, verb, "FAILED ECONNREFUSED"); /* abstract names are per netns */
    EXPECT(out, "connect_unix:/run/dbus/system_bus_socket", "FAILED ENOENT");
    EXPECT(out, "connect_unix:/var/run/docker.sock", "FAILED ENOENT");
    EXPECT(out, "connect_unix:/run/sandboxd/sandboxd.sock", "FAILED ENOENT");
  }
  free(out);
  sbx_exec_result_free(&res);
  close(s);
}

/* #30 environment and identity. */
static void a30_env_and_identity(struct sbx_sandbox *sb)
{
  setenv("SBX_TEST_SECRET_TOKEN", "hunter2", 1);
  const char *v[] = {"environ", "read:/etc/shadow", NULL};
  struct sbx_exec_result res;
  char *out = run_verbs(sb, v, &res);
  if (out) {
    int nenv = 0;
    for (const char *l = out; (l = strstr(l, "env: ")); l += 5)
      nenv++;
    /* exactly what the request passed (the shell may add PWD/SHLVL, never ours) */
    CHECK(strstr(out, "env: PATH=/usr/bin:/bin\n") && strstr(out, "env: HOME=/work\n"));
    CHECK(!strstr(out, "SBX_TEST_SECRET") && !strstr(out, "SANDBOXD_") && !strstr(out, "LD_") &&
          !strstr(out, "SBX_INIT_PATH"));
    CHECK(nenv <= 4);
  }
  free(out);
  sbx_exec_result_free(&res);
  out = h_sh(sb, "cat /etc/hostname; uname -n; cat /proc/1/cmdline | tr '\\0' ' '; echo", &res);
  CHECK(out && !strncmp(out, "sandbox\nsandbox\nsbx-init --root /", 33));
  free(out);
  sbx_exec_result_free(&res);
  unsetenv("SBX_TEST_SECRET_TOKEN");
}

int main(void)
{
  int r = h_setup();
  if (r)
    return r;
  struct sbx_sandbox *a = h_make((struct sbx_limits){.memory_bytes = 256 << 20, .pids = 128});
  struct sbx_sandbox *b = h_make((struct sbx_limits){.memory_bytes = 256 << 20, .pids = 128});
  CHECK(a && b);
  if (a && b) {
    a04_links_and_special_files(a);
    a05_proc_exe_overwrite(a);
    a06_cwd_and_init_fds(a);
    a07_mount_api(a);
    a08_dotdot_stays_inside(a);
    a11_private_files_and_ipc(a, b);
    a12_proc_and_sys(a);
    a13_to_a29_syscalls(a);
    a28_host_ipc(a);
    a30_env_and_identity(a);
    a09_a10_neighbour_and_signals(a, b); /* last: it kills A's processes */
  }
  if (a)
    h_drv->destroy(a);
  if (b)
    h_drv->destroy(b);
  return h_finish("isolation-attacks");
}
