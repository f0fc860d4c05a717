/* mount.c — the sandbox's filesystem, built in the child's new mount
 * namespace (isolation.md §1 C1–C9):
 *
 *   propagation private → tmpfs root → host /usr bound ro,nosuid,nodev and
 *   the /bin /lib* /sbin links recreated → synthetic /etc (no host secrets)
 *   → fresh /proc with runc's masked and read-only paths → minimal /dev →
 *   /tmp and /work tmpfs sized by the disk limit → pivot_root, old root
 *   detached → root read-only.
 *
 * An image sandbox (plan->nlayers > 0) instead gets the copy-on-write
 * overlay the parent built (overlay.c) as its root: no /usr or /etc from
 * the host; the image's own /etc with the generated hosts, resolv.conf and
 * hostname bound read-only over it; the same /proc, /dev, /tmp and /work;
 * and the root stays writable (nosuid,nodev; writes go to its upper tmpfs).
 *
 * Every mount target is opened relative to the new root's fd with
 * O_PATH|O_NOFOLLOW, checked to be a directory or regular file (never a
 * symlink), and mounted through /proc/self/fd/N, so no string path inside
 * the sandbox tree is ever resolved (CVE-2021-30465, CVE-2025-31133).  At
 * this point nothing untrusted runs yet; the habit costs nothing and keeps
 * the code right if that ever changes.  Host sources (/usr, /dev/null,
 * /etc/ssl/certs) are daemon-controlled paths.
 *
 * Runs after clone in a threaded process: raw syscalls only, no heap. */
#include "isolation/iso.h"

#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RO_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* "/proc/self/fd/<fd>" without snprintf (not async-signal-safe). */
static void fd_path(int fd, char buf[32])
{
  static const char pre[] = "/proc/self/fd/";
  char digits[12];
  int n = 0;
  do {
    digits[n++] = (char)('0' + fd % 10);
    fd /= 10;
  } while (fd && n < 11);
  memcpy(buf, pre, sizeof pre - 1);
  int i = sizeof pre - 1;
  while (n)
    buf[i++] = digits[--n];
  buf[i] = '\0';
}

/* Opens dir/rel as an O_PATH fd that is a real directory or file. */
static int open_target(int dirfd, const char *rel)
{
  int fd = openat(dirfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0 ||
      !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    close(fd);
    errno = ELOOP;
    return -1;
  }
  return fd;
}

static int mount_at(int dirfd, const char *rel, const char *src, const char *type,
                    unsigned long flags, const char *data)
{
  int fd = open_target(dirfd, rel);
  if (fd < 0)
    return -1;
  char p[32];
  fd_path(fd, p);
  int r = sbx_fault(SBX_FAULT_MOUNT) ? -1 : mount(src, p, type, flags, data);
  int e = errno;
  close(fd);
  errno = e;
  return r;
}

static int set_attr(int dirfd, const char *rel, uint64_t attrs, bool recursive)
{
  struct mount_attr a = {.attr_set = attrs};
  unsigned flags = AT_SYMLINK_NOFOLLOW | (recursive ? AT_RECURSIVE : 0);
  if (!rel || !*rel)
    flags |= AT_EMPTY_PATH;
  return (int)syscall(SYS_mount_setattr, dirfd, rel ? rel : "", flags, &a, sizeof a);
}

/* Binds a host path (daemon-controlled) read-only onto dirfd/rel. */
static int bind_ro(int dirfd, const char *rel, const char *host)
{
  if (mount_at(dirfd, rel, host, NULL, MS_BIND | MS_REC, NULL) < 0)
    return -1;
  return set_attr(dirfd, rel, RO_ATTRS, true);
}

/* mkdirat that accepts an existing entry: an image already has /proc,
 * /dev, /tmp…  Whatever is there is checked by open_target() before
 * anything is mounted on it (a symlink is refused). */
