/* probe_ext.c — the probe's verbs for the rest of isolation.md §3 (the
 * attacks probe.c does not cover) and for the lifecycle tests: markers,
 * busy loops, stubborn processes, the symlink-swap racer.  Verbs with
 * arguments are "name:arg[:arg]"; each prints lines starting with its
 * name, as probe.c's do (see probe.h). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static bool is(const char *v, const char *name, const char **arg)
{
  size_t n = strlen(name);
  if (strncmp(v, name, n))
    return false;
  if (v[n] == '\0') {
    *arg = "";
    return true;
  }
  if (v[n] != ':')
    return false;
  *arg = v + n + 1;
  return true;
}

static double mono_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(int who)
{
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- files -------------------------------------------------------------- */

static void read_verb(const char *v, const char *path)
{
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    res(v, -1, errno);
    return;
  }
  char buf[65536];
  long total = 0, n;
  while ((n = read(fd, buf, sizeof buf)) > 0 && total < (1 << 20))
    total += n;
  int e = errno;
  close(fd);
  if (n < 0)
    res(v, -1, e);
  else
    printf("%s OK %ld\n", v, total);
}

static void write_verb(const char *v, const char *path, int flags)
{
  int fd = open(path, flags, 0644);
  if (fd < 0) {
    res(v, -1, errno);
    return;
  }
  errno = 0;
  long n = write(fd, "x", 1);
  int e = errno;
  close(fd);
  res(v, n == 1 ? 0 : -1, e);
}

/* "a:b" → two strings in the caller's buffers. */
static void split2(const char *arg, char *a, char *b, size_t len)
{
  const char *c = strchr(arg, ':');
  size_t n = c ? (size_t)(c - arg) : strlen(arg);
  snprintf(a, len, "%.*s", (int)n, arg);
  snprintf(b, len, "%s", c ? c + 1 : "");
}

/* Creates files until the filesystem says no. */
static void inodes(const char *dir)
{
  char p[512];
  long n = 0;
  for (;; n++) {
    snprintf(p, sizeof p, "%s/i%ld", dir, n);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
      break;
    close(fd);
    if (n > 2000000)
      break;
  }
  printf("inodes STOPPED %s %ld\n", ename(errno), n);
}

/* The sandbox side of the symlink-swap race (isolation.md §3 #3): d is a
 * real directory holding etc/passwd ("INSIDE") and tmp/; dl is a symlink
 * to "/"; they are exchanged atomically, forever. */
static void swap_race(const char *base)
{
  char d[256], dl[256], p[300];
  snprintf(d, sizeof d, "%s/d", base);
  snprintf(dl, sizeof dl, "%s/dl", base);
  mkdir(d, 0755);
  snprintf(p, sizeof p, "%s/etc", d);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/tmp", d);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/etc/passwd", d);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, "INSIDE\n", 7) != 7 || symlink("/", dl) < 0) {
    res("swap_race", -1, errno);
    return;
  }
  close(fd);
  printf("swap_race OK started\n");
  fflush(stdout);
  for (unsigned long i = 0;; i++) {
    syscall(SYS_renameat2, AT_FDCWD, d, AT_FDCWD, dl, RENAME_EXCHANGE);
    if ((i & 1023) == 0)
      sched_yield();
  }
}

/* ---- processes -------------------------------------------------------- */

/* Scans /proc for processes whose cmdline contains marker. */
static void find_marker(const char *marker)
{
  DIR *d = opendir("/proc");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid())
      continue;
    char p[300], buf[4096];
    snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
      continue;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < len; i++)
      if (!buf[i])
        buf[i] = ' ';
    buf[len > 0 ? len : 0] = '\0';
    n += strstr(buf, marker) != NULL;
  }
  if (d)
    closedir(d);
  printf("find %d\n", n);
}

static void pidscan(int max)
{
  int seen = 0;
  for (int pid = 1; pid <= max; pid++)
    if (kill(pid, 0) == 0 || errno == EPERM)
      seen++;
  printf("pidscan %d\n", seen);
}

static void spin_until(double end)
{
  volatile unsigned long x = 0;
  while (mono_s() < end)
    for (int i = 0; i < 100000; i++)
      x++;
}

static void *spin_thread(void *arg)
{
  spin_until(*(double *)arg);
  return NULL;
}

