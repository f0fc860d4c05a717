/* layer.c — layers/sha256/<hex>: one directory per layer blob, unpacked
 * once into a private temp directory and renamed into place, so a layer
 * directory that exists is complete.  Two processes unpacking the same
 * layer race harmlessly: the loser's rename fails and its copy goes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "image/image_int.h"

int img_layer_ensure(const char *digest, struct sbx_error *err)
{
  if (img_layer_exists(digest))
    return 0;
  char blob[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX];
  img_blob_path(digest, blob, sizeof blob);
  img_layer_path(digest, dst, sizeof dst);
  _cleanup_close_ int fd = open(blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, errno, "layer blob %s missing", digest);
  img_tmp_path("layer", tmp, sizeof tmp);
  if (mkdir(tmp, 0755) < 0)
    return sbx_err_sys(err, errno, "mkdir %s", tmp);
  uint64_t t0 = sbx_now_ms();
  if (img_unpack_layer(fd, tmp, err) < 0) {
    sbx_rm_rf(tmp);
    return sbx_err_prefix(err, "layer %.19s", digest);
  }
  if (rename(tmp, dst) < 0) {
    int e = errno;
    sbx_rm_rf(tmp);
    if ((e == EEXIST || e == ENOTEMPTY) && img_layer_exists(digest))
      return 0;
    return sbx_err_sys(err, e, "rename %s", dst);
  }
  sbx_info(IMG_SUB, "layer %.19s unpacked in %llu ms", digest,
           (unsigned long long)(sbx_now_ms() - t0));
  return 0;
}
