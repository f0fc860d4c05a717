/* shift.c — shifted copies of image layers, for hosts where the layers
 * cannot be idmapped (overlayfs before Linux 5.19 refuses idmapped lower
 * layers; some filesystems cannot be idmapped at all; docs/images.md).
 *
 * A sandbox's user namespace maps its ids 0..65535 to host ids base..
 * base+65535 (userns.c), so an image file owned by image uid U must be
 * owned by host uid base+U for the sandbox to see U.  The copy of layer
 * L for a range is L@<base>/tree, beside L: every uid/gid shifted by
 * base (ids past the range become the host's 65534, unmapped in every
 * sandbox, as an idmapped mount shows them), modes (setuid/setgid after
 * the chown that clears them), xattrs (trusted.overlay.opaque as is,
 * security.capability's root id and POSIX ACL ids shifted too), symlinks
 * verbatim, whiteouts and other nodes by mknod, hard links kept as hard
 * links within the layer, times last.  It is built once per layer and
 * range, atomically (.L@base.tmp, then rename, under an flock on
 * .L@base.lock so two sandboxes never build it twice) and reused by every
 * later sandbox on that range; the image GC removes it with its layer.
 *
 * The layer is image content, hostile until proven otherwise: the walk
 * goes by fds only (openat O_NOFOLLOW, fstatat AT_SYMLINK_NOFOLLOW, no
 * path is ever resolved through an entry of the layer), never leaves the
 * layer's filesystem, only reads the source and only writes under the
 * fresh temp dir, whose entries are all of its own making. */
#include "isolation/iso.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/util.h"

#define SHIFT_MAX_DEPTH 256
#define XATTR_LIST_MAX_BYTES 65536
#define XATTR_VALUE_MAX_BYTES 65536
#define NOBODY 65534u
#define SBX_SHIFT_TREE "tree"

struct first_link {
  ino_t ino;
  char *rel; /* where its first name was made, relative to the copy's root */
};

struct shift {
  uid_t base;
  dev_t dev;
  int dst_root;
  char rel[PATH_MAX]; /* the entry being copied, relative to the root */
  struct first_link *links;
  size_t nlinks, cap;
  struct sbx_error *err;
};

static uint32_t shift_id(const struct shift *s, uint32_t id)
{
  return id < SBX_ISO_UID_RANGE ? s->base + id : NOBODY;
}

static int fail(struct shift *s, int e, const char *what)
{
  return sbx_err_sys(s->err, e, "shifting image layer: %s '%s'", what, s->rel);
}

/* security.capability: a v2 value means "root of the initial namespace",
 * which an idmapped mount presents as the sandbox's root; v3 carries that
 * root's id.  Either way the copy says base + root id (v3). */
static ssize_t shift_caps(const struct shift *s, char *v, ssize_t n)
{
  struct {
    uint32_t magic;
    uint32_t data[4];
    uint32_t rootid;
  } c = {0};
  if (n != 20 && n != 24)
    return -1;
  memcpy(&c, v, (size_t)n);
  uint32_t root = n == 24 ? c.rootid : 0;
  if (root >= SBX_ISO_UID_RANGE)
    return -1; /* privilege for an id outside the sandbox: dropped */
  c.magic = (c.magic & ~0xff000000u) | 0x03000000u; /* VFS_CAP_REVISION_3 */
  c.rootid = s->base + root;
  memcpy(v, &c, sizeof c);
  return (ssize_t)sizeof c;
}

/* system.posix_acl_*: a 4-byte header, then 8-byte entries whose id
 * means something for ACL_USER (2) and ACL_GROUP (8) only. */
static void shift_acl(const struct shift *s, char *v, ssize_t n)
{
  for (ssize_t off = 4; off + 8 <= n; off += 8) {
    uint16_t tag;
    uint32_t id;
    memcpy(&tag, v + off, 2);
    memcpy(&id, v + off + 4, 4);
    if (tag == 2 || tag == 8) {
      id = shift_id(s, id);
      memcpy(v + off + 4, &id, 4);
    }
  }
}

/* xattr calls on an fd (dirs, files) or, for nodes that cannot be opened
 * without side effects, on "/proc/self/fd/<dir>/<name>": the dir is ours
 * or the layer's, reached by fd, and the l* calls do not follow name. */
struct node {
  int fd;
  const char *path;
};