/* Busy loop for ms of wall time on n threads; reports cpu used. */
static void spin(const char *arg)
{
  int ms = atoi(arg), nt = strchr(arg, ':') ? atoi(strchr(arg, ':') + 1) : 1;
  double t0 = mono_s(), c0 = cpu_s(RUSAGE_SELF), end = t0 + ms / 1000.0;
  pthread_t th[16];
  nt = nt < 1 ? 1 : nt > 16 ? 16 : nt;
  for (int i = 1; i < nt; i++)
    pthread_create(&th[i], NULL, spin_thread, &end);
  spin_until(end);
  for (int i = 1; i < nt; i++)
    pthread_join(th[i], NULL);
  printf("spin wall %.3f cpu %.3f\n", mono_s() - t0, cpu_s(RUSAGE_SELF) - c0);
}

static void ignore_term(void)
{
  struct sigaction sa = {.sa_handler = SIG_IGN};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* isolation.md §3 #23: a TERM-ignoring spinner, a stopped child and a
 * child blocked forever opening a FIFO. */
static void stubborn(void)
{
  ignore_term();
  if (fork() == 0) {
    raise(SIGSTOP);
    for (;;)
      pause();
  }
  mkfifo("/tmp/stubborn.fifo", 0600);
  if (fork() == 0) {
    int fd = open("/tmp/stubborn.fifo", O_RDONLY); /* no writer: blocks */
    (void)fd;
    for (;;)
      pause();
  }
  printf("stubborn OK\n");
  fflush(stdout);
  for (volatile unsigned long x = 0;; x++)
    ;
}

/* isolation.md §3 #25: double fork, new session, new group, no pdeathsig,
 * then try to leave the cgroup. */
static void escape_tracking(void)
{
  pid_t p = fork();
  if (p == 0) {
    setsid();
    if (fork() == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, 0);
      ignore_term();
      for (;;)
        pause();
    }
    _exit(0);
  }
  waitpid(p, NULL, 0);
  int fd = open("/sys/fs/cgroup/cgroup.procs", O_WRONLY);
  res("escape_cgroup", fd, errno);
  printf("escape_tracking OK\n");
}

static void zombies(int n)
{
  int made = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0)
      _exit(0);
    if (p < 0)
      failed++;
    else
      made++;
  }
  printf("zombies made %d failed %d\n", made, failed);
}

static void orphans(int n)
{
  int made = 0;
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0) {
      if (fork() == 0) {
        sleep(60);
        _exit(0);
      }
      _exit(0);
    }
    if (p > 0) {
      waitpid(p, NULL, 0);
      made++;
    }
  }
  printf("orphans made %d\n", made);
}

/* Execs a setuid-root binary with a silent stdin and reports the euid it
 * runs with while it waits for a password (0 would be a privilege gain). */
static void suid_exec(const char *path)
{
  int p[2];
  if (pipe(p) < 0)
    return;
  pid_t k = fork();
  if (k == 0) {
    dup2(p[0], 0);
    close(p[1]);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(path, path, "root", (char *)NULL);
    _exit(127);
  }
  close(p[0]);
  long euid = -1;
  bool exec_seen = false;
  for (int i = 0; i < 2000 && euid < 0; i++) {
    char f[64], l[256], exe[256] = "";
    snprintf(f, sizeof f, "/proc/%d/exe", (int)k);
    ssize_t n = readlink(f, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    if (strcmp(exe, path)) {
      if (waitpid(k, NULL, WNOHANG) == k)
        break;
      usleep(500);
      continue;
    }
    exec_seen = true;
    snprintf(f, sizeof f, "/proc/%d/status", (int)k);
    FILE *F = fopen(f, "r");
    while (F && fgets(l, sizeof l, F))
      if (!strncmp(l, "Uid:", 4))
        sscanf(l, "Uid: %*d %ld", &euid);
    if (F)
      fclose(F);
  }
  kill(k, SIGKILL);
  waitpid(k, NULL, 0);
  close(p[1]);
  printf("suid_exec %s euid %ld\n", exec_seen ? "ran" : "missed", euid);
}

static void spew(long mb)
{
  static char buf[65536];
  memset(buf, 'y', sizeof buf);
  for (long i = 0; i < mb * 16; i++) {
    if (write(1, buf, sizeof buf) < 0 || write(2, buf, sizeof buf) < 0)
      break;
  }
}

static void memfd_hog(long mb)
{
  int fd = (int)syscall(SYS_memfd_create, "hog", 0);
  static char buf[1 << 20];
  memset(buf, 1, sizeof buf);
  long i = 0;
  for (; i < mb; i++)
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
      break;
  printf("memfd_hog %s %ld\n", i == mb ? "OK" : ename(errno), i);
}

/* ---- syscalls and sockets ------------------------------------------------ */

static void connect_unix(const char *v, const char *name, bool abstract)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(name) < sizeof a.sun_path - 1 ? strlen(name) : sizeof a.sun_path - 2;
  memcpy(a.sun_path + (abstract ? 1 : 0), name, n);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  TRY(v, connect(s, (void *)&a,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + abstract)));
  close(s);
}

