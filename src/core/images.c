/* images.c — the image store as the API offers it (/v1/sandbox/images):
 * list, check a reference, pull (with progress), remove, collect garbage.
 * image/ owns the store; core is the one layer above it, so the API never
 * includes image/ (and sessions and executions see the same store). */
#include "core/internal.h"
#include "image/image.h"

int sbx_core_image_list(json_t **out, struct sbx_error *err) { return sbx_image_list(out, err); }

int sbx_core_image_ref_check(const char *ref, const char *field, struct sbx_error *err)
{
  struct sbx_image_ref parsed;
  return sbx_image_ref_parse(ref, field, &parsed, err);
}

int sbx_core_image_pull(const char *ref, sbx_core_progress_fn cb, void *ud, char *canonical,
                        char *digest, struct sbx_error *err)
{
  return sbx_image_pull(ref, cb, ud, canonical, digest, err);
}

int sbx_core_image_remove(const char *ref, struct sbx_error *err)
{
  return sbx_image_remove(ref, err);
}

int sbx_core_image_gc(json_t **out, struct sbx_error *err)
{
  struct sbx_image_gc_stats st = {0};
  if (sbx_image_gc(&st, err) < 0)
    return -1;
  *out = json_pack("{s:I, s:I, s:I, s:I, s:I}", "blobs_removed", (json_int_t)st.blobs_removed,
                   "layers_removed", (json_int_t)st.layers_removed, "layers_in_use",
                   (json_int_t)st.layers_in_use, "tmp_removed", (json_int_t)st.tmp_removed,
                   "bytes_freed", (json_int_t)st.bytes_freed);
  return 0;
}
