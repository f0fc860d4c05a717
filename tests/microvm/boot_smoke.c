/* boot_smoke.c — a stand-in /init for testing vm/boot.c under a real
 * kernel (tests/microvm/boot_smoke.py builds and boots it): runs
 * sbx_vm_boot, checks what the workload would see, reports one line on the
 * link port ("BOOT OK <hostname> <release>" or "BOOT FAIL <why>"), waits
 * briefly for the host's ack so the line is not lost, and powers off. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "vm/boot.h"

#define TMPFS_MAGIC 0x01021994
#define OVERLAYFS_MAGIC 0x794c7630

static int host_devices_visible(void)
{
  DIR *d = opendir("/dev");
  struct dirent *e;
  int found = !d;
  while (d && !found && (e = readdir(d)))
    found = strncmp(e->d_name, "vport", 5) == 0 || strncmp(e->d_name, "vd", 2) == 0 ||
            strcmp(e->d_name, "console") == 0;
  if (d)
    closedir(d);
  return found;
}

/* Returns NULL when the sandbox root looks right, else what is wrong. */
static const char *check_root(const struct sbx_vm_boot *b)
{
  struct stat st;
  struct statfs sf;
  if (stat("/usr/bin", &st) < 0 || !S_ISDIR(st.st_mode))
    return "no /usr/bin";
  if (statfs("/", &sf) < 0 || sf.f_type != OVERLAYFS_MAGIC)
    return "/ is not the overlay";
  if (host_devices_visible())
    return "host devices (vport*, vd*, console) visible in /dev";
  if (stat("/dev/null", &st) < 0 || !S_ISCHR(st.st_mode) || (st.st_mode & 0777) != 0666)
    return "bad /dev/null";
  if (stat("/dev/pts/ptmx", &st) < 0 || stat("/dev/shm", &st) < 0 || stat("/proc/self", &st) < 0)
    return "missing /dev/pts, /dev/shm or /proc";
  if (stat("/work", &st) < 0 || st.st_uid != 1000 || (st.st_mode & 07777) != 0755)
    return "bad /work";
  if (stat("/tmp", &st) < 0 || (st.st_mode & 07777) != 01777)
    return "bad /tmp";
  if (statfs("/tmp", &sf) < 0 || sf.f_type != TMPFS_MAGIC)
    return "/tmp is not a tmpfs";
  if (mkdir("/usr/smoke-upper", 0755) < 0)
    return "root not writable";
  if (open("/dev/smoke", O_CREAT | O_WRONLY, 0600) >= 0 || errno != EROFS)
    return "/dev is writable";
  if (fcntl(b->init_memfd, F_GET_SEALS) !=
          (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) ||
      fstat(b->init_memfd, &st) < 0 || st.st_size == 0)
    return "sbx-init memfd not sealed or empty";
  if (fcntl(b->link_fd, F_GETFD) != FD_CLOEXEC)
    return "link fd not close-on-exec";
  return NULL;
}

/* The port refuses writes (EAGAIN) until the host end is connected. */
static void send_line(int fd, const char *line)
{
  size_t off = 0, n = strlen(line);
  for (int tries = 0; off < n && tries < 2000; tries++) {
    ssize_t w = write(fd, line + off, n - off);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    struct timespec five_ms = {.tv_nsec = 5000000};
    nanosleep(&five_ms, NULL);
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  char ack;
  for (int tries = 0; tries < 100; tries++)
    if (poll(&p, 1, 20) > 0 && read(fd, &ack, 1) == 1)
      break;
}

int main(void)
{
  struct sbx_vm_boot b;
  if (sbx_vm_boot(&b) < 0) {
    reboot(RB_POWER_OFF);
    return 1;
  }
  char line[256];
  struct utsname u;
  const char *bad = check_root(&b);
  if (uname(&u) < 0)
    bad = "uname";
  if (bad)
    snprintf(line, sizeof line, "BOOT FAIL %s\n", bad);
  else
    snprintf(line, sizeof line, "BOOT OK %s %s\n", b.hostname, u.release);
  fprintf(stderr, "boot_smoke: clock %lld\n", (long long)time(NULL));
  fprintf(stderr, "boot_smoke: %s", line);
  send_line(b.link_fd, line);
  sync();
  reboot(RB_POWER_OFF);
  return 0;
}