static bool syscalls(const char *v)
{
  if (!strcmp(v, "request_key"))
    TRY(v, syscall(SYS_request_key, "user", "x", NULL, KEY_SPEC_PROCESS_KEYRING));
  else if (!strcmp(v, "kexec_load"))
    TRY(v, syscall(SYS_kexec_load, 0, 0, NULL, 0));
  else if (!strcmp(v, "init_module"))
    TRY(v, syscall(SYS_init_module, "", 0, ""));
  else if (!strcmp(v, "finit_module"))
    TRY(v, syscall(SYS_finit_module, 0, "", 0));
  else if (!strcmp(v, "syslog"))
    TRY(v, syscall(SYS_syslog, 3, NULL, 0));
  else if (!strcmp(v, "acct"))
    TRY(v, syscall(SYS_acct, "/tmp/acct"));
  else if (!strcmp(v, "swapon"))
    TRY(v, syscall(SYS_swapon, "/tmp/swap", 0));
  else if (!strcmp(v, "reboot"))
    TRY(v, syscall(SYS_reboot, 0xfee1dead, 0x28121969, 0x4321fedc, NULL)); /* CAD_OFF */
  else if (!strcmp(v, "settimeofday")) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    TRY(v, settimeofday(&tv, NULL));
  } else if (!strcmp(v, "clock_settime")) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    TRY(v, clock_settime(CLOCK_REALTIME, &ts));
  } else if (!strcmp(v, "sethostname"))
    TRY(v, sethostname("pwned", 5));
  else if (!strcmp(v, "move_mount"))
    TRY(v, syscall(SYS_move_mount, AT_FDCWD, "/tmp", AT_FDCWD, "/work", 0));
  else if (!strcmp(v, "mount_setattr")) {
    uint64_t attr[4] = {0, 1 /* MOUNT_ATTR_RDONLY cleared */, 0, 0};
    TRY(v, syscall(SYS_mount_setattr, AT_FDCWD, "/usr", 0, attr, 32));
  } else if (!strcmp(v, "mount_bind"))
    TRY(v, mount("/usr", "/work", NULL, MS_BIND, NULL));
  else if (!strcmp(v, "remount_rw"))
    TRY(v, mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL));
  else if (!strcmp(v, "pidfd_getfd"))
    TRY(v, syscall(SYS_pidfd_getfd, 0, 0, 0));
  else if (!strcmp(v, "nice_neg"))
    TRY(v, setpriority(PRIO_PROCESS, 0, -20));
  else if (!strcmp(v, "uid_map_write")) {
    int fd = open("/proc/self/uid_map", O_WRONLY);
    TRY(v, fd < 0 ? -1 : write(fd, "0 0 1\n", 6));
  } else if (!strcmp(v, "setgroups")) {
    gid_t g = 0;
    TRY(v, syscall(SYS_setgroups, 1, &g));
  } else if (!strcmp(v, "ambient_raise"))
    TRY(v, prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0));
  else if (!strcmp(v, "socket_key"))
    TRY(v, socket(15 /* AF_KEY */, SOCK_RAW, 2));
  else if (!strcmp(v, "socket_netlink_xfrm"))
    TRY(v, socket(AF_NETLINK, SOCK_RAW, 6));
  else if (!strcmp(v, "open_tty"))
    TRY(v, open("/dev/tty", O_RDWR));
  else if (!strcmp(v, "udp_out")) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(53),
                            .sin_addr.s_addr = htonl(0x08080808)};
    TRY(v, sendto(s, "q", 1, 0, (void *)&a, sizeof a));
  } else if (!strcmp(v, "connect6_out")) {
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
    static const unsigned char g[16] = {0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0,    0,
                                        0,    0,    0,    0,    0,    0,    0x88, 0x88};
    memcpy(&a.sin6_addr, g, 16);
    TRY(v, connect(s, (void *)&a, sizeof a));
  } else if (!strcmp(v, "ping")) {
    TRY(v, socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP));
  } else if (!strcmp(v, "killall"))
    TRY(v, kill(-1, SIGKILL));
  else if (!strcmp(v, "kill_init"))
    TRY(v, kill(1, SIGKILL));
  else if (!strcmp(v, "kill_parent_group"))
    TRY(v, kill(-getpgid(getppid()), SIGKILL));
  else
    return false;
  return true;
}

