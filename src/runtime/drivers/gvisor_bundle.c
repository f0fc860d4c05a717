/* gvisor_bundle.c — the OCI bundle of one gvisor sandbox.
 *
 * <dir>/rootfs is a skeleton the host owns: empty mount points, the
 * /bin /lib* /sbin links as on the host (merged /usr) and a synthetic /etc
 * with no host secrets — the same image the container driver builds in
 * isolation/mount.c ("host" pack).  runsc mounts it read-only and adds,
 * through its gofer, the read-only binds (/usr, CA certs, ld.so.cache,
 * alternatives, sbx-init) and the tmpfs /tmp and /work sized by the disk
 * limit.  <dir>/config.json: uid/gid 1000, no capabilities at all,
 * no_new_privs, empty env, cwd /work, sbx-init as the container's process
 * with the daemon channel on its stdin (--chan-fd 0).  No cgroupsPath:
 * runsc then leaves cgroups alone and runs in the one the driver put it
 * in (see gvisor_proc.c). */
#include "runtime/drivers/gvisor_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/util.h"

static const char etc_passwd[] =
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\ntty:x:5:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] =
    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";
static const char etc_resolv[] = "# no network in this sandbox\n";
static const char etc_nsswitch[] =
    "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
    "networks: files\nprotocols: files\nservices: files\n";

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
static int build_rootfs(int root, json_t *mounts)
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
  if (etc < 0 || put_file(etc, "passwd", etc_passwd) < 0 || put_file(etc, "group", etc_group) < 0 ||
      put_file(etc, "hosts", etc_hosts) < 0 || put_file(etc, "resolv.conf", etc_resolv) < 0 ||
      put_file(etc, "nsswitch.conf", etc_nsswitch) < 0 || put_file(etc, "hostname", "sandbox\n") < 0)
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

static json_t *process_obj(uint64_t pids)
{
  uint64_t nproc = pids ? pids : 16384;
  json_t *none = json_array();
  json_t *caps = json_pack("{s:O, s:O, s:O, s:O, s:O}", "bounding", none, "effective", none,
                           "inheritable", none, "permitted", none, "ambient", none);
  json_decref(none);
  return json_pack(
      "{s:{s:i, s:i}, s:[s,s,s,s,s], s:[], s:s, s:o, s:b, s:[{s:s, s:i, s:i}, {s:s, s:I, s:I}],"
      " s:b}", "user",
      "uid", SBX_GV_UID, "gid", SBX_GV_GID, "args", "/.sbx/sbx-init", "--root", "/",
      "--chan-fd", "0", "env", "cwd", "/work", "capabilities", caps, "noNewPrivileges", 1,
      "rlimits", "type", "RLIMIT_NOFILE", "hard", 4096, "soft", 4096, "type", "RLIMIT_NPROC",
      "hard", (json_int_t)nproc, "soft", (json_int_t)nproc, "terminal", 0);
}

/* Relative: runsc joins it to its own cgroups, which are the sandbox's
 * (gvisor_proc.c moves runsc there before exec), finds them existing and
 * uses them as they are — "pre-created", neither changed nor removed by
 * runsc.  Left empty, runsc would make /<id> at each controller's root,
 * outside our limits. */
#define CGROUPS_PATH "."

static json_t *config_obj(json_t *mounts, uint64_t pids)
{
  return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:O, s:{s:s, s:[{s:s},{s:s},{s:s},{s:s},{s:s}]}}",
                   "ociVersion", "1.0.0", "process", process_obj(pids), "root", "path", "rootfs",
                   "readonly", 1, "hostname", "sandbox", "mounts", mounts, "linux", "cgroupsPath",
                   CGROUPS_PATH, "namespaces",
                   "type", "pid", "type", "network", "type", "ipc", "type", "uts", "type",
                   "mount");
}

int sbx_gv_bundle_write(const char *dir, const char *init_path, uint64_t disk_bytes,
                        uint64_t pids, struct sbx_error *err)
{
  char p[4200];
  snprintf(p, sizeof p, "%s/rootfs", dir);
  if (mkdir(dir, 0700) < 0 || mkdir(p, 0755) < 0)
    return sbx_err_sys(err, errno, "gvisor: mkdir %s", p);
  _cleanup_close_ int root = open(p, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *mounts = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s,s,s,s]}]",
                             "destination", "/proc", "type", "proc", "source", "proc",
                             "destination", "/dev", "type", "tmpfs", "source", "tmpfs",
                             "destination", "/sys", "type", "sysfs", "source", "sysfs", "options",
                             "nosuid", "noexec", "nodev", "ro");
  if (!mounts)
    return sbx_err_sys(err, ENOMEM, "gvisor: config");
  if (root < 0 || build_rootfs(root, mounts) < 0) {
    json_decref(mounts);
    return sbx_err_sys(err, errno, "gvisor: building rootfs in %s", p);
  }
  json_array_append_new(mounts, bind_ro("/.sbx/sbx-init", init_path));
  json_array_append_new(mounts, tmpfs("/tmp", "mode=1777", disk_bytes));
  json_array_append_new(mounts, tmpfs("/work", "mode=0755,uid=1000,gid=1000", disk_bytes));
  json_t *cfg = config_obj(mounts, pids);
  json_decref(mounts);
  snprintf(p, sizeof p, "%s/config.json", dir);
  if (!cfg || json_dump_file(cfg, p, JSON_COMPACT) < 0) {
    json_decref(cfg);
    return sbx_err_sys(err, errno ? errno : EIO, "gvisor: writing %s", p);
  }
  json_decref(cfg);
  return 0;
}
