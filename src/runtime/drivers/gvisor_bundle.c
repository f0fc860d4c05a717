/* gvisor_bundle.c — the OCI bundle of one gvisor sandbox.
 *
 * Host pack: <dir>/rootfs is a skeleton the host owns: empty mount points,
 * the /bin /lib* /sbin links as on the host (merged /usr) and a synthetic
 * /etc with no host secrets — the same image the container driver builds
 * in isolation/mount.c ("host" pack).  runsc mounts it read-only and adds,
 * through its gofer, the read-only binds (/usr, CA certs, ld.so.cache,
 * alternatives, sbx-init) and the tmpfs /tmp and /work sized by the disk
 * limit.
 *
 * Image (issue 7): <dir>/rootfs is an overlayfs the daemon mounts on the
 * host — the image's layers, each a detached read-only clone of the
 * store's dir, as its lowers and a detached tmpfs of `disk` bytes as its
 * upper — and runsc serves it read-write through its gofer.  Nothing is
 * copied or chowned: the gofer (host root) serves the files with their
 * on-disk ids, which is what gVisor's kernel shows, so image root files
 * are root's inside as in the image.  The mounter is real root, so
 * overlayfs honours the store's whiteouts (0:0 char devs) and opaque dirs
 * (trusted.overlay.opaque); copy-ups and new files land in the upper only.
 * The mount points runsc needs (/tmp, /work, /proc, /dev, /sys, /.sbx/
 * sbx-init, /etc's hosts, resolv.conf and hostname) are made in the
 * merged tree, i.e. in the upper, never following a symlink of the image.
 * The overlay is the only mount on the host; unmounting it (detach) drops
 * the upper and the layer clones with it (sbx_gv_bundle_unmount).
 *
 * Egress allowlist: the network namespace is one the driver made and the
 * net module linked (linux.namespaces path), and /etc/resolv.conf names
 * the net module's DNS address instead of nothing.
 *
 * <dir>/config.json: uid/gid 1000 (or the image's User), no capabilities
 * at all, no_new_privs, empty env, cwd /work, sbx-init as the container's
 * process with the daemon channel on its stdin (--chan-fd 0).
 * cgroupsPath: the sandbox's own cgroup (sbx_gv_cgroups_path), which runsc
 * finds made and leaves alone; it runs in it (see gvisor_proc.c). */
#include "runtime/drivers/gvisor_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/util.h"

/* resolv.conf when the net module gave none. */
static const char etc_resolv[] = "# no network in this sandbox\n";

static int put_file(int dirfd, const char *rel, const char *content)
{
  _cleanup_close_ int fd =
      openat(dirfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  size_t n = content ? strlen(content) : 0;
  return sbx_write_all(fd, content ? content : "", n) == (ssize_t)n ? 0 : -1;
}

static json_t *mount_obj(const char *dst, const char *type, const char *src, json_t *opts)
{
  return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src,
                   "options", opts);
}

static json_t *bind_ro(const char *dst, const char *src)
{
  return mount_obj(dst, "bind", src, json_pack("[s,s,s,s]", "rbind", "ro", "nosuid", "nodev"));
}

static json_t *tmpfs(const char *dst, const char *mode_owner, uint64_t disk)
{
  char size[48];
  snprintf(size, sizeof size, "size=%llu", (unsigned long long)disk);
  json_t *o = json_pack("[s,s,s]", "nosuid", "nodev", size);
  char buf[96];
  snprintf(buf, sizeof buf, "%s", mode_owner);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    json_array_append_new(o, json_string(t));
  return mount_obj(dst, "tmpfs", "tmpfs", o);
}

static bool is_dir(const char *p)
{
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Top-level dirs, links as on the host, /etc.  Adds the binds it needs. */
static int build_rootfs(int root, json_t *mounts, const char *resolv)
{
  static const char *const dirs[] = {"usr", "etc", "tmp", "work", "proc", "dev", "sys", ".sbx"};
  static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdirat(root, dirs[i], 0755) < 0)
      return -1;
  json_array_append_new(mounts, bind_ro("/usr", "/usr"));
  for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
    char host[32], target[256];
    snprintf(host, sizeof host, "/%s", tops[i]);
    struct stat st;
    if (lstat(host, &st) < 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(host, target, sizeof target - 1);
      if (n <= 0)
        continue;
      target[n] = '\0';
      if (symlinkat(target, root, tops[i]) < 0)
        return -1;
    } else if (S_ISDIR(st.st_mode)) { /* non-merged /usr host */
      if (mkdirat(root, tops[i], 0755) < 0)
        return -1;
      json_array_append_new(mounts, bind_ro(host, host));
    }
  }
  _cleanup_close_ int etc = openat(root, "etc", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0 || sbx_iso_write_etc(etc, false, resolv) < 0)
    return -1;
  if (is_file("/etc/ld.so.cache")) {
    if (put_file(etc, "ld.so.cache", NULL) < 0)
      return -1;
    json_array_append_new(mounts, bind_ro("/etc/ld.so.cache", "/etc/ld.so.cache"));
  }
  if (is_dir("/etc/ssl/certs")) {
    if (mkdirat(etc, "ssl", 0755) < 0 || mkdirat(etc, "ssl/certs", 0755) < 0)
      return -1;
    json_array_append_new(mounts, bind_ro("/etc/ssl/certs", "/etc/ssl/certs"));
  }
  if (is_dir("/etc/alternatives")) {
    if (mkdirat(etc, "alternatives", 0755) < 0)
      return -1;
    json_array_append_new(mounts, bind_ro("/etc/alternatives", "/etc/alternatives"));
  }
  return put_file(root, ".sbx/sbx-init", NULL);
}

