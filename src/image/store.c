/* store.c — the content store on disk: <state>/images and its blobs,
 * layer directories, temp area and lock files.  A blob reaches
 * blobs/sha256/<hex> only by rename() after its digest was checked, so a
 * file there is always complete and correct; readers check it again. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "image/image_int.h"

static char root[PATH_MAX];
static char state[PATH_MAX];

const char *img_root(void) { return root; }

int img_store_ready(struct sbx_error *err)
{
  if (!root[0])
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "image store not opened");
  return 0;
}

int sbx_image_store_open(const char *state_dir, struct sbx_error *err)
{
  if (sodium_init() < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "libsodium init failed");
  char abs[PATH_MAX];
  if (sbx_mkdir_p(state_dir, 0700) < 0 || !realpath(state_dir, abs))
    return sbx_err_sys(err, errno, "image store: state dir %s", state_dir);
  /* realpath: the unpacker refuses to write through symlinks, and checks
   * every component of the absolute path it writes to. */
  snprintf(state, sizeof state, "%s", abs);
  snprintf(root, sizeof root, "%s/images", abs);
  static const char *const dirs[] = {"",        "/blobs",         "/blobs/sha256",
                                     "/layers", "/layers/sha256", "/tmp"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s%s", root, dirs[i]);
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
      return sbx_err_sys(err, errno, "image store: mkdir %s", p);
  }
  /* layers must be readable (not writable) by the sandboxes' users once
   * mounted; 0711 on the path lets an idmapped/userns mount traverse it. */
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/layers", root);
  chmod(p, 0711);
  snprintf(p, sizeof p, "%s/layers/sha256", root);
  chmod(p, 0711);
  chmod(root, 0711);
  return 0;
}

const char *img_state_dir(void) { return state; }

void img_blob_path(const char *digest, char *buf, size_t len)
{
  snprintf(buf, len, "%s/blobs/sha256/%s", root, digest + 7);
}

void img_layer_path(const char *digest, char *buf, size_t len)
{
  snprintf(buf, len, "%s/layers/sha256/%s", root, digest + 7);
}

bool img_blob_exists(const char *digest)
{
  char p[PATH_MAX];
  img_blob_path(digest, p, sizeof p);
  return access(p, F_OK) == 0;
}

bool img_layer_exists(const char *digest)
{
  char p[PATH_MAX];
  img_layer_path(digest, p, sizeof p);
  struct stat st;
  return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

void img_tmp_path(const char *prefix, char *buf, size_t len)
{
  char id[64];
  sbx_random_id(prefix, id, sizeof id);
  snprintf(buf, len, "%s/tmp/%s", root, id);
}

int img_blob_commit_file(const char *tmp, const char *digest, struct sbx_error *err)
{
  char dst[PATH_MAX];
  img_blob_path(digest, dst, sizeof dst);
  chmod(tmp, 0600);
  if (rename(tmp, dst) < 0)
    return sbx_err_sys(err, errno, "store blob %s", digest);
  return 0;
}

int img_blob_put(const void *buf, size_t len, char *digest, struct sbx_error *err)
{
  img_digest_buf(buf, len, digest);
  if (img_blob_exists(digest))
    return 0;
  char tmp[PATH_MAX];
  img_tmp_path("blob", tmp, sizeof tmp);
  _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "create %s", tmp);
  if (sbx_write_all(fd, buf, len) < 0 || fsync(fd) < 0) {
    int e = errno;
    unlink(tmp);
    return sbx_err_sys(err, e, "write %s", tmp);
  }
  if (img_blob_commit_file(tmp, digest, err) < 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

int img_blob_read(const char *digest, size_t max, char **out, size_t *len, struct sbx_error *err)
{
  if (!img_digest_valid(digest))
    return sbx_err_set(err, SBX_E_INVALID, 0, "invalid digest '%.80s'", digest);
  char p[PATH_MAX];
  img_blob_path(digest, p, sizeof p);
  _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return sbx_err_set(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_INTERNAL, errno,
                       "blob %s: %s", digest, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sbx_err_sys(err, errno, "stat %s", p);
  if ((uint64_t)st.st_size > max)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "blob %s is %lld bytes (limit %zu)", digest,
                       (long long)st.st_size, max);
  _cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
  if (!buf)
    return sbx_err_sys(err, ENOMEM, "blob %s", digest);
  if (sbx_read_all(fd, buf, (size_t)st.st_size) != st.st_size)
    return sbx_err_sys(err, errno ? errno : EIO, "read %s", p);
  buf[st.st_size] = '\0';
  char got[IMG_DIGEST_LEN];
  img_digest_buf(buf, (size_t)st.st_size, got);
  if (img_digest_check(digest, digest, got, err) < 0)
    return sbx_err_prefix(err, "stored blob corrupted");
  *out = steal_pointer(&buf);
  *len = (size_t)st.st_size;
  return 0;
}

int img_lock(const char *name, int how, struct sbx_error *err)
{
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", root, name);
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "open %s", p);
  while (flock(fd, how) < 0) {
    if (errno == EINTR)
      continue;
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
      return sbx_err_set(err, SBX_E_CONFLICT, e,
                         "image store busy (%s held: a pull, import or gc is running)", name);
    return sbx_err_sys(err, e, "flock %s", p);
  }
  return fd;
}