static int ensure_dir(int dirfd, const char *rel, mode_t mode)
{
  return mkdirat(dirfd, rel, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static int make_file(int dirfd, const char *rel, const char *content, mode_t mode)
{
  int fd = openat(dirfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return -1;
  size_t len = content ? strlen(content) : 0;
  ssize_t w = len ? write(fd, content, len) : 0;
  int e = errno;
  close(fd);
  if (w != (ssize_t)len) {
    errno = w < 0 ? e : EIO;
    return -1;
  }
  return 0;
}

static const char etc_passwd[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                 "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n"
                                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\ntty:x:5:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] =
    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";
/* With egress none there is only lo and no resolver to point at.  The
 * network module (net/) sets the nameserver line its DNS responder is
 * reached at, for every sandbox: a pooled sandbox learns its policy only
 * at hand-over, and a none sandbox simply has no route to it. */
static char etc_resolv[256] = "# no network in this sandbox\n";

void sbx_iso_set_resolv_conf(const char *text)
{
  /* Set once at daemon start, before the first sandbox is built. */
  snprintf(etc_resolv, sizeof etc_resolv, "%s", text);
}

static const char etc_nsswitch[] =
    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
    "networks: files\nprotocols: files\nservices: files\n";

/* The first ETC_OVER_IMAGE are what an image gets over its own /etc (it
 * keeps its users and its nsswitch); a host-root sandbox gets them all.
 * resolv.conf's content is the caller's (NULL here). */
static const struct {
  const char *name;
  const char *content;
} etc_files[] = {{"hosts", etc_hosts},   {"resolv.conf", NULL}, {"hostname", "sandbox\n"},
                 {"passwd", etc_passwd}, {"group", etc_group},  {"nsswitch.conf", etc_nsswitch}};
#define ETC_OVER_IMAGE 3

int sbx_iso_write_etc(int etc, bool image, const char *resolv)
{
  size_t n = image ? ETC_OVER_IMAGE : sizeof etc_files / sizeof etc_files[0];
  for (size_t i = 0; i < n; i++) {
    const char *content = etc_files[i].content;
    if (!content)
      content = resolv ? resolv : etc_resolv;
    if (make_file(etc, etc_files[i].name, content, 0644) < 0)
      return -1;
  }
  return 0;
}

static int build_etc(int root, const struct sbx_iso_plan *p)
{
  if (mkdirat(root, "etc", 0755) < 0)
    return -1;
  int etc = openat(root, "etc", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0)
    return -1;
  int r = -1;
  if (sbx_iso_write_etc(etc, false, NULL) < 0)
    goto out;
  if (p->have_ldcache && (make_file(etc, "ld.so.cache", NULL, 0644) < 0 ||
                          bind_ro(etc, "ld.so.cache", "/etc/ld.so.cache") < 0))
    goto out;
  if (p->have_certs && (mkdirat(etc, "ssl", 0755) < 0 || mkdirat(etc, "ssl/certs", 0755) < 0 ||
                        bind_ro(etc, "ssl/certs", "/etc/ssl/certs") < 0))
    goto out;
  if (p->have_alternatives && (mkdirat(etc, "alternatives", 0755) < 0 ||
                               bind_ro(etc, "alternatives", "/etc/alternatives") < 0))
    goto out;
  r = 0;
out:;
  int e = errno;
  close(etc);
  errno = e;
  return r;
}

/* runc/Docker's lists (moby defaults.go): files masked by /dev/null, dirs
 * by an empty read-only tmpfs, and paths made read-only. */
static const char *const proc_masked[] = {
    "kcore",         "keys",       "timer_list", "timer_stats", "sched_debug",
    "latency_stats", "interrupts", "acpi",       "asound",      "scsi",
    "sysrq-trigger", "kallsyms",   "kmsg",       "config.gz",   "vmcoreinfo",
    "softirqs",      NULL,
};
static const char *const proc_readonly[] = {"sys",    "bus",      "fs", "irq",
                                            "driver", "pressure", NULL};

static int mask_one(int proc, const char *name)
{
  int fd = openat(proc, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  struct stat st;
  int r = fstat(fd, &st);
  close(fd);
  if (r < 0)
    return -1;
  if (S_ISDIR(st.st_mode))
    return mount_at(proc, name, "sbx-mask", "tmpfs",
                    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "size=0,nr_inodes=1,mode=0555");
  return mount_at(proc, name, "/dev/null", NULL, MS_BIND, NULL);
}

static int readonly_one(int proc, const char *name)
{
  int fd = open_target(proc, name);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  char p[32];
  fd_path(fd, p);
  int r = mount(p, p, NULL, MS_BIND | MS_REC, NULL);
  int e = errno;
  close(fd);
  errno = e;
  if (r < 0)
    return -1;
  return set_attr(proc, name, RO_ATTRS | MOUNT_ATTR_NOEXEC, true);
}

static int build_proc(int root)
{
  if (ensure_dir(root, "proc", 0555) < 0)
    return -1;
  /* A new procfs instance: it shows only this sandbox's pid namespace. */
  if (mount_at(root, "proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return -1;
  int proc = openat(root, "proc", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (proc < 0)
    return -1;
  int r = 0;
  for (int i = 0; proc_masked[i] && r == 0; i++)
    r = mask_one(proc, proc_masked[i]);
  for (int i = 0; proc_readonly[i] && r == 0; i++)
    r = readonly_one(proc, proc_readonly[i]);
  int e = errno;
  close(proc);
  errno = e;
  return r;
}

static const char *const dev_nodes[] = {"null",    "zero", "full", "random",
                                        "urandom", "tty",  NULL};
static const char *const dev_links[][2] = {
    {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
    {"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},         {NULL, NULL},
};

static int build_dev(int root)
{
  if (ensure_dir(root, "dev", 0755) < 0 ||
      mount_at(root, "dev", "sbx-dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
               "mode=0755,size=64k,nr_inodes=64") < 0)
    return -1;
  int dev = openat(root, "dev", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (dev < 0)
    return -1;
  int r = -1;
  char host[32];
  for (int i = 0; dev_nodes[i]; i++) {
    /* mknod is impossible in a user namespace: bind the host's nodes. */
    memcpy(host, "/dev/", 5);
    strcpy(host + 5, dev_nodes[i]);
    if (make_file(dev, dev_nodes[i], NULL, 0666) < 0 ||
        mount_at(dev, dev_nodes[i], host, NULL, MS_BIND, NULL) < 0 ||
        set_attr(dev, dev_nodes[i], MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) < 0)
      goto out;
  }
  for (int i = 0; dev_links[i][0]; i++)
    if (symlinkat(dev_links[i][1], dev, dev_links[i][0]) < 0)
      goto out;
  if (mkdirat(dev, "pts", 0755) < 0 ||
      mount_at(dev, "pts", "devpts", "devpts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0)
    goto out;
  if (mkdirat(dev, "shm", 01777) < 0 ||
      mount_at(dev, "shm", "shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               "mode=1777,size=64m") < 0)
    goto out;
  /* The /dev tmpfs itself (not its submounts) is read-only from now on. */
  r = set_attr(dev, NULL, MOUNT_ATTR_RDONLY, false);
out:;
  int e = errno;
  close(dev);
  errno = e;
  return r;
}

static int build_usr(int root, const struct sbx_iso_plan *p)
{
  if (mkdirat(root, "usr", 0755) < 0 || bind_ro(root, "usr", "/usr") < 0)
    return -1;
  for (int i = 0; i < p->nlinks; i++)
    if (symlinkat(p->links[i].target, root, p->links[i].name) < 0)
      return -1;
  char host[20];
  for (int i = 0; i < p->nrobinds; i++) {
    host[0] = '/';
    strcpy(host + 1, p->robinds[i]);
    if (mkdirat(root, p->robinds[i], 0755) < 0 || bind_ro(root, p->robinds[i], host) < 0)
      return -1;
  }
  return 0;
}

static int build_tmp(int root, const struct sbx_iso_plan *p)
{
  if (ensure_dir(root, "tmp", 01777) < 0 || ensure_dir(root, "work", 0755) < 0)
    return -1;
  if (mount_at(root, "tmp", "sbx-tmp", "tmpfs", MS_NOSUID | MS_NODEV, p->tmp_opts) < 0)
    return -1;
  return mount_at(root, "work", "sbx-work", "tmpfs", MS_NOSUID | MS_NODEV, p->work_opts);
}

/* Makes etc/name a regular file to bind over: an image's symlink there
 * (resolv.conf -> ../run/…) is removed (a whiteout in the upper), a
 * missing one created; a directory is refused. */
static int image_etc_target(int etc, const char *name)
{
  int fd = openat(etc, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st;
    int r = fstat(fd, &st);
    close(fd);
    if (r < 0)
      return -1;
    if (S_ISREG(st.st_mode))
      return 0;
    if (!S_ISLNK(st.st_mode)) {
      errno = EISDIR;
      return -1;
    }
    if (unlinkat(etc, name, 0) < 0)
      return -1;
  } else if (errno != ENOENT) {
    return -1;
  }
  return make_file(etc, name, NULL, 0644);
}

/* The generated files an image's /etc gets over its own, bound read-only
 * (the host pack's /etc has them as plain files; see build_etc).  stage:
 * the staging tmpfs that holds them (still reachable through the binds
 * after the old root is detached). */
static int build_image_etc(int root, int stage)
{
  if (ensure_dir(root, "etc", 0755) < 0)
    return -1;
  int etc = openat(root, "etc", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0)
    return -1;
  int r = sbx_iso_write_etc(stage, true, NULL);
  for (size_t i = 0; i < ETC_OVER_IMAGE && r == 0; i++) {
    const char *name = etc_files[i].name;
    r = -1;
    if (image_etc_target(etc, name) < 0)
      break;
    int src = open_target(stage, name);
    if (src < 0)
      break;
    char sp[32];
    fd_path(src, sp);
    r = mount_at(etc, name, sp, NULL, MS_BIND, NULL);
    int e = errno;
    close(src);
    errno = e;
    if (r == 0)
      r = set_attr(etc, name, RO_ATTRS, false);
  }
  int e = errno;
  close(etc);
  errno = e;
  return r;
}

/* The mounts both kinds of root share: /proc, /dev, /tmp and /work. */
static int build_common(int root, const struct sbx_iso_plan *p, enum sbx_iso_step *step)
{
  *step = SBX_STEP_MOUNT_PROC;
  if (build_proc(root) < 0)
    return -1;
  *step = SBX_STEP_MOUNT_DEV;
  if (build_dev(root) < 0)
    return -1;
  *step = SBX_STEP_MOUNT_TMP;
  if (build_tmp(root, p) < 0)
    return -1;
  *step = SBX_STEP_PIVOT;
  return fchdir(root);
}

/* The host pack: a fresh tmpfs root with the host's /usr and a synthetic
 * /etc. */
static int build_host_root(const struct sbx_iso_plan *p, int root, enum sbx_iso_step *step)
{
  *step = SBX_STEP_MOUNT_USR;
  if (build_usr(root, p) < 0)
    return -1;
  *step = SBX_STEP_MOUNT_ETC;
  if (build_etc(root, p) < 0)
    return -1;
  return build_common(root, p, step);
}

/* An image: the overlay (image_fd, detached) is moved onto stage/root, the
 * new root; stage itself (the tmpfs over /tmp) keeps the generated /etc
 * files.  move_mount takes both ends as fds: no path is resolved. */
static int build_image_root(const struct sbx_iso_plan *p, int stage, int image_fd,
                            enum sbx_iso_step *step)
{
  *step = SBX_STEP_MOUNT_IMAGE;
  if (mkdirat(stage, "root", 0755) < 0)
    return -1;
  int t = open_target(stage, "root");
  if (t < 0)
    return -1;
  long mv = syscall(SYS_move_mount, image_fd, "", t, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
  int e = errno;
  close(t);
  if (mv < 0) {
    errno = e;
    return -1;
  }
  int root = openat(stage, "root", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return -1;
  *step = SBX_STEP_MOUNT_ETC;
  int r = build_image_etc(root, stage) < 0 ? -1 : build_common(root, p, step);
  e = errno;
  close(root);
  errno = e;
  return r;
}

/* The new root is mounted over the host's /tmp of this (private) mount
 * namespace: a daemon-controlled directory that exists on every host.
 * Leaves the process cwd at the new root for sbx_mount_pivot(). */
int sbx_mount_build_root(const struct sbx_iso_plan *p, int image_fd, enum sbx_iso_step *step)
{
  *step = SBX_STEP_MOUNT_PRIVATE;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return -1;
  *step = SBX_STEP_MOUNT_ROOT;
  umask(022);
  if (sbx_fault(SBX_FAULT_MOUNT) ||
      mount("sbx-root", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p->root_opts) < 0)
    return -1;
  int root = open("/tmp", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return -1;
  int r =
      image_fd >= 0 ? build_image_root(p, root, image_fd, step) : build_host_root(p, root, step);
  int e = errno;
  close(root);
  if (image_fd >= 0)
    close(image_fd);
  errno = e;
  return r;
}

/* pivot_root(".", ".") stacks the old root under the new one; detaching it
 * leaves no path back to the host tree (a chroot could be escaped). */
int sbx_mount_pivot(enum sbx_iso_step *step)
{
  *step = SBX_STEP_PIVOT;
  if (syscall(SYS_pivot_root, ".", ".") < 0)
    return -1;
  if (umount2(".", MNT_DETACH) < 0)
    return -1;
  return chdir("/");
}

/* Only /tmp, /work and /dev/shm stay writable. */
int sbx_mount_root_readonly(void) { return set_attr(AT_FDCWD, "/", RO_ATTRS, false); }