/* ---- image roots (issue 7) ------------------------------------------- */

/* Builds the overlay (isolation/overlay.c, the container driver's builder:
 * read-only nosuid,nodev clones of the layers, an upper tmpfs of disk
 * bytes; no idmapping — gVisor's gofer serves the host's ids as they are)
 * and attaches it at rootfs (an empty dir of ours).  "sbxgv-": this mount
 * lives in the host's mount table (the gofer serves it), unlike the
 * container driver's "sbx-*" mounts, which never leave their sandbox's
 * namespace (and the isolation tests check that). */
static int mount_image(const char *rootfs, const struct sbx_gv_image *img, uint64_t disk,
                       struct sbx_error *err)
{
  uint64_t inodes = disk / 16384; /* as the container driver's upper */
  inodes = inodes < 1024 ? 1024 : inodes > 1048576 ? 1048576 : inodes;
  struct sbx_overlay_spec o = {.layers = img->layers,
                               .nlayers = img->nlayers,
                               .userns_fd = -1,
                               .upper_size = disk,
                               .upper_inodes = inodes,
                               .source = "sbxgv-image",
                               .upper_source = "sbxgv-upper"};
  int mnt = sbx_overlay_mount(&o, err);
  if (mnt < 0)
    return -1;
  int r = 0;
  if (syscall(SYS_move_mount, mnt, "", AT_FDCWD, rootfs, MOVE_MOUNT_F_EMPTY_PATH) < 0)
    r = sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno, "image: overlay at %s: %s", rootfs,
                    strerror(errno));
  close(mnt);
  return r;
}

/* dir/name as a real directory of the merged tree (made in the upper when
 * the image lacks it); an image's symlink or file there fails closed. */
static int image_dir(int dir, const char *name, struct sbx_error *err)
{
  if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST)
    return sbx_err_sys(err, errno, "image: mkdir /%s", name);
  int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_set(err, SBX_E_INVALID, errno, "image: %s cannot be a mount point (%s)", name,
                       errno == ELOOP || errno == ENOTDIR ? "not a directory" : strerror(errno));
  return fd;
}

/* dir/name as a regular file to bind over.  A symlink of the image there
 * (systemd's resolv.conf) is removed — a whiteout in the upper — and
 * replaced by an empty file; anything else but a file fails closed. */
static int image_file(int dir, const char *name, struct sbx_error *err)
{
  struct stat st;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISREG(st.st_mode))
      return 0;
    if (!S_ISLNK(st.st_mode))
      return sbx_err_set(err, SBX_E_INVALID, EISDIR, "image: %s is not a file", name);
    if (unlinkat(dir, name, 0) < 0)
      return sbx_err_sys(err, errno, "image: replacing the symlink %s", name);
  } else if (errno != ENOENT) {
    return sbx_err_sys(err, errno, "image: %s", name);
  }
  if (put_file(dir, name, NULL) < 0)
    return sbx_err_sys(err, errno, "image: creating %s", name);
  return 0;
}

/* The mount points runsc binds over, in the merged tree. */
static int image_points(int root, struct sbx_error *err)
{
  static const char *const dirs[] = {"tmp", "work", "proc", "dev", "sys"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    int fd = image_dir(root, dirs[i], err);
    if (fd < 0)
      return -1;
    close(fd);
  }
  _cleanup_close_ int sbx = image_dir(root, ".sbx", err);
  if (sbx < 0 || image_file(sbx, "sbx-init", err) < 0)
    return -1;
  _cleanup_close_ int etc = image_dir(root, "etc", err);
  if (etc < 0 || image_file(etc, "hosts", err) < 0 || image_file(etc, "resolv.conf", err) < 0 ||
      image_file(etc, "hostname", err) < 0)
    return -1;
  return 0;
}

