/* probe.c — a static multi-verb probe run inside sandboxes (the crun
 * tests/init.c pattern).  For each verb it prints one line:
 *   "<verb> OK [detail]"            the operation worked
 *   "<verb> BLOCKED <ERRNO>"        refused by policy: EPERM, ENOSYS,
 *                                   EACCES, EROFS (read-only by design)
 *   "<verb> FAILED <ERRNO>"         any other failure (ENOENT, ESRCH, …)
 * plus "info" verbs that print what they read.  The test driver decides
 * which outcome is safe for each verb. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

static void cat(const char *verb, const char *path, const char *grep)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    res(verb, -1, errno);
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!grep || strstr(line, grep))
      printf("%s: %s", verb, line[strlen(line) - 1] == '\n' ? line : strcat(line, "\n"));
  fclose(f);
}

static long read_file(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  char buf[256];
  long n = read(fd, buf, sizeof buf);
  int e = errno;
  close(fd);
  errno = e;
  return n < 0 ? -1 : n;
}

static long write_file(const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return -1;
  long n = write(fd, "x", 1);
  close(fd);
  return n;
}

static void ns_ids(void)
{
  static const char *ns[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    char p[64], l[128];
    snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
    ssize_t n = readlink(p, l, sizeof l - 1);
    l[n > 0 ? n : 0] = 0;
    printf("ns: %s %s\n", ns[i], l);
  }
}

static void list_dir(const char *verb, const char *path)
{
  DIR *d = opendir(path);
  if (!d) {
    res(verb, -1, errno);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.')
      printf("%s: %s\n", verb, de->d_name);
  closedir(d);
}

static void fill(const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    res("fill", -1, errno);
    return;
  }
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  for (;;)
    if (write(fd, buf, sizeof buf) < 0) {
      printf("fill STOPPED %s\n", ename(errno));
      break;
    }
  close(fd);
  unlink(path);
}

static void memhog(long mb)
{
  for (long i = 0; i < mb; i++) {
    char *p = malloc(1 << 20);
    if (!p) {
      printf("memhog FAILED ENOMEM at %ld\n", i);
      return;
    }
    memset(p, 1, 1 << 20);
  }
  printf("memhog OK %ld\n", mb);
}

static void forkbomb(int n)
{
  int made = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    if (p < 0)
      failed++;
    else
      made++;
  }
  printf("forkbomb made %d failed %d\n", made, failed);
  fflush(stdout);
}

static void verb(const char *v)
{
  fflush(stdout);
  if (!strcmp(v, "mount"))
    TRY(v, mount("none", "/tmp", "tmpfs", 0, NULL));
  else if (!strcmp(v, "umount_proc"))
    TRY(v, umount2("/proc", MNT_DETACH));
  else if (!strcmp(v, "unshare_user"))
    TRY(v, unshare(CLONE_NEWUSER));
  else if (!strcmp(v, "unshare_ns"))
    TRY(v, unshare(CLONE_NEWNS));
  else if (!strcmp(v, "clone_newuser")) {
    long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
      _exit(0);
    if (r > 0)
      waitpid((pid_t)r, NULL, 0);
    res(v, r, errno);
  } else if (!strcmp(v, "clone3")) {
    struct clone_args ca = {.exit_signal = SIGCHLD};
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0)
      _exit(0);
    if (r > 0)
      waitpid((pid_t)r, NULL, 0);
    res(v, r, errno);
  } else if (!strcmp(v, "fork")) {
    pid_t p = fork();
    if (p == 0)
      _exit(7);
    int st = 0;
    if (p > 0)
      waitpid(p, &st, 0);
    res(v, p > 0 && WEXITSTATUS(st) == 7 ? 0 : -1, errno);
  } else if (!strcmp(v, "setns"))
    TRY(v, setns(open("/proc/self/ns/mnt", O_RDONLY), 0));
  else if (!strcmp(v, "pivot_root"))
    TRY(v, syscall(SYS_pivot_root, "/tmp", "/tmp"));
  else if (!strcmp(v, "chroot"))
    TRY(v, chroot("/tmp"));
  else if (!strcmp(v, "fsopen"))
    TRY(v, syscall(SYS_fsopen, "tmpfs", 0));
  else if (!strcmp(v, "open_tree"))
    TRY(v, syscall(SYS_open_tree, AT_FDCWD, "/tmp", 0));
  else if (!strcmp(v, "ptrace"))
    TRY(v, ptrace(PTRACE_ATTACH, 1, 0, 0));
  else if (!strcmp(v, "ptrace_traceme"))
    TRY(v, ptrace(PTRACE_TRACEME, 0, 0, 0));
  else if (!strcmp(v, "process_vm_readv")) {
    char b[8], src[8] = "x";
    struct iovec l = {b, 8}, r = {src, 8};
    TRY(v, process_vm_readv(getpid(), &l, 1, &r, 1, 0));
  } else if (!strcmp(v, "keyctl"))
    TRY(v, syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  else if (!strcmp(v, "add_key"))
    TRY(v, syscall(SYS_add_key, "user", "x", "y", 1, KEY_SPEC_PROCESS_KEYRING));
  else if (!strcmp(v, "bpf")) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    TRY(v, syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a));
  } else if (!strcmp(v, "perf_event_open")) {
    struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE,
                                .size = sizeof a,
                                .config = PERF_COUNT_SW_CPU_CLOCK};
    TRY(v, syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  } else if (!strcmp(v, "io_uring_setup")) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    TRY(v, syscall(SYS_io_uring_setup, 4, &p));
  } else if (!strcmp(v, "userfaultfd"))
    TRY(v, syscall(SYS_userfaultfd, 0));
  else if (!strcmp(v, "tiocsti")) {
    char c = 'x';
    TRY(v, ioctl(0, TIOCSTI, &c));
  } else if (!strcmp(v, "tiocsti_high")) {
    char c = 'x';
    TRY(v, syscall(SYS_ioctl, 0, (1ul << 32) | TIOCSTI, &c));
  } else if (!strcmp(v, "tioclinux")) {
    char c = 0;
    TRY(v, ioctl(0, TIOCLINUX, &c));
  } else if (!strcmp(v, "ioctl_fionread")) {
    int n = 0;
    int p[2];
    if (pipe(p) == 0)
      TRY(v, ioctl(p[0], FIONREAD, &n));
  } else if (!strcmp(v, "open_by_handle_at")) {
    char h[sizeof(struct file_handle) + 128];
    struct file_handle *fh = (void *)h;
    fh->handle_bytes = 8;
    fh->handle_type = 1;
    TRY(v, syscall(SYS_open_by_handle_at, AT_FDCWD, fh, O_RDONLY));
  } else if (!strcmp(v, "name_to_handle_at")) {
    char h[sizeof(struct file_handle) + 128];
    struct file_handle *fh = (void *)h;
    int mid;
    fh->handle_bytes = 128;
    TRY(v, syscall(SYS_name_to_handle_at, AT_FDCWD, "/", fh, &mid, 0));
  } else if (!strcmp(v, "read_kcore"))
    printf("read_kcore %ld\n", read_file("/proc/kcore"));
  else if (!strcmp(v, "write_sysrq"))
    TRY(v, write_file("/proc/sysrq-trigger"));
  else if (!strcmp(v, "write_proc_sys"))
    TRY(v, write_file("/proc/sys/kernel/hostname"));
  else if (!strcmp(v, "read_shadow"))
    TRY(v, read_file("/etc/shadow"));
  else if (!strcmp(v, "write_root"))
    TRY(v, write_file("/probe-was-here"));
  else if (!strcmp(v, "write_usr"))
    TRY(v, write_file("/usr/probe-was-here"));
  else if (!strcmp(v, "write_etc"))
    TRY(v, write_file("/etc/passwd"));
  else if (!strcmp(v, "write_work"))
    TRY(v, write_file("/work/ok.txt"));
  else if (!strcmp(v, "write_tmp"))
    TRY(v, write_file("/tmp/ok.txt"));
  else if (!strcmp(v, "setuid0"))
    TRY(v, setuid(0));
  else if (!strcmp(v, "capset_raise")) {
    struct {
      unsigned v;
      int pid;
    } h = {0x20080522, 0};
    unsigned d[6] = {~0u, ~0u, 0, ~0u, ~0u, 0};
    TRY(v, syscall(SYS_capset, &h, d));
  } else if (!strcmp(v, "socket_packet"))
    TRY(v, socket(AF_PACKET, SOCK_RAW, 0));
  else if (!strcmp(v, "socket_raw_inet"))
    TRY(v, socket(AF_INET, SOCK_RAW, 1));
  else if (!strcmp(v, "socket_vsock"))
    TRY(v, socket(40, SOCK_STREAM, 0));
  else if (!strcmp(v, "socket_alg"))
    TRY(v, socket(38, SOCK_SEQPACKET, 0));
  else if (!strcmp(v, "socket_netlink_audit"))
    TRY(v, socket(AF_NETLINK, SOCK_RAW, 9));
  else if (!strcmp(v, "socket_netlink_route"))
    TRY(v, socket(AF_NETLINK, SOCK_RAW, 0));
  else if (!strcmp(v, "socket_inet"))
    TRY(v, socket(AF_INET, SOCK_STREAM, 0));
  else if (!strcmp(v, "socket_unix"))
    TRY(v, socket(AF_UNIX, SOCK_STREAM, 0));
  else if (!strcmp(v, "connect_out")) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(53),
                            .sin_addr.s_addr = htonl(0x08080808)};
    TRY(v, connect(s, (void *)&a, sizeof a));
  } else if (!strncmp(v, "kill:", 5))
    TRY("kill", kill(atoi(v + 5), 0));
  else if (!strcmp(v, "personality"))
    TRY(v, personality(ADDR_NO_RANDOMIZE));
  else if (!strcmp(v, "personality_query"))
    TRY(v, personality(0xffffffff));
  else if (!strcmp(v, "sys"))
    TRY(v, access("/sys/kernel", F_OK));
  else if (!strcmp(v, "ifaces")) {
    struct if_nameindex *ifs = if_nameindex();
    for (struct if_nameindex *i = ifs; i && i->if_index; i++)
      printf("iface: %s\n", i->if_name);
  } else if (!strcmp(v, "status"))
    cat("status", "/proc/self/status", NULL);
  else if (!strcmp(v, "ns"))
    ns_ids();
  else if (!strcmp(v, "fds"))
    list_dir("fd", "/proc/self/fd");
  else if (!strcmp(v, "root"))
    list_dir("root", "/");
  else if (!strcmp(v, "dev"))
    list_dir("dev", "/dev");
  else if (!strcmp(v, "mounts"))
    cat("mount", "/proc/self/mountinfo", NULL);
  else if (!strcmp(v, "hostname")) {
    char h[64] = "";
    gethostname(h, sizeof h);
    printf("hostname: %s\n", h);
  } else if (!strcmp(v, "id"))
    printf("id: uid=%d gid=%d euid=%d pid=%d ppid=%d sid=%d\n", getuid(), getgid(), geteuid(),
           getpid(), getppid(), getsid(0));
  else if (!strcmp(v, "uid_map"))
    cat("uid_map", "/proc/self/uid_map", NULL);
  else if (!strcmp(v, "cgroup"))
    cat("cgroup", "/proc/self/cgroup", NULL);
  else if (!strcmp(v, "fill_tmp"))
    fill("/tmp/fill");
  else if (!strncmp(v, "memhog:", 7))
    memhog(atol(v + 7));
  else if (!strncmp(v, "forkbomb:", 9))
    forkbomb(atoi(v + 9));
  else if (!strcmp(v, "x32")) {
    printf("x32 trying\n");
    fflush(stdout);
    long r = syscall(0x40000000 | SYS_getpid);
    res(v, r, errno); /* reached only if not killed */
  } else if (!strcmp(v, "int80")) {
    printf("int80 trying\n");
    fflush(stdout);
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory"); /* i386 getpid */
    res(v, r < 0 ? -1 : r, r < 0 ? (int)-r : 0);
  } else if (!probe_ext(v))
    printf("%s FAILED unknown-verb\n", v);
  fflush(stdout);
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++)
    verb(argv[i]);
  return 0;
}