static bool file_verbs(const char *v)
{
  const char *a;
  char x[256], y[256];
  if (is(v, "read", &a))
    read_verb(v, a);
  else if (is(v, "write", &a))
    write_verb(v, a, O_WRONLY | O_CREAT | O_TRUNC);
  else if (is(v, "openw", &a)) /* an existing file, for writing, no create */
    write_verb(v, a, O_WRONLY);
  else if (is(v, "openw_path", &a)) { /* the O_PATH re-open route */
    int o = open(a, O_PATH);
    snprintf(x, sizeof x, "/proc/self/fd/%d", o);
    write_verb(v, x, O_WRONLY);
  } else if (is(v, "hardlink", &a)) {
    split2(a, x, y, sizeof x);
    TRY(v, link(x, y));
  } else if (is(v, "symlink", &a)) {
    split2(a, x, y, sizeof x);
    TRY(v, symlink(x, y));
  } else if (is(v, "mknod", &a))
    TRY(v, mknod(a, S_IFCHR | 0666, makedev(1, 3)));
  else if (is(v, "mkfifo", &a))
    TRY(v, mkfifo(a, 0644));
  else if (is(v, "mkdir", &a))
    TRY(v, mkdir(a, 0755));
  else if (is(v, "list", &a)) {
    DIR *d = opendir(a);
    struct dirent *e;
    while (d && (e = readdir(d)))
      if (e->d_name[0] != '.')
        printf("list %s\n", e->d_name);
    if (d)
      closedir(d);
  } else if (is(v, "fill", &a)) {
    int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    while (fd >= 0 && write(fd, buf, sizeof buf) > 0)
      ;
    printf("fill STOPPED %s\n", ename(fd < 0 ? errno : errno));
    unlink(a);
  } else if (is(v, "inodes", &a))
    inodes(a);
  else if (is(v, "swap_race", &a))
    swap_race(a);
  else
    return false;
  return true;
}

static bool ipc_verbs(const char *v)
{
  const char *a;
  if (is(v, "shm_create", &a)) {
    int id = shmget((key_t)atoi(a), 4096, IPC_CREAT | 0666);
    res(v, id, errno);
  } else if (is(v, "shm_get", &a))
    TRY(v, shmget((key_t)atoi(a), 0, 0));
  else if (is(v, "connect_abstract", &a))
    connect_unix(v, a, true);
  else if (is(v, "connect_unix", &a))
    connect_unix(v, a, false);
  else if (is(v, "pidfd_open", &a))
    TRY(v, syscall(SYS_pidfd_open, atoi(a), 0));
  else if (is(v, "kill0", &a))
    TRY(v, kill(atoi(a), 0));
  else
    return false;
  return true;
}

static bool process_verbs(const char *v)
{
  const char *a;
  if (is(v, "tag", &a))
    ; /* a marker in the cmdline, for the host to find */
  else if (is(v, "find", &a))
    find_marker(a);
  else if (is(v, "pidscan", &a))
    pidscan(atoi(a));
  else if (is(v, "spin", &a))
    spin(a);
  else if (is(v, "sleep", &a))
    usleep((useconds_t)atoi(a) * 1000);
  else if (is(v, "stubborn", &a))
    stubborn();
  else if (is(v, "stopself", &a))
    raise(SIGSTOP);
  else if (is(v, "escape_tracking", &a))
    escape_tracking();
  else if (is(v, "zombies", &a))
    zombies(atoi(a));
  else if (is(v, "orphans", &a))
    orphans(atoi(a));
  else if (is(v, "suid_exec", &a))
    suid_exec(a);
  else if (is(v, "spew", &a))
    spew(atol(a));
  else if (is(v, "memfd_hog", &a))
    memfd_hog(atol(a));
  else if (is(v, "dotdot", &a)) {
    int r = chdir("/");
    for (int i = 0; i < 20 && r == 0; i++)
      r = chdir("..");
    char cwd[256] = "";
    printf("dotdot cwd %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    DIR *d = opendir(".");
    struct dirent *e;
    while (d && (e = readdir(d)))
      if (e->d_name[0] != '.')
        printf("dotdot: %s\n", e->d_name);
    if (d)
      closedir(d);
  } else if (is(v, "environ", &a)) {
    extern char **environ;
    for (char **e = environ; *e; e++)
      printf("env: %s\n", *e);
  } else
    return false;
  return true;
}

int probe_ext(const char *v)
{
  return syscalls(v) || file_verbs(v) || ipc_verbs(v) || process_verbs(v);
}