/* The image as rootfs, and the sandbox's own /etc files (in the bundle,
 * bound read-only over the image's). */
static int build_image_rootfs(const char *dir, const char *rootfs,
                              const struct sbx_gv_image *img, uint64_t disk, json_t *mounts,
                              const char *resolv, struct sbx_error *err)
{
  _cleanup_close_ int bd = open(dir, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (bd < 0 || mkdirat(bd, "etc", 0755) < 0)
    return sbx_err_sys(err, errno, "gvisor: %s/etc", dir);
  _cleanup_close_ int etc = openat(bd, "etc", O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (etc < 0 || sbx_iso_write_etc(etc, true, resolv) < 0)
    return sbx_err_sys(err, errno, "gvisor: writing %s/etc", dir);
  if (mount_image(rootfs, img, disk, err) < 0)
    return -1;
  _cleanup_close_ int root = open(rootfs, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0)
    return sbx_err_sys(err, errno, "image: opening %s", rootfs);
  if (image_points(root, err) < 0)
    return -1;
  static const char *const files[] = {"hosts", "resolv.conf", "hostname"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char src[4200], dst[64];
    snprintf(src, sizeof src, "%s/etc/%s", dir, files[i]);
    snprintf(dst, sizeof dst, "/etc/%s", files[i]);
    json_array_append_new(mounts, bind_ro(dst, src));
  }
  return 0;
}

int sbx_gv_bundle_unmount(const char *dir)
{
  char p[4200];
  snprintf(p, sizeof p, "%s/rootfs", dir);
  /* One overlay normally; a few stacked ones would be someone's doing,
   * still ours to remove.  EINVAL: not a mount point (any more). */
  for (int i = 0; i < 8; i++)
    if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
      return errno == EINVAL || errno == ENOENT ? 0 : -1;
  errno = EBUSY;
  return -1;
}

static json_t *process_obj(uint64_t pids, uint32_t uid, uint32_t gid)
{
  uint64_t nproc = pids ? pids : 16384;
  json_t *none = json_array();
  json_t *caps = json_pack("{s:O, s:O, s:O, s:O, s:O}", "bounding", none, "effective", none,
                           "inheritable", none, "permitted", none, "ambient", none);
  json_decref(none);
  return json_pack(
      "{s:{s:i, s:i}, s:[s,s,s,s,s], s:[], s:s, s:o, s:b, s:[{s:s, s:i, s:i}, {s:s, s:I, s:I}],"
      " s:b}",
      "user", "uid", (int)uid, "gid", (int)gid, "args", "/.sbx/sbx-init", "--root", "/",
      "--chan-fd", "0", "env", "cwd", "/work", "capabilities", caps, "noNewPrivileges", 1,
      "rlimits", "type", "RLIMIT_NOFILE", "hard", 4096, "soft", 4096, "type", "RLIMIT_NPROC",
      "hard", (json_int_t)nproc, "soft", (json_int_t)nproc, "terminal", 0);
}

/* cgroupsPath (sbx_gv_cgroups_path): the sandbox's own cgroup, which the
 * driver made and put runsc in (gvisor_proc.c); runsc finds it existing
 * and uses it as it is ("pre-created", neither changed nor removed). */

/* runsc resolves cgroupsPath differently per version.  v1: relative to
 * each of its own cgroups, so "." is the sandbox's cgroup in every
 * hierarchy (their parents differ per controller, so no one absolute
 * path would do).  v2: a relative path is joined to the *parent* of
 * runsc's own cgroup (runsc assumes its own holds tasks), which is the
 * daemon's gvisor parent with controllers enabled, and the no-internal-
 * processes rule refuses the pid there (EBUSY).  So on v2 the path is
 * absolute: the leaf below /sys/fs/cgroup, which runsc assumes is the
 * cgroup2 mount.  runsc then enables its controllers in each ancestor's
 * subtree_control (not the leaf's) and finds the leaf existing. */
int sbx_gv_cgroups_path(const struct sbx_cgroup *cg, char *out, size_t len,
                        struct sbx_error *err)
{
  static const char mnt[] = "/sys/fs/cgroup/";
  const struct sbx_cg_host *h = cg->host;
  if (h->version != SBX_CG_V2) {
    snprintf(out, len, ".");
    return 0;
  }
  const char *parent = h->ctrl[0].parent;
  if (h->fake || strncmp(parent, mnt, sizeof mnt - 1) != 0)
    return sbx_err_set(
        err, SBX_E_RUNTIME_UNAVAILABLE, ENOTSUP,
        "gvisor: runsc needs the cgroup2 mount at /sys/fs/cgroup; sandbox cgroups are "
        "under %s",
        parent);
  int n = snprintf(out, len, "/%s/%s", parent + sizeof mnt - 1, cg->leaf);
  if (n < 0 || (size_t)n >= len)
    return sbx_err_set(err, SBX_E_INTERNAL, ENAMETOOLONG, "gvisor: cgroup path %s/%s too long",
                       parent, cg->leaf);
  return 0;
}

/* netns NULL: runsc makes a network namespace of its own (network none,
 * only gVisor's loopback); else the one at that path, whose interfaces
 * runsc --network=sandbox hands to gVisor's netstack. */
static json_t *config_obj(json_t *mounts, uint64_t pids, bool readonly, uint32_t uid,
                          uint32_t gid, const char *netns, const char *cgpath)
{
  json_t *net = netns ? json_pack("{s:s, s:s}", "type", "network", "path", netns)
                      : json_pack("{s:s}", "type", "network");
  return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:O, s:{s:s, s:[{s:s},o,{s:s},{s:s},{s:s}]}}",
                   "ociVersion", "1.0.0", "process", process_obj(pids, uid, gid), "root", "path",
                   "rootfs", "readonly", readonly, "hostname", "sandbox", "mounts", mounts,
                   "linux", "cgroupsPath", cgpath, "namespaces", "type", "pid", net, "type",
                   "ipc", "type", "uts", "type", "mount");
}