static ssize_t x_list(struct node n, char *buf, size_t len)
{
  return n.fd >= 0 ? flistxattr(n.fd, buf, len) : llistxattr(n.path, buf, len);
}

static ssize_t x_get(struct node n, const char *k, char *buf, size_t len)
{
  return n.fd >= 0 ? fgetxattr(n.fd, k, buf, len) : lgetxattr(n.path, k, buf, len);
}

static int x_set(struct node n, const char *k, const char *v, size_t len)
{
  return n.fd >= 0 ? fsetxattr(n.fd, k, v, len, 0) : lsetxattr(n.path, k, v, len, 0);
}

static int copy_xattrs(struct shift *s, struct node from, struct node to)
{
  _cleanup_free_ char *list = malloc(XATTR_LIST_MAX_BYTES);
  _cleanup_free_ char *val = malloc(XATTR_VALUE_MAX_BYTES);
  if (!list || !val)
    return fail(s, ENOMEM, "xattrs of");
  ssize_t n = x_list(from, list, XATTR_LIST_MAX_BYTES);
  if (n < 0)
    return errno == ENOTSUP ? 0 : fail(s, errno, "listing the xattrs of");
  for (char *k = list; k < list + n; k += strlen(k) + 1) {
    ssize_t vn = x_get(from, k, val, XATTR_VALUE_MAX_BYTES);
    if (vn < 0)
      return fail(s, errno, "reading an xattr of");
    if (!strcmp(k, "security.capability") && (vn = shift_caps(s, val, vn)) < 0)
      continue;
    if (!strncmp(k, "system.posix_acl_", 17))
      shift_acl(s, val, vn);
    if (x_set(to, k, val, (size_t)vn) < 0)
      return fail(s, errno, "setting an xattr on");
  }
  return 0;
}

/* Owner, then mode (chown clears setuid/setgid), then xattrs (chown drops
 * security.capability too), then times.  Not for symlinks (meta_link). */
static int meta(struct shift *s, const struct stat *st, struct node from, struct node to,
                int dirfd, const char *name)
{
  uid_t u = shift_id(s, st->st_uid);
  gid_t g = shift_id(s, st->st_gid);
  int r = to.fd >= 0 ? fchown(to.fd, u, g) : fchownat(dirfd, name, u, g, AT_SYMLINK_NOFOLLOW);
  if (r < 0)
    return fail(s, errno, "chown");
  r = to.fd >= 0 ? fchmod(to.fd, st->st_mode & 07777)
                 : fchmodat(dirfd, name, st->st_mode & 07777, 0);
  if (r < 0)
    return fail(s, errno, "chmod");
  if (copy_xattrs(s, from, to) < 0)
    return -1;
  struct timespec t[2] = {st->st_atim, st->st_mtim};
  r = to.fd >= 0 ? futimens(to.fd, t) : utimensat(dirfd, name, t, AT_SYMLINK_NOFOLLOW);
  return r < 0 ? fail(s, errno, "times of") : 0;
}

static int copy_data(struct shift *s, int in, int out)
{
  for (;;) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
    if (n == 0)
      return 0;
    if (n > 0)
      continue;
    if (errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL)
      return fail(s, errno, "copying");
    break;
  }
  char buf[65536];
  for (ssize_t n; (n = read(in, buf, sizeof buf)) != 0;) {
    if (n < 0 || write(out, buf, (size_t)n) != n)
      return fail(s, errno ? errno : EIO, "copying");
  }
  return 0;
}

/* A second name of an inode already copied: the same link in the copy. */
static int link_again(struct shift *s, const struct stat *st, int dfd, const char *name,
                      bool *done)
{
  *done = false;
  if (st->st_nlink < 2)
    return 0;
  for (size_t i = 0; i < s->nlinks; i++)
    if (s->links[i].ino == st->st_ino) {
      if (linkat(s->dst_root, s->links[i].rel, dfd, name, 0) < 0)
        return fail(s, errno, "hard link");
      *done = true;
      return 0;
    }
  if (sbx_array_grow(&s->links, &s->cap, s->nlinks + 1, sizeof *s->links,
                     SIZE_MAX / sizeof *s->links) < 0 ||
      !(s->links[s->nlinks].rel = strdup(s->rel)))
    return fail(s, ENOMEM, "hard link");
  s->links[s->nlinks++].ino = st->st_ino;
  return 0;
}

