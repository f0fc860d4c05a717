/* smoke_init.c — a stand-in /init for the microVM assets' smoke boot
 * (test_assets.py): proves the initramfs layout scripts/microvm-assets.py
 * writes is what the guest side expects, without sbx-vm.  It mounts the
 * kernel filesystems, loads /modules/order with finit_module, checks the
 * sbx.link virtio port and /dev/vda, mounts the squashfs root read-only and
 * looks for python3 in it.  Prints "SMOKE OK" or "SMOKE FAIL <why>", then
 * powers off (the test reads the serial console). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void poweroff(void)
{
  sync();
  reboot(RB_POWER_OFF);
  for (;;)
    pause();
}

static void fail(const char *what)
{
  printf("SMOKE FAIL %s: %s\n", what, strerror(errno));
  fflush(stdout);
  poweroff();
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void load_modules(void)
{
  FILE *order = fopen("/modules/order", "r");
  if (!order)
    fail("/modules/order");
  char name[256], path[300];
  while (fgets(name, sizeof name, order)) {
    name[strcspn(name, "\n")] = '\0';
    if (!name[0])
      continue;
    snprintf(path, sizeof path, "/modules/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail(path);
    /* EEXIST: built in on some other kernel, fine. */
    if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
      fail(path);
    close(fd);
  }
  fclose(order);
}

/* The port named sbx.link appears under /sys/class/virtio-ports once
 * virtio_console has probed; the probe can lag the module load a little. */
static int have_link_port(void)
{
  DIR *d = opendir("/sys/class/virtio-ports");
  if (!d)
    return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d))) {
    char path[300], buf[64] = "";
    snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "sbx.link", 8) == 0)
      found = 1;
    fclose(f);
  }
  closedir(d);
  return found;
}

static int wait_for(int (*check)(void), double seconds)
{
  double end = now() + seconds;
  while (!check()) {
    if (now() > end)
      return 0;
    usleep(10000);
  }
  return 1;
}

static int have_vda(void)
{
  struct stat st;
  return stat("/dev/vda", &st) == 0 && S_ISBLK(st.st_mode);
}

int main(void)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) < 0 && errno != EBUSY)
    fail("mount /dev");
  if (mount("proc", "/proc", "proc", 0, NULL) < 0)
    fail("mount /proc");
  if (mount("sysfs", "/sys", "sysfs", 0, NULL) < 0)
    fail("mount /sys");
  double t0 = now();
  load_modules();
  printf("SMOKE modules loaded in %.0f ms\n", (now() - t0) * 1000);
  errno = ENOENT;
  if (!wait_for(have_link_port, 5))
    fail("no virtio port named sbx.link");
  errno = ENOENT;
  if (!wait_for(have_vda, 5))
    fail("/dev/vda");
  t0 = now();
  if (mount("/dev/vda", "/newroot", "squashfs", MS_RDONLY, NULL) < 0)
    fail("mount /dev/vda on /newroot");
  printf("SMOKE root mounted in %.0f ms\n", (now() - t0) * 1000);
  if (access("/newroot/usr/bin/python3", X_OK) < 0)
    fail("/newroot/usr/bin/python3");
  printf("SMOKE OK\n");
  poweroff();
}
