/* boot.c — PID 1's boot in a microVM guest, up to the relay: early mounts,
 * the sbx.* command line, modules, devices, the sbx-init memfd, the link
 * port, the sandbox root and the switch into it (the steps and the layout
 * are in boot.h).  Libc only, static, runs as PID 1 with nothing else
 * running, so plain paths are safe except inside the root image, where a
 * mount point is checked to be a real directory (an image symlink there
 * would otherwise resolve against the initramfs). */
#include "vm/boot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "vm/link.h"

#define NEWROOT "/newroot"
#define ROOT NEWROOT "/root"
#define INIT_PATH "/sbx-init"
#define MODULES_DIR "/modules"
#define DISK_DEV "/dev/vda"
/* The sandbox user (isolation/iso.h SBX_ISO_SANDBOX_UID/GID), owner of /work. */
#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
/* Below this the root's upper, /tmp and /work are useless; 0 would even
 * mean "unlimited" to tmpfs. */
#define MIN_DISK (1ull << 20)

/* What /proc/cmdline asked for. */
struct opts {
  uint64_t disk, memory;
  uint64_t uid, gid; /* the workload's user (sbx.uid/sbx.gid): owner of /work */
  time_t time;       /* 0: not given */
  bool have_seed;
  uint8_t seed[32];
  char hostname[65];
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = sizeof buf - 2;
  buf[n++] = '\n';
  if (write(2, "sbx-vm: ", 8) == 8 && write(2, buf, (size_t)n) < 0)
    return; /* nowhere else to say it */
}

/* Prints "<what>: <strerror(errno)>" and returns -1. */
static int fail(const char *fmt, ...)
{
  int e = errno;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  say("%s: %s", what, strerror(e));
  errno = e;
  return -1;
}

static uint64_t now_ms(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------- early setup */

static int mount_fs(const char *src, const char *dir, const char *type, unsigned long flags,
                    const char *data)
{
  if (mount(src, dir, type, flags, data) < 0)
    return fail("mount %s on %s", type, dir);
  return 0;
}

/* The kernel starts /init with fds 0-2 closed when the initramfs has no
 * /dev/console; devtmpfs has one. */
static void open_console(void)
{
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0)
      continue;
    int c = open("/dev/console", O_RDWR | O_NOCTTY);
    if (c < 0)
      return; /* nothing to print on; boot anyway */
    if (c != fd) {
      dup2(c, fd);
      close(c);
    }
  }
}

