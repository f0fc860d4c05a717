/* fuzz_image.c — what a registry (or an `image import` file) hands the
 * image module (src/image/manifest.c, config.c, ref.c, digest.c): a
 * manifest or index body classified, linux/amd64 picked from an index, a
 * manifest's descriptors read and recorded, the config blob's Env,
 * Entrypoint, Cmd, User, WorkingDir; and the same bytes as an image
 * reference and a digest.  Input: one blob. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "image/image_int.h"

static void as_manifest(const char *body, size_t len)
{
  static const char *const ctypes[] = {
      NULL, "application/vnd.oci.image.index.v1+json",
      "application/vnd.docker.distribution.manifest.v2+json; charset=utf-8"};
  for (size_t i = 0; i < sizeof ctypes / sizeof ctypes[0]; i++)
    img_manifest_kind(body, len, ctypes[i]);
  struct sbx_error err = {0};
  char digest[IMG_DIGEST_LEN];
  if (img_index_pick(body, len, digest, &err) == 0 && !img_digest_valid(digest))
    abort(); /* a picked digest is the one pulled next: it must be well-formed */
  static struct img_manifest m; /* large (layers[]) */
  memset(&m, 0, sizeof m);
  memset(&err, 0, sizeof err);
  if (img_manifest_parse(body, len, &m, &err) == 0) {
    if (m.nlayers > IMG_MAX_LAYERS)
      abort();
    json_decref(
        img_record_new("sha256:0000000000000000000000000000000000000000000000000000000000000000",
                       NULL, &m));
  }
  struct sbx_image img = {0};
  memset(&err, 0, sizeof err);
  for (size_t nl = 0; nl < 3; nl++)
    if (img_config_parse(body, len, nl ? nl : m.nlayers, &img, &err) == 0)
      img_config_free(&img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  as_manifest((const char *)data, size);
  char *s = strndup((const char *)data, size < 1024 ? size : 1024);
  if (!s)
    return 0;
  struct sbx_image_ref ref;
  struct sbx_error err = {0};
  sbx_image_ref_parse(s, "image", &ref, &err);
  img_digest_valid(s);
  free(s);
  return 0;
}
