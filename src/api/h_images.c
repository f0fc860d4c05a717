/* h_images.c — the image store over HTTP (issue 7): list what is stored
 * (any key: images are host-wide, like profiles), pull, remove and collect
 * garbage (admin keys: they change what every tenant can start).  The
 * store itself is src/image; `sandboxd image …` does the same offline. */
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "image/image.h"

SBX_HANDLER(sbx_h_image_list)
{
  json_t *arr = NULL;
  if (sbx_image_list(&arr, err) < 0)
    return -1;
  sbx_resp_json(out, 200, json_pack("{s:o}", "images", arr));
  return 0;
}

SBX_HANDLER(sbx_h_image_pull)
{
  json_t *body = sbx_req_json(r, false, err);
  if (!body)
    return -1;
  json_t *ref = json_object_get(body, "ref");
  int rc = -1;
  if (json_object_size(body) != 1 || !json_is_string(ref) || !json_string_length(ref)) {
    sbx_err_field(err, "ref", "the body is {\"ref\": \"name[:tag] or name@sha256:…\"}");
    sbx_err_fr(err, "Le corps est {\"ref\": \"nom[:étiquette] ou nom@sha256:…\"}");
    goto out;
  }
  /* Validate first: a bad reference is the caller's error (400), not the
   * registry's. */
  struct sbx_image_ref parsed;
  if (sbx_image_ref_parse(json_string_value(ref), "ref", &parsed, err) < 0)
    goto out;
  char canonical[700], digest[80];
  if (sbx_image_pull(json_string_value(ref), NULL, NULL, canonical, digest, err) < 0)
    goto out;
  sbx_resp_json(out, 200, json_pack("{s:s, s:s}", "ref", canonical, "digest", digest));
  rc = 0;
out:
  json_decref(body);
  return rc;
}

SBX_HANDLER(sbx_h_image_delete)
{
  const char *ref = r->rest ? r->rest : "";
  if (!*ref) {
    sbx_err_field(err, "ref", "name the image: DELETE /v1/sandbox/images/{ref}");
    return sbx_err_fr(err, "Nommez l'image : DELETE /v1/sandbox/images/{ref}");
  }
  if (sbx_image_remove(ref, err) < 0)
    return -1;
  sbx_resp_empty(out, 204);
  return 0;
}

SBX_HANDLER(sbx_h_image_gc)
{
  struct sbx_image_gc_stats st = {0};
  if (sbx_image_gc(&st, err) < 0)
    return -1;
  sbx_resp_json(out, 200,
                json_pack("{s:I, s:I, s:I, s:I, s:I}", "blobs_removed", (json_int_t)st.blobs_removed,
                          "layers_removed", (json_int_t)st.layers_removed, "layers_in_use",
                          (json_int_t)st.layers_in_use, "tmp_removed", (json_int_t)st.tmp_removed,
                          "bytes_freed", (json_int_t)st.bytes_freed));
  return 0;
}