static int mount_early(void)
{
  /* mkdir: the asset script makes these, but a missing one costs nothing. */
  mkdir("/dev", 0755);
  mkdir("/proc", 0555);
  mkdir("/sys", 0555);
  int dev = mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  int e = errno;
  open_console();
  if (dev < 0 && e != EBUSY) {
    errno = e;
    return fail("mount devtmpfs on /dev");
  }
  if (mount_fs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return -1;
  return mount_fs("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* ---------------------------------------------------------- command line */

static bool parse_u64(const char *s, uint64_t *out)
{
  if (*s < '0' || *s > '9')
    return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

static int hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  c |= 0x20;
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool parse_seed(const char *s, uint8_t out[32])
{
  if (strlen(s) != 64)
    return false;
  for (int i = 0; i < 32; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

/* RFC 1123 labels' characters; 1-64 bytes (sethostname's limit). */
static bool parse_hostname(const char *s, char out[65])
{
  size_t n = strlen(s);
  if (n == 0 || n > 64 || s[0] == '-' || s[0] == '.')
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
      return false;
  memcpy(out, s, n + 1);
  return true;
}

/* One "sbx.<key>=<val>" word; key and val point into the word. */
static void parse_key(struct opts *o, const char *key, const char *val)
{
  uint64_t v;
  bool ok = true;
  if (strcmp(key, "disk") == 0) {
    ok = val && parse_u64(val, &v) && v >= MIN_DISK;
    if (ok)
      o->disk = v;
  } else if (strcmp(key, "memory") == 0) {
    ok = val && parse_u64(val, &v) && v > 0;
    if (ok)
      o->memory = v;
  } else if (strcmp(key, "time") == 0) {
    ok = val && parse_u64(val, &v) && v > 0 && v < (1ull << 40);
    if (ok)
      o->time = (time_t)v;
  } else if (strcmp(key, "seed") == 0) {
    ok = val && parse_seed(val, o->seed);
    o->have_seed = ok;
  } else if (strcmp(key, "uid") == 0 || strcmp(key, "gid") == 0) {
    ok = val && parse_u64(val, &v) && v > 0 && v < 65536;
    if (ok)
      *(key[0] == 'u' ? &o->uid : &o->gid) = v;
  } else if (strcmp(key, "hostname") == 0) {
    ok = val && parse_hostname(val, o->hostname);
  } else {
    return; /* a key a newer host knows: not ours to judge */
  }
  if (!ok)
    say("ignoring malformed sbx.%s on the kernel command line; using the default", key);
}

static int read_cmdline(struct opts *o)
{
  char buf[4096];
  int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("open /proc/cmdline");
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return fail("read /proc/cmdline");
  buf[n] = '\0';
  char *save = NULL;
  for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
    if (strncmp(w, "sbx.", 4) != 0)
      continue;
    char *eq = strchr(w, '=');
    if (eq)
      *eq = '\0';
    parse_key(o, w + 4, eq ? eq + 1 : NULL);
  }
  explicit_bzero(buf, sizeof buf); /* the seed's copy */
  return 0;
}

/* Clock first so every file the boot creates has a sane time. */
static int apply_opts(struct opts *o)
{
  if (o->time) {
    struct timespec ts = {.tv_sec = o->time};
    if (clock_settime(CLOCK_REALTIME, &ts) < 0)
      return fail("set the clock to sbx.time=%lld", (long long)o->time);
  }
  if (o->have_seed) {
    struct {
      struct rand_pool_info info;
      uint8_t buf[32];
    } rp = {.info = {.entropy_count = 256, .buf_size = 32}};
    memcpy(rp.buf, o->seed, 32);
    int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
    int r = fd < 0 ? -1 : ioctl(fd, RNDADDENTROPY, &rp);
    int e = errno;
    if (fd >= 0)
      close(fd);
    explicit_bzero(&rp, sizeof rp);
    explicit_bzero(o->seed, sizeof o->seed);
    errno = e;
    if (r < 0)
      return fail("credit sbx.seed to the RNG (RNDADDENTROPY on /dev/urandom)");
  }
  if (sethostname(o->hostname, strlen(o->hostname)) < 0)
    return fail("sethostname %s", o->hostname);
  return 0;
}

/* ---------------------------------------------------------- modules */

static int load_module(const char *name)
{
  if (!*name || strchr(name, '/') || name[0] == '.') {
    say(MODULES_DIR "/order: bad module name '%s'", name);
    return -1;
  }
  size_t n = strlen(name);
  bool has_ko = n > 3 && strcmp(name + n - 3, ".ko") == 0;
  char path[320];
  snprintf(path, sizeof path, MODULES_DIR "/%s%s", name, has_ko ? "" : ".ko");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("open %s", path);
  long r = syscall(SYS_finit_module, fd, "", 0);
  int e = errno;
  close(fd);
  if (r < 0 && e != EEXIST) {
    errno = e;
    return fail("load module %s", path);
  }
  unlink(path); /* the initramfs is RAM and unreachable after the switch */
  return 0;
}

/* No order file: a kernel with everything built in. */
static int load_modules(void)
{
  FILE *f = fopen(MODULES_DIR "/order", "re");
  if (!f)
    return errno == ENOENT ? 0 : fail("open " MODULES_DIR "/order");
  char line[256];
  int r = 0;
  while (r == 0 && fgets(line, sizeof line, f)) {
    line[strcspn(line, " \t\r\n")] = '\0';
    if (line[0] && line[0] != '#')
      r = load_module(line);
  }
  fclose(f);
  return r;
}

/* ---------------------------------------------------------- devices */

static bool is_node(const char *path, mode_t type)
{
  struct stat st;
  return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* Sets dev to "/dev/vportNpM" and returns true once a port named
 * SBX_LINK_PORT_NAME has a device node. */
static bool find_link_port(char *dev, size_t size)
{
  DIR *d = opendir("/sys/class/virtio-ports");
  if (!d)
    return false;
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.' || strlen(e->d_name) > 32)
      continue;
    char path[96], name[64];
    snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, name, sizeof name - 1);
    if (fd >= 0)
      close(fd);
    if (n <= 0)
      continue; /* no name yet: the host's name arrives after the port */
    name[n] = '\0';
    name[strcspn(name, "\n")] = '\0';
    snprintf(dev, size, "/dev/%s", e->d_name);
    found = strcmp(name, SBX_LINK_PORT_NAME) == 0 && is_node(dev, S_IFCHR);
  }
  closedir(d);
  return found;
}

/* Probing may finish after finit_module returns (virtio-serial learns port
 * names from the host asynchronously): poll, bounded. */
static int wait_devices(char *link_dev, size_t size)
{
  uint64_t deadline = now_ms(CLOCK_MONOTONIC) + SBX_VM_DEVICE_TIMEOUT_MS;
  bool port = false, disk = false;
  for (;;) {
    port = port || find_link_port(link_dev, size);
    disk = disk || is_node(DISK_DEV, S_IFBLK);
    if (port && disk)
      return 0;
    if (now_ms(CLOCK_MONOTONIC) >= deadline)
      break;
    struct timespec two_ms = {.tv_nsec = 2000000};
    nanosleep(&two_ms, NULL);
  }
  if (!port)
    say("no virtio-serial port named " SBX_LINK_PORT_NAME " after %d ms",
        SBX_VM_DEVICE_TIMEOUT_MS);
  if (!disk)
    say("no root disk " DISK_DEV " after %d ms", SBX_VM_DEVICE_TIMEOUT_MS);
  return -1;
}

/* A sealed copy, so nothing in the guest can change what later execs run
 * (init/launch.c's sbx_init_memfd, without the daemon's common library). */
static int copy_init(void)
{
  int src = open(INIT_PATH, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (src < 0 || fstat(src, &st) < 0)
    return fail("open " INIT_PATH);
  int mfd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0) {
    close(src);
    return fail("memfd_create");
  }
  off_t off = 0;
  int r = 0;
  while (r == 0 && off < st.st_size) {
    ssize_t n = sendfile(mfd, src, &off, (size_t)(st.st_size - off));
    if (n <= 0 && !(n < 0 && errno == EINTR))
      r = fail("copy " INIT_PATH " into a memfd%s", n == 0 ? " (short file)" : "");
  }
  close(src);
  if (r == 0 &&
      fcntl(mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
    r = fail("seal the sbx-init memfd");
  if (r < 0) {
    close(mfd);
    return -1;
  }
  unlink(INIT_PATH); /* RAM, and unreachable after the switch anyway */
  return mfd;
}

/* ---------------------------------------------------------- the root */

/* A mount point inside the image: made if missing, refused unless it is a
 * real directory. */
static int ensure_dir(const char *path, mode_t mode)
{
  struct stat st;
  if (mkdir(path, mode) < 0 && errno != EEXIST)
    return fail("mkdir %s", path);
  if (lstat(path, &st) < 0)
    return fail("stat %s", path);
  if (!S_ISDIR(st.st_mode)) {
    say("%s in the root image is not a directory", path + strlen(ROOT));
    return -1;
  }
  return 0;
}

/* tmpfs options sized like the container driver's (isolation/box.c):
 * nr_inodes = disk / 16 KiB, 1024…1M. */
static void tmpfs_opts(char *out, size_t size, const char *mode_owner, uint64_t disk)
{
  uint64_t inodes = disk / 16384;
  inodes = inodes < 1024 ? 1024 : inodes > 1048576 ? 1048576 : inodes;
  snprintf(out, size, "%s,size=%llu,nr_inodes=%llu", mode_owner, (unsigned long long)disk,
           (unsigned long long)inodes);
}

/* upper/ is the merged "/": it takes the image root's mode and owner. */
static int make_upper(void)
{
  struct stat st;
  if (stat(NEWROOT "/.lower", &st) < 0)
    return fail("stat the root image's /");
  if (mkdir(NEWROOT "/.rw/upper", st.st_mode & 07777) < 0 ||
      chown(NEWROOT "/.rw/upper", st.st_uid, st.st_gid) < 0 ||
      mkdir(NEWROOT "/.rw/work", 0700) < 0)
    return fail("make the overlay's upper and work dirs");
  return 0;
}

/* /newroot: a tmpfs holding the read-only image, the writable layer and
 * the overlay of both at /newroot/root. */
static int build_overlay(uint64_t disk)
{
  char opts[128];
  if (mount_fs("sbx-stage", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
    return -1;
  if (mkdir(NEWROOT "/.lower", 0755) < 0 || mkdir(NEWROOT "/.rw", 0755) < 0 ||
      mkdir(ROOT, 0755) < 0)
    return fail("mkdir in " NEWROOT);
  unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV;
  if (mount_fs(DISK_DEV, NEWROOT "/.lower", "squashfs", ro, NULL) < 0)
    return -1;
  tmpfs_opts(opts, sizeof opts, "mode=0755", disk);
  if (mount_fs("sbx-upper", NEWROOT "/.rw", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0 ||
      make_upper() < 0)
    return -1;
  return mount_fs("sbx-root", ROOT, "overlay", MS_NOSUID | MS_NODEV,
                  "lowerdir=" NEWROOT "/.lower,upperdir=" NEWROOT "/.rw/upper,workdir=" NEWROOT
                  "/.rw/work");
}

static const struct {
  const char *name;
  unsigned dev; /* major << 8 | minor */
} dev_nodes[] = {
    {"null", 1 << 8 | 3},   {"zero", 1 << 8 | 5},    {"full", 1 << 8 | 7},
    {"random", 1 << 8 | 8}, {"urandom", 1 << 8 | 9}, {"tty", 5 << 8 | 0},
};
static const char *const dev_links[][2] = {
    {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
    {"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},
};

/* A fresh /dev with only what a workload needs (isolation/mount.c's
 * build_dev): no vport, no vda. */
static int build_dev(void)
{
  char path[64];
  if (ensure_dir(ROOT "/dev", 0755) < 0 ||
      mount_fs("sbx-dev", ROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
               "mode=0755,size=64k,nr_inodes=64") < 0)
    return -1;
  for (size_t i = 0; i < sizeof dev_nodes / sizeof dev_nodes[0]; i++) {
    unsigned mm = dev_nodes[i].dev;
    snprintf(path, sizeof path, ROOT "/dev/%s", dev_nodes[i].name);
    if (mknod(path, S_IFCHR | 0666, makedev(mm >> 8, mm & 0xff)) < 0)
      return fail("mknod %s", path);
  }
  for (size_t i = 0; i < sizeof dev_links / sizeof dev_links[0]; i++) {
    snprintf(path, sizeof path, ROOT "/dev/%s", dev_links[i][0]);
    if (symlink(dev_links[i][1], path) < 0)
      return fail("symlink %s", path);
  }
  if (mkdir(ROOT "/dev/pts", 0755) < 0 || mkdir(ROOT "/dev/shm", 01777) < 0)
    return fail("mkdir in /dev");
  if (mount_fs("devpts", ROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0 ||
      mount_fs("shm", ROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               "mode=1777,size=64m") < 0)
    return -1;
  /* The /dev tmpfs itself (not its submounts) is read-only from now on. */
  if (mount(NULL, ROOT "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
            NULL) < 0)
    return fail("make /dev read-only");
  return 0;
}

/* /proc, /dev, /tmp and /work, as the container driver has them: /work
 * belongs to the workload's user (an image's User, else the sandbox
 * user). */
static int build_mounts(const struct opts *o)
{
  uint64_t disk = o->disk;
  char opts[160];
  if (ensure_dir(ROOT "/proc", 0555) < 0 ||
      mount_fs("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
      build_dev() < 0)
    return -1;
  tmpfs_opts(opts, sizeof opts, "mode=1777", disk);
  if (ensure_dir(ROOT "/tmp", 01777) < 0 ||
      mount_fs("sbx-tmp", ROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return -1;
  char owner[64];
  snprintf(owner, sizeof owner, "mode=0755,uid=%llu,gid=%llu", (unsigned long long)o->uid,
           (unsigned long long)o->gid);
  tmpfs_opts(opts, sizeof opts, owner, disk);
  if (ensure_dir(ROOT "/work", 0755) < 0 ||
      mount_fs("sbx-work", ROOT "/work", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return -1;
  return 0;
}

/* The initramfs's own /dev (devtmpfs: every device node, the vport and vda
 * among them), /proc and /sys go first, so nothing after the switch can
 * reach them through a path; then the overlay moves onto / (the initramfs
 * rootfs cannot be pivot_root'ed or unmounted: switch_root's way). */
static int switch_root(void)
{
  static const char *const early[] = {"/dev", "/proc", "/sys"};
  for (size_t i = 0; i < 3; i++)
    if (umount2(early[i], MNT_DETACH) < 0)
      return fail("detach the initramfs's %s", early[i]);
  if (chdir(ROOT) < 0)
    return fail("chdir " ROOT);
  if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
    return fail("move " ROOT " onto /");
  if (chroot(".") < 0 || chdir("/") < 0)
    return fail("chroot into the sandbox root");
  return 0;
}

/* ---------------------------------------------------------- the whole */

/* Up to the devices: what the kernel gave us and what it needs loaded. */
static int boot_kernel_side(struct opts *o, char *link_dev, size_t size, uint64_t t[2])
{
  if (mount_early() < 0 || read_cmdline(o) < 0 || apply_opts(o) < 0)
    return -1;
  uint64_t t0 = now_ms(CLOCK_MONOTONIC);
  if (load_modules() < 0)
    return -1;
  uint64_t t1 = now_ms(CLOCK_MONOTONIC);
  if (wait_devices(link_dev, size) < 0)
    return -1;
  t[0] = t1 - t0;
  t[1] = now_ms(CLOCK_MONOTONIC) - t1;
  return 0;
}

int sbx_vm_boot(struct sbx_vm_boot *b)
{
  uint64_t start = now_ms(CLOCK_MONOTONIC), t[2];
  struct opts o = {.disk = SBX_VM_DEFAULT_DISK,
                   .uid = SANDBOX_UID,
                   .gid = SANDBOX_GID,
                   .hostname = "sandbox"};
  char link_dev[64];
  *b = (struct sbx_vm_boot){.link_fd = -1, .init_memfd = -1};
  /* Modes below are meant literally (mknod 0666, dirs 1777); workloads get
   * the usual 022 back. */
  umask(0);
  int r = boot_kernel_side(&o, link_dev, sizeof link_dev, t);
  if (r == 0 && (b->init_memfd = copy_init()) < 0)
    r = -1;
  if (r == 0 && (b->link_fd = open(link_dev, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0)
    r = fail("open %s (the " SBX_LINK_PORT_NAME " port)", link_dev);
  uint64_t t_root = now_ms(CLOCK_MONOTONIC);
  if (r == 0)
    r = build_overlay(o.disk) < 0 || build_mounts(&o) < 0 || switch_root() < 0 ? -1 : 0;
  umask(022);
  if (r < 0) {
    if (b->link_fd >= 0)
      close(b->link_fd);
    if (b->init_memfd >= 0)
      close(b->init_memfd);
    *b = (struct sbx_vm_boot){.link_fd = -1, .init_memfd = -1};
    return -1;
  }
  uint64_t end = now_ms(CLOCK_MONOTONIC);
  b->disk_bytes = o.disk;
  b->memory_bytes = o.memory;
  memcpy(b->hostname, o.hostname, sizeof b->hostname);
  say("booted in %llu ms (modules %llu, devices %llu, root %llu); %llu ms since the kernel started",
      (unsigned long long)(end - start), (unsigned long long)t[0], (unsigned long long)t[1],
      (unsigned long long)(end - t_root), (unsigned long long)now_ms(CLOCK_BOOTTIME));
  return 0;
}
