/* main.c — sbx-vm, the microVM helper: one static binary, two jobs.
 *
 *   As PID 1 of a guest (the initramfs's /init): boot (vm/boot.c: modules,
 *   root filesystem, the link port), start sbx-init on a socketpair, and
 *   relay between it and the link (vm/relay.c) until either ends; then
 *   power the guest off, which ends QEMU (-no-reboot).
 *
 *   sbx-vm relay --chan-fd N --link-fd M   (host): relay between the
 *   daemon's SOCK_SEQPACKET socket (fd N) and QEMU's chardev socket (fd M)
 *   until either ends.  The microvm driver starts it in the sandbox's
 *   cgroup.  With --guest it runs the guest's side instead, outside any
 *   VM: the unit tests put both relays between the sandbox client and a
 *   real sbx-init that way. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/proto.h"
#include "vm/boot.h"
#include "vm/net.h"
#include "vm/relay.h"
#include "vm/text.h"

static int parse_fd(const char *s)
{
  char *end;
  long v = strtol(s, &end, 10);
  return *s && !*end && v >= 0 && v < 1 << 20 ? (int)v : -1;
}

static int host_relay(int argc, char **argv)
{
  int chan = -1, link = -1;
  bool host = true;
  for (int i = 2; i < argc; i += 2) {
    if (!strcmp(argv[i], "--guest")) {
      host = false;
      i--;
    } else if (i + 1 >= argc) {
      break;
    } else if (!strcmp(argv[i], "--chan-fd"))
      chan = parse_fd(argv[i + 1]);
    else if (!strcmp(argv[i], "--link-fd"))
      link = parse_fd(argv[i + 1]);
  }
  if (chan < 0 || link < 0) {
    fprintf(stderr, "usage: sbx-vm relay [--guest] --chan-fd N --link-fd M\n");
    return 2;
  }
  return sbx_relay_run(chan, link, host);
}

/* The value of key=N on the kernel command line (0: absent or bad). */
static uint64_t cmdline_u64(const char *key)
{
  char cmdline[4096], value[32];
  if (sbx_vm_read_text("/proc/cmdline", cmdline, sizeof cmdline) < 0)
    return 0;
  sbx_vm_cmdline_value(cmdline, key, value, sizeof value);
  return strtoull(value, NULL, 10);
}

/* The guest's loopback up: ports (CONNECT) reach servers on it, as in a
 * container's network namespace. */
static void loopback_up(void)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
      (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) < 0))
    fprintf(stderr, "sbx-vm: loopback: %s\n", strerror(errno));
  if (s >= 0)
    close(s);
}

static int write_file(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* sbx-init and everything it starts go into a cgroup of the guest's own
 * with the request's pids limit (sbx.pids; and sbx.memory when a host
 * gives one — the microvm driver sizes the guest's RAM instead, see
 * microvm_qemu.c): a fork bomb stops there, not at the guest kernel's own
 * limits, as in a container.  The hierarchy is mounted only for this and detached again:
 * membership outlives the mount, and the workload sees no cgroupfs. */
static int limit_file(const char *dir, const char *file, uint64_t value)
{
  char path[96], val[32];
  snprintf(path, sizeof path, "%s/sandbox/%s", dir, file);
  snprintf(val, sizeof val, "%llu", (unsigned long long)value);
  return value ? write_file(path, val) : 0;
}

static int enter_guest_cgroup(uint64_t pids, uint64_t memory)
{
  char dir[] = "/tmp/.sbx-cg-XXXXXX", path[64];
  if (!pids && !memory)
    return 0;
  if (!mkdtemp(dir) ||
      mount("cgroup2", dir, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return -1;
  int rc = -1;
  snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
  if (write_file(path, "+pids +memory") == 0) {
    snprintf(path, sizeof path, "%s/sandbox", dir);
    if ((mkdir(path, 0755) == 0 || errno == EEXIST) && limit_file(dir, "pids.max", pids) == 0 &&
        limit_file(dir, "memory.max", memory) == 0) {
      snprintf(path, sizeof path, "%s/sandbox/cgroup.procs", dir);
      rc = write_file(path, "0");
    }
  }
  umount2(dir, MNT_DETACH);
  rmdir(dir);
  return rc;
}

/* The child: sbx-init on fd 3, from the sealed copy boot made. */
static void start_init(const struct sbx_vm_boot *b, int chan)
{
  /* fds 0-2 are the serial console: the host's log, not the workload's. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
    _exit(127);
  if (enter_guest_cgroup(cmdline_u64("sbx.pids"), cmdline_u64("sbx.memory")) < 0)
    _exit(126); /* never run the workload without its pids limit */
  if (chan != SBX_PROTO_CHAN_FD) {
    if (dup2(chan, SBX_PROTO_CHAN_FD) < 0)
      _exit(127);
  } else {
    fcntl(chan, F_SETFD, 0);
  }
  /* The workload's user: the image's (sbx.uid/sbx.gid), else the sandbox
   * user, as in a container; sbx-init drops to it before it serves. */
  uint64_t uid = cmdline_u64("sbx.uid"), gid = cmdline_u64("sbx.gid");
  char u[24], g[24];
  snprintf(u, sizeof u, "%llu", (unsigned long long)(uid && uid < 65536 ? uid : 1000));
  snprintf(g, sizeof g, "%llu", (unsigned long long)(gid && gid < 65536 ? gid : 1000));
  char *argv[] = {"sbx-init", "--fd-in", "--uid", u, "--gid", g, NULL};
  char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
  syscall(SYS_execveat, b->init_memfd, "", argv, envp, AT_EMPTY_PATH);
  fprintf(stderr, "sbx-vm: cannot start sbx-init: %s\n", strerror(errno));
  _exit(127);
}

static int guest(void)
{
  struct sbx_vm_boot b;
  int s[2];
  if (sbx_vm_boot(&b) < 0)
    return 1;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s) < 0) {
    fprintf(stderr, "sbx-vm: socketpair: %s\n", strerror(errno));
    return 1;
  }
  loopback_up();
  if (sbx_vm_net_config() < 0)
    return 1;
  /* The kernel log is the guest's own: its tenant may read it (dmesg). */
  write_file("/proc/sys/kernel/dmesg_restrict", "0");
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "sbx-vm: fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    close(s[0]);
    close(b.link_fd);
    start_init(&b, s[1]);
  }
  close(s[1]);
  return sbx_relay_run(s[0], b.link_fd, false);
}

int main(int argc, char **argv)
{
  /* A peer gone (the link, a pipe the workload closed) is an EPIPE the
   * relay handles, not a signal that ends it. */
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && !strcmp(argv[1], "relay"))
    return host_relay(argc, argv);
  if (getpid() != 1) {
    fprintf(stderr, "sbx-vm: runs as a microVM's PID 1, or as `sbx-vm relay` on the host\n");
    return 2;
  }
  guest();
  /* PID 1 must not exit (the kernel would panic); powering off ends QEMU. */
  sync();
  reboot(RB_POWER_OFF);
  for (;;)
    pause();
}
