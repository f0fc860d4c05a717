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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init/proto.h"
#include "vm/boot.h"
#include "vm/relay.h"

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

/* The child: sbx-init on fd 3, from the sealed copy boot made. */
static void start_init(const struct sbx_vm_boot *b, int chan)
{
  if (chan != SBX_PROTO_CHAN_FD) {
    if (dup2(chan, SBX_PROTO_CHAN_FD) < 0)
      _exit(127);
  } else {
    fcntl(chan, F_SETFD, 0);
  }
  char *argv[] = {"sbx-init", "--fd-in", NULL};
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