static int copy_file(struct shift *s, const struct stat *st, int sfd, int dfd, const char *name)
{
  bool linked;
  if (link_again(s, st, dfd, name, &linked) < 0 || linked)
    return linked ? 0 : -1;
  _cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  if (in < 0)
    return fail(s, errno, "opening");
  struct stat again;
  if (fstat(in, &again) < 0 || again.st_ino != st->st_ino || !S_ISREG(again.st_mode))
    return fail(s, ESTALE, "layer changed under"); /* the store never rewrites a layer */
  _cleanup_close_ int out =
      openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return fail(s, errno, "creating");
  if (copy_data(s, in, out) < 0)
    return -1;
  return meta(s, st, (struct node){in, NULL}, (struct node){out, NULL}, -1, NULL);
}

static int copy_symlink(struct shift *s, const struct stat *st, int sfd, int dfd,
                        const char *name)
{
  char target[PATH_MAX];
  ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);
  if (n < 0)
    return fail(s, errno, "reading the symlink");
  target[n] = 0;
  if (symlinkat(target, dfd, name) < 0)
    return fail(s, errno, "creating the symlink");
  if (fchownat(dfd, name, shift_id(s, st->st_uid), shift_id(s, st->st_gid),
               AT_SYMLINK_NOFOLLOW) < 0)
    return fail(s, errno, "chown");
  char from[64], to[64];
  snprintf(from, sizeof from, "/proc/self/fd/%d/", sfd);
  snprintf(to, sizeof to, "/proc/self/fd/%d/", dfd);
  _cleanup_free_ char *fp = NULL, *tp = NULL;
  if (asprintf(&fp, "%s%s", from, name) < 0 || asprintf(&tp, "%s%s", to, name) < 0)
    return fail(s, ENOMEM, "symlink");
  if (copy_xattrs(s, (struct node){-1, fp}, (struct node){-1, tp}) < 0)
    return -1;
  struct timespec t[2] = {st->st_atim, st->st_mtim};
  return utimensat(dfd, name, t, AT_SYMLINK_NOFOLLOW) < 0 ? fail(s, errno, "times of") : 0;
}

/* Whiteouts (0:0 char devices), FIFOs, sockets, device nodes: made again
 * as they are (the overlay is nodev, so a device node stays inert). */
static int copy_node(struct shift *s, const struct stat *st, int sfd, int dfd, const char *name)
{
  if (mknodat(dfd, name, st->st_mode & (S_IFMT | 0600), st->st_rdev) < 0)
    return fail(s, errno, "mknod");
  char fp[PATH_MAX + 64], tp[PATH_MAX + 64];
  snprintf(fp, sizeof fp, "/proc/self/fd/%d/%s", sfd, name);
  snprintf(tp, sizeof tp, "/proc/self/fd/%d/%s", dfd, name);
  return meta(s, st, (struct node){-1, fp}, (struct node){-1, tp}, dfd, name);
}

static int copy_dir(struct shift *s, int sfd, int dfd, unsigned depth);

static int copy_subdir(struct shift *s, const struct stat *st, int sfd, int dfd,
                       const char *name, unsigned depth)
{
  if (mkdirat(dfd, name, 0700) < 0)
    return fail(s, errno, "mkdir");
  _cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  _cleanup_close_ int out = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0 || out < 0)
    return fail(s, errno, "opening the directory");
  struct stat again;
  if (fstat(in, &again) < 0 || again.st_ino != st->st_ino || again.st_dev != s->dev)
    return fail(s, ESTALE, "layer changed under");
  if (copy_dir(s, in, out, depth + 1) < 0)
    return -1;
  return meta(s, st, (struct node){in, NULL}, (struct node){out, NULL}, -1, NULL);
}

static int copy_entry(struct shift *s, int sfd, int dfd, const char *name, unsigned depth)
{
  struct stat st;
  if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return fail(s, errno, "stat");
  if (st.st_dev != s->dev)
    return fail(s, EXDEV, "another filesystem at"); /* nothing is mounted in a layer */
  switch (st.st_mode & S_IFMT) {
  case S_IFDIR:
    return copy_subdir(s, &st, sfd, dfd, name, depth);
  case S_IFREG:
    return copy_file(s, &st, sfd, dfd, name);
  case S_IFLNK:
    return copy_symlink(s, &st, sfd, dfd, name);
  default:
    return copy_node(s, &st, sfd, dfd, name);
  }
}

