/* unpack.c — turning a layer tar into a directory, safely.  The tar comes
 * from whoever built the image: hostile until proven otherwise.
 *
 * Each entry's name is normalised first ("./a//b" → "a/b"); an absolute
 * name or a ".." component refuses the whole layer (no builder writes them,
 * so they only ever mean an attack).  Regular files, directories,
 * symlinks and FIFOs are written by libarchive under the absolute layer
 * path with ARCHIVE_EXTRACT_SECURE_SYMLINKS | SECURE_NODOTDOT, so nothing
 * is written through a symlink an earlier entry planted (symlinks with
 * absolute or escaping targets are legal image content: they are created,
 * never followed).  Hard links, whiteouts and opaque markers are done here
 * with *at() calls on directories opened by openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS) from the layer root, so they cannot leave it either.
 * Device nodes are skipped (a sandbox gets its /dev from the runtime);
 * setuid/setgid bits are cleared (the overlay is mounted nosuid as well);
 * xattrs and ACLs from the tar are not restored (security.capability would
 * be a privilege); owners are kept numerically (never looked up in the
 * host's /etc/passwd).
 *
 * Whiteouts become overlayfs's own form so layers stack as lowerdirs with
 * no copy: ".wh.NAME" → a 0:0 character device NAME, ".wh..wh..opq" → the
 * directory gets trusted.overlay.opaque=y.  Both need root (CAP_MKNOD,
 * CAP_SYS_ADMIN for trusted.*), which the daemon has. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "image/image_int.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

struct unpacker {
  const char *dir; /* absolute, symlink-free */
  int root;        /* O_PATH fd of dir */
  bool layer;      /* image layer (whiteouts, owners) or a plain import archive */
  struct archive *disk;
  uint64_t bytes, entries;
};

/* "./a//b/" → "a/b"; "" for the root.  -1 for an absolute name or "..". */
static int norm_path(const char *in, char *out, size_t len)
{
  if (!in || in[0] == '/')
    return -1;
  size_t o = 0;
  const char *p = in;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return -1;
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o + n + 2 > len)
        return -1;
      if (o)
        out[o++] = '/';
      memcpy(out + o, p, n);
      o += n;
    }
    p = e ? e + 1 : p + n;
  }
  out[o] = '\0';
  return 0;
}

static int openat2_beneath(int dirfd, const char *name, int flags)
{
  struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
  return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof how);
}

/* Opens directory rel (normalised) below root without following any
 * symlink, creating missing components when create is set. */
static int open_dir(int root, const char *rel, bool create)
{
  int cur = openat2_beneath(root, ".", O_RDONLY | O_DIRECTORY);
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", rel);
  for (char *p = buf, *e; cur >= 0 && p && *p; p = e) {
    e = strchr(p, '/');
    if (e)
      *e++ = '\0';
    int next = openat2_beneath(cur, p, O_RDONLY | O_DIRECTORY);
    if (next < 0 && errno == ENOENT && create) {
      if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST) {
        int saved = errno;
        close(cur);
        errno = saved;
        return -1;
      }
      next = openat2_beneath(cur, p, O_RDONLY | O_DIRECTORY);
    }
    int saved = errno;
    close(cur);
    errno = saved;
    cur = next;
  }
  return cur;
}

/* Splits "a/b/c" into parent "a/b" and base "c". */
static void split(const char *rel, char *parent, size_t plen, const char **base)
{
  const char *s = strrchr(rel, '/');
  if (s) {
    snprintf(parent, plen, "%.*s", (int)(s - rel), rel);
    *base = s + 1;
  } else {
    parent[0] = '\0';
    *base = rel;
  }
}

static int hostile(struct sbx_error *err, const char *name, const char *why)
{
  return sbx_err_set(err, SBX_E_INVALID, 0, "hostile layer entry '%.200s' refused: %s", name,
                     why);
}

