/* manifest.c — OCI and Docker v2 schema 2 manifests and indexes (manifest
 * lists): telling them apart, choosing linux/amd64 from an index, reading
 * the config and layer descriptors.  Schema 1 (signed JWS) manifests are
 * refused: they carry no content digests for the config. */
#include <string.h>

#include "image/image_int.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

bool img_media_is_index(const char *mt)
{
  return mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST));
}

static bool media_is_manifest(const char *mt)
{
  return mt && (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST));
}

bool img_layer_media_ok(const char *mt)
{
  static const char *const ok[] = {
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "application/vnd.docker.image.rootfs.diff.tar",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (!strcmp(mt, ok[i]))
      return true;
  return false;
}

int img_manifest_kind(const char *body, size_t len, const char *content_type)
{
  char ct[128] = "";
  if (content_type) {
    size_t n = strcspn(content_type, "; ");
    if (n < sizeof ct) {
      memcpy(ct, content_type, n);
      ct[n] = '\0';
    }
  }
  if (img_media_is_index(ct))
    return 1;
  if (media_is_manifest(ct))
    return 0;
  json_t *doc = json_loadb(body, len, 0, NULL);
  if (!doc)
    return -1;
  const char *mt = json_string_value(json_object_get(doc, "mediaType"));
  int kind = -1;
  if (img_media_is_index(mt))
    kind = 1;
  else if (media_is_manifest(mt))
    kind = 0;
  else if (!mt && json_is_array(json_object_get(doc, "manifests")))
    kind = 1; /* OCI allows mediaType to be absent */
  else if (!mt && json_is_array(json_object_get(doc, "layers")) &&
           json_integer_value(json_object_get(doc, "schemaVersion")) == 2)
    kind = 0;
  json_decref(doc);
  return kind;
}

static int desc_read(json_t *o, const char *what, struct img_desc *d, struct sbx_error *err)
{
  const char *digest = json_string_value(json_object_get(o, "digest"));
  const char *mt = json_string_value(json_object_get(o, "mediaType"));
  json_t *size = json_object_get(o, "size");
  if (!img_digest_valid(digest))
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
                       "%s: missing or unsupported digest (only sha256 is accepted)", what);
  if (!json_is_integer(size) || json_integer_value(size) < 0)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "%s: missing size", what);
  snprintf(d->digest, sizeof d->digest, "%s", digest);
  snprintf(d->media_type, sizeof d->media_type, "%s", mt ? mt : "");
  d->size = json_integer_value(size);
  return 0;
}

int img_index_pick(const char *body, size_t len, char *digest, struct sbx_error *err)
{
  json_t *doc = json_loadb(body, len, 0, NULL);
  json_t *list = json_object_get(doc, "manifests");
  if (!json_is_array(list) || json_array_size(list) == 0) {
    json_decref(doc);
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "image index without manifests");
  }
  int rc = 1;
  size_t i;
  json_t *m;
  json_array_foreach(list, i, m)
  {
    json_t *plat = json_object_get(m, "platform");
    const char *os = json_string_value(json_object_get(plat, "os"));
    const char *arch = json_string_value(json_object_get(plat, "architecture"));
    /* an index of one manifest without a platform (OCI layouts written by
     * tools for a single image) means that image */
    bool single = json_array_size(list) == 1 && !plat;
    if (single || (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64"))) {
      struct img_desc d;
      rc = desc_read(m, "index entry", &d, err);
      if (rc == 0)
        snprintf(digest, IMG_DIGEST_LEN, "%s", d.digest);
      break;
    }
  }
  json_decref(doc);
  if (rc == 1)
    rc = sbx_err_set(err, SBX_E_NOT_FOUND, 0, "image index has no linux/amd64 manifest");
  return rc;
}

int img_manifest_parse(const char *body, size_t len, struct img_manifest *m,
                       struct sbx_error *err)
{
  memset(m, 0, sizeof *m);
  json_error_t je;
  json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!doc)
    return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "manifest is not JSON: %s", je.text);
  int rc = -1;
  json_t *layers = json_object_get(doc, "layers");
  if (json_integer_value(json_object_get(doc, "schemaVersion")) != 2 || !json_is_array(layers)) {
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
                "unsupported manifest (schema 1 or not an image manifest)");
    goto out;
  }
  if (json_array_size(layers) > IMG_MAX_LAYERS) {
    sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "manifest has %zu layers (limit %d)",
                json_array_size(layers), IMG_MAX_LAYERS);
    goto out;
  }
  if (desc_read(json_object_get(doc, "config"), "manifest config", &m->config, err) < 0)
    goto out;
  size_t i;
  json_t *l;
  json_array_foreach(layers, i, l)
  {
    struct img_desc *d = &m->layers[i];
    if (desc_read(l, "manifest layer", d, err) < 0)
      goto out;
    if (!img_layer_media_ok(d->media_type)) {
      sbx_err_set(err, SBX_E_BAD_GATEWAY, 0, "layer %s: unsupported media type '%s'", d->digest,
                  d->media_type);
      goto out;
    }
    m->nlayers++;
  }
  rc = 0;
out:
  json_decref(doc);
  return rc;
}

json_t *img_record_new(const char *manifest_digest, const char *index_digest,
                       const struct img_manifest *m)
{
  json_t *layers = json_array();
  int64_t size = m->config.size;
  for (size_t i = 0; i < m->nlayers; i++) {
    json_array_append_new(layers, json_string(m->layers[i].digest));
    size += m->layers[i].size;
  }
  json_t *r = json_pack("{s:s,s:s,s:o,s:I}", "digest", manifest_digest, "config",
                        m->config.digest, "layers", layers, "size", (json_int_t)size);
  if (r && index_digest && index_digest[0])
    json_object_set_new(r, "index", json_string(index_digest));
  return r;
}