static int copy_dir(struct shift *s, int sfd, int dfd, unsigned depth)
{
  if (depth > SHIFT_MAX_DEPTH)
    return fail(s, ELOOP, "too deep at");
  int dup_fd = fcntl(sfd, F_DUPFD_CLOEXEC, 0);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0)
      close(dup_fd);
    return fail(s, errno, "reading the directory");
  }
  size_t len = strlen(s->rel);
  int r = 0;
  for (struct dirent *e; r == 0 && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int n = snprintf(s->rel + len, sizeof s->rel - len, "%s%s", len ? "/" : "", e->d_name);
    if (n < 0 || (size_t)n >= sizeof s->rel - len) {
      s->rel[len] = 0;
      r = fail(s, ENAMETOOLONG, "path too long under");
      break;
    }
    r = copy_entry(s, sfd, dfd, e->d_name, depth);
    s->rel[len] = 0;
  }
  closedir(d);
  return r;
}

/* The copy into tmp/tree (tmp: a fresh dir, root's, 0700, so that no
 * host process of a sandbox's range, which owns files in the tree, can
 * reach them to change what the next sandbox on that range gets; the
 * overlay's mounter, root, reaches them): the layer's tree, then its
 * root's own owner, mode and xattrs. */
static int shift_tree(const char *layer, const char *tmp, uid_t base, struct sbx_error *err)
{
  _cleanup_close_ int src = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0)
    return sbx_err_sys(err, errno, "shifting image layer %s", layer);
  if (mkdir(tmp, 0700) < 0)
    return sbx_err_sys(err, errno, "shifting image layer: %s", tmp);
  _cleanup_close_ int wrap = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (wrap < 0 || mkdirat(wrap, SBX_SHIFT_TREE, 0700) < 0)
    return sbx_err_sys(err, errno, "shifting image layer: %s", tmp);
  _cleanup_close_ int dst =
      openat(wrap, SBX_SHIFT_TREE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (dst < 0 || fstat(src, &st) < 0)
    return sbx_err_sys(err, errno, "shifting image layer: %s", tmp);
  struct shift s = {.base = base, .dev = st.st_dev, .dst_root = dst, .err = err};
  int r = copy_dir(&s, src, dst, 0);
  if (r == 0)
    r = meta(&s, &st, (struct node){src, NULL}, (struct node){dst, NULL}, -1, NULL);
  for (size_t i = 0; i < s.nlinks; i++)
    free(s.links[i].rel);
  free(s.links);
  return r;
}

static bool is_dir(const char *p)
{
  struct stat st;
  return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "<dir>/.<name>@<base><suffix>" beside the layer, for the temp and lock. */
static void beside(const char *copy, const char *suffix, char *buf, size_t len)
{
  const char *slash = strrchr(copy, '/');
  snprintf(buf, len, "%.*s.%s%s", (int)(slash - copy + 1), copy, slash + 1, suffix);
}

int sbx_shift_layer(const char *layer, uid_t base, char *out, size_t len, struct sbx_error *err)
{
  char copy[PATH_MAX];
  if (layer[0] != '/' ||
      (size_t)snprintf(copy, sizeof copy, "%s@%u", layer, (unsigned)base) >= sizeof copy ||
      (size_t)snprintf(out, len, "%s/" SBX_SHIFT_TREE, copy) >= len)
    return sbx_err_set(err, SBX_E_INTERNAL, ENAMETOOLONG, "image layer path %s", layer);
  if (is_dir(copy)) /* complete: a copy gets its name only by rename */
    return 0;
  char lock[PATH_MAX], tmp[PATH_MAX];
  beside(copy, ".lock", lock, sizeof lock);
  beside(copy, ".tmp", tmp, sizeof tmp);
  _cleanup_close_ int lk = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lk < 0 || flock(lk, LOCK_EX) < 0)
    return sbx_err_sys(err, errno, "shifting image layer: lock %s", lock);
  if (is_dir(copy)) /* another builder finished while we waited */
    return 0;
  if (sbx_rm_rf(tmp) < 0) /* an interrupted build */
    return sbx_err_sys(err, errno, "shifting image layer: removing %s", tmp);
  int r = shift_tree(layer, tmp, base, err);
  if (r == 0 && rename(tmp, copy) < 0)
    r = sbx_err_sys(err, errno, "shifting image layer: rename to %s", copy);
  if (r < 0)
    sbx_rm_rf(tmp);
  return r;
}