static void remove_existing(int pfd, const char *base)
{
  if (unlinkat(pfd, base, 0) < 0 && errno == EISDIR)
    unlinkat(pfd, base, AT_REMOVEDIR); /* only an empty directory goes */
}

static int do_whiteout(struct unpacker *u, const char *rel, struct sbx_error *err)
{
  char parent[PATH_MAX];
  const char *base;
  split(rel, parent, sizeof parent, &base);
  _cleanup_close_ int pfd = open_dir(u->root, parent, true);
  if (pfd < 0)
    return hostile(err, rel, "its directory is not a plain directory of the layer");
  if (!strcmp(base, WH_OPAQUE)) {
    if (fsetxattr(pfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
      return sbx_err_sys(err, errno, "opaque directory '%s'", parent);
    return 0;
  }
  const char *name = base + strlen(WH_PREFIX);
  if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
    return hostile(err, rel, "whiteout of nothing");
  remove_existing(pfd, name);
  if (mknodat(pfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
    return sbx_err_sys(err, errno, "whiteout '%s'", rel);
  return 0;
}

static int do_hardlink(struct unpacker *u, const char *rel, const char *target,
                       struct sbx_error *err)
{
  char trel[PATH_MAX], tparent[PATH_MAX], nparent[PATH_MAX];
  const char *tbase, *nbase;
  if (norm_path(target, trel, sizeof trel) < 0 || !trel[0])
    return hostile(err, rel, "hard link target outside the layer");
  split(trel, tparent, sizeof tparent, &tbase);
  split(rel, nparent, sizeof nparent, &nbase);
  _cleanup_close_ int tfd = open_dir(u->root, tparent, false);
  _cleanup_close_ int nfd = open_dir(u->root, nparent, true);
  struct stat st;
  if (tfd < 0 || nfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return hostile(err, rel, "hard link target not in the layer");
  if (S_ISDIR(st.st_mode))
    return hostile(err, rel, "hard link to a directory");
  remove_existing(nfd, nbase);
  if (linkat(tfd, tbase, nfd, nbase, 0) < 0)
    return sbx_err_sys(err, errno, "hard link '%s'", rel);
  return 0;
}

static int copy_data(struct archive *in, struct archive *out, struct sbx_error *err)
{
  const void *buf;
  size_t size;
  la_int64_t off;
  for (;;) {
    int r = archive_read_data_block(in, &buf, &size, &off);
    if (r == ARCHIVE_EOF)
      return 0;
    if (r < ARCHIVE_WARN)
      return sbx_err_set(err, SBX_E_INVALID, 0, "layer data: %s", archive_error_string(in));
    if (archive_write_data_block(out, buf, size, off) < ARCHIVE_WARN)
      return sbx_err_set(err, SBX_E_INTERNAL, 0, "write: %s", archive_error_string(out));
  }
}

/* The root entry ("./"): its mode and owner apply to the layer dir. */
static void apply_root(struct unpacker *u, struct archive_entry *e)
{
  _cleanup_close_ int fd = openat2_beneath(u->root, ".", O_RDONLY | O_DIRECTORY);
  if (fd < 0 || archive_entry_filetype(e) != AE_IFDIR)
    return;
  if (u->layer && fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0)
    sbx_debug(IMG_SUB, "chown layer root: %s", strerror(errno));
  fchmod(fd, archive_entry_perm(e) & 01777);
}

static int one_entry(struct unpacker *u, struct archive *in, struct archive_entry *e,
                     struct sbx_error *err)
{
  const char *name = archive_entry_pathname(e);
  char rel[PATH_MAX];
  if (norm_path(name, rel, sizeof rel - 1) < 0)
    return hostile(err, name ? name : "(null)", "absolute path or '..'");
  if (++u->entries > IMG_MAX_LAYER_ENTRIES)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "layer has more than %d entries",
                       IMG_MAX_LAYER_ENTRIES);
  if (archive_entry_size_is_set(e) && archive_entry_size(e) > 0)
    u->bytes += (uint64_t)archive_entry_size(e);
  if (u->bytes > IMG_MAX_LAYER_BYTES)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "layer unpacks to more than %llu bytes",
                       (unsigned long long)IMG_MAX_LAYER_BYTES);
  if (!rel[0]) {
    apply_root(u, e);
    return 0;
  }
  const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
  if (u->layer && !strncmp(base, WH_PREFIX, strlen(WH_PREFIX)))
    return do_whiteout(u, rel, err);
  const char *hl = archive_entry_hardlink(e);
  if (hl)
    return do_hardlink(u, rel, hl, err);
  mode_t type = archive_entry_filetype(e);
  if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK ||
      (!u->layer && type == AE_IFIFO)) {
    sbx_debug(IMG_SUB, "layer entry '%s' skipped (device node or socket)", rel);
    return 0;
  }
  if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
    return hostile(err, rel, "unknown entry type");
  char full[PATH_MAX * 2];
  snprintf(full, sizeof full, "%s/%s", u->dir, rel);
  archive_entry_set_pathname(e, full);
  archive_entry_set_perm(e, archive_entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
  if (!u->layer) {
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
  }
  int r = archive_write_header(u->disk, e);
  if (r < ARCHIVE_WARN)
    return sbx_err_set(err, SBX_E_INVALID, 0, "layer entry '%.200s' refused: %s", rel,
                       archive_error_string(u->disk));
  if (type == AE_IFREG && archive_entry_size(e) > 0 && copy_data(in, u->disk, err) < 0)
    return sbx_err_prefix(err, "%s", rel);
  if (archive_write_finish_entry(u->disk) < ARCHIVE_WARN)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "layer entry '%.200s': %s", rel,
                       archive_error_string(u->disk));
  return 0;
}

static struct archive *reader_new(void)
{
  struct archive *a = archive_read_new();
  /* only the compressions images use: no filter that runs an external
   * program on hostile input */
  archive_read_support_filter_none(a);
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_zstd(a);
  archive_read_support_format_tar(a);
  return a;
}

static int unpack(struct archive *in, const char *dir, bool layer, struct sbx_error *err)
{
  struct unpacker u = {.dir = dir, .layer = layer};
  u.root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (u.root < 0)
    return sbx_err_sys(err, errno, "open %s", dir);
  u.disk = archive_write_disk_new();
  int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT;
  /* no ARCHIVE_EXTRACT_UNLINK: with it libarchive would replace a symlink
   * met on the way with a directory; without it that entry is refused */
  if (layer)
    flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options(u.disk, flags);
  int rc = 0;
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(in, &e);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN) {
      rc = sbx_err_set(err, SBX_E_INVALID, 0, "not a valid tar: %s", archive_error_string(in));
      break;
    }
    if ((rc = one_entry(&u, in, e, err)) < 0)
      break;
  }
  /* close applies deferred directory modes and times */
  if (archive_write_close(u.disk) < ARCHIVE_WARN && rc == 0)
    rc = sbx_err_set(err, SBX_E_INTERNAL, 0, "finish: %s", archive_error_string(u.disk));
  archive_write_free(u.disk);
  close(u.root);
  return rc;
}

int img_unpack_layer(int fd, const char *dir, struct sbx_error *err)
{
  struct archive *a = reader_new();
  int rc;
  if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK)
    rc = sbx_err_set(err, SBX_E_INVALID, 0, "layer: %s", archive_error_string(a));
  else
    rc = unpack(a, dir, true, err);
  archive_read_free(a);
  return rc;
}

int img_unpack_plain(const char *path, const char *dir, struct sbx_error *err)
{
  struct archive *a = reader_new();
  int rc;
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK)
    rc = sbx_err_set(err, SBX_E_INVALID, 0, "%s: %s", path, archive_error_string(a));
  else
    rc = unpack(a, dir, false, err);
  archive_read_free(a);
  return rc;
}