static int write_bundle(const char *dir, const char *init_path, uint64_t disk_bytes,
                        uint64_t pids, const struct sbx_gv_image *img, const char *netns,
                        const char *resolv, const char *cgpath, struct sbx_error *err)
{
  if (!resolv)
    resolv = etc_resolv;
  char p[4200];
  snprintf(p, sizeof p, "%s/rootfs", dir);
  if (mkdir(p, 0755) < 0)
    return sbx_err_sys(err, errno, "gvisor: mkdir %s", p);
  json_t *mounts =
      json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s,s,s,s]}]",
                "destination", "/proc", "type", "proc", "source", "proc", "destination", "/dev",
                "type", "tmpfs", "source", "tmpfs", "destination", "/sys", "type", "sysfs",
                "source", "sysfs", "options", "nosuid", "noexec", "nodev", "ro");
  if (!mounts)
    return sbx_err_sys(err, ENOMEM, "gvisor: config");
  /* The image's User (both ids 1..65535, the core checked) or ours. */
  uint32_t uid = SBX_GV_UID, gid = SBX_GV_GID;
  if (img && img->run_uid && img->run_gid && img->run_uid <= 65535 && img->run_gid <= 65535) {
    uid = img->run_uid;
    gid = img->run_gid;
  }
  if (img) {
    if (build_image_rootfs(dir, p, img, disk_bytes, mounts, resolv, err) < 0) {
      json_decref(mounts);
      return -1;
    }
  } else {
    _cleanup_close_ int root = open(p, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0 || build_rootfs(root, mounts, resolv) < 0) {
      json_decref(mounts);
      return sbx_err_sys(err, errno, "gvisor: building rootfs in %s", p);
    }
  }
  char work_opts[96];
  snprintf(work_opts, sizeof work_opts, "mode=0755,uid=%u,gid=%u", uid, gid);
  json_array_append_new(mounts, bind_ro("/.sbx/sbx-init", init_path));
  json_array_append_new(mounts, tmpfs("/tmp", "mode=1777", disk_bytes));
  json_array_append_new(mounts, tmpfs("/work", work_opts, disk_bytes));
  /* The image's root is writable (copy-on-write into the upper); the host
   * pack's skeleton is read-only. */
  json_t *cfg = config_obj(mounts, pids, img == NULL, uid, gid, netns, cgpath);
  json_decref(mounts);
  snprintf(p, sizeof p, "%s/config.json", dir);
  if (!cfg || json_dump_file(cfg, p, JSON_COMPACT) < 0) {
    json_decref(cfg);
    return sbx_err_sys(err, errno ? errno : EIO, "gvisor: writing %s", p);
  }
  json_decref(cfg);
  return 0;
}

int sbx_gv_bundle_write(const char *dir, const char *init_path, uint64_t disk_bytes,
                        uint64_t pids, const struct sbx_gv_image *img, const char *netns,
                        const char *resolv, const char *cgpath, struct sbx_error *err)
{
  if (mkdir(dir, 0700) < 0)
    return sbx_err_sys(err, errno, "gvisor: mkdir %s", dir);
  if (write_bundle(dir, init_path, disk_bytes, pids, img, netns, resolv, cgpath, err) == 0)
    return 0;
  /* EEXIST tells the caller the dir is someone else's (leave it alone);
   * this one is ours, with maybe an overlay in it: it must be cleaned. */
  if (err->errnum == EEXIST)
    err->errnum = EIO;
  return -1;
}
