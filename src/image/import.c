/* import.c — images from files: an OCI layout directory (oci-layout,
 * index.json, blobs/sha256/…), an OCI archive (a tar of such a layout) or a
 * `docker save` tarball (manifest.json, <config>.json, <layer>/layer.tar).
 * Archives are unpacked (plain files only, see unpack.c) into tmp/ first.
 * Every file of the import is opened with openat2(RESOLVE_IN_ROOT), so a
 * symlink in the archive cannot point the import at a host file, and every
 * blob is hashed while copied into the store: an OCI blob must match its
 * descriptor's digest; a docker-save file gets the digest of its bytes and
 * a manifest is written for it, so both end up as the same kind of record
 * as a pull. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "image/image_int.h"

static int open_in(int root, const char *rel)
{
  struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
                         .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
  return (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
}

static int read_in(int root, const char *rel, size_t max, char **out, size_t *len,
                   struct sbx_error *err)
{
  _cleanup_close_ int fd = open_in(root, rel);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return sbx_err_set(err, SBX_E_INVALID, errno, "import: cannot read %s", rel);
  if ((uint64_t)st.st_size > max)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "import: %s is larger than %zu bytes", rel, max);
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf || sbx_read_all(fd, buf, (size_t)st.st_size) != st.st_size) {
    free(buf);
    return sbx_err_sys(err, errno ? errno : EIO, "import: read %s", rel);
  }
  buf[st.st_size] = '\0';
  *out = buf;
  *len = (size_t)st.st_size;
  return 0;
}

/* Copies root/rel into the store while hashing.  expected (may be NULL)
 * must match; digest gets the result; size (may be NULL) the byte count. */
static int copy_blob(int root, const char *rel, const char *expected, char *digest,
                     int64_t *size, struct sbx_error *err)
{
  if (expected && img_blob_exists(expected)) {
    snprintf(digest, IMG_DIGEST_LEN, "%s", expected);
    return 0;
  }
  _cleanup_close_ int in = open_in(root, rel);
  struct stat st;
  if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
    return sbx_err_set(err, SBX_E_INVALID, errno, "import: cannot read %s", rel);
  char tmp[PATH_MAX];
  img_tmp_path("import-blob", tmp, sizeof tmp);
  _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0)
    return sbx_err_sys(err, errno, "create %s", tmp);
  struct img_hash h;
  img_hash_init(&h);
  char buf[1 << 16];
  int64_t total = 0;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n < 0) {
        unlink(tmp);
        return sbx_err_sys(err, errno, "read %s", rel);
      }
      break;
    }
    if (sbx_write_all(out, buf, (size_t)n) < 0) {
      unlink(tmp);
      return sbx_err_sys(err, errno, "write %s", tmp);
    }
    img_hash_update(&h, buf, (size_t)n);
    total += n;
  }
  img_hash_final(&h, digest);
  if (size)
    *size = total;
  if ((expected && img_digest_check(rel, expected, digest, err) < 0) ||
      img_blob_commit_file(tmp, digest, err) < 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

static int check_config(const struct img_manifest *m, struct sbx_error *err)
{
  _cleanup_free_ char *body = NULL;
  size_t len;
  struct sbx_image tmp = {0};
  if (img_blob_read(m->config.digest, IMG_MAX_CONFIG, &body, &len, err) < 0 ||
      img_config_parse(body, len, m->nlayers, &tmp, err) < 0)
    return -1;
  img_config_free(&tmp);
  return 0;
}

static int record(const char *name, const char *digest, const struct img_manifest *m,
                  struct sbx_error *err)
{
  if (check_config(m, err) < 0)
    return -1;
  for (size_t i = 0; i < m->nlayers; i++)
    if (img_layer_ensure(m->layers[i].digest, err) < 0)
      return -1;
  json_t *rec = img_record_new(digest, NULL, m);
  int rc = rec ? img_refs_put(name, rec, err) : sbx_err_sys(err, ENOMEM, "record");
  json_decref(rec);
  return rc;
}

static void blob_rel(const char *digest, char *buf, size_t len)
{
  snprintf(buf, len, "blobs/sha256/%s", digest + 7);
}

/* The name an OCI index entry carries, when it is a full reference. */
static void oci_name(json_t *entry, char *out, size_t len)
{
  json_t *ann = json_object_get(entry, "annotations");
  const char *n = json_string_value(json_object_get(ann, "io.containerd.image.name"));
  if (!n) {
    const char *r = json_string_value(json_object_get(ann, "org.opencontainers.image.ref.name"));
    if (r && strchr(r, '/')) /* a bare "latest" is a tag, not a name */
      n = r;
  }
  snprintf(out, len, "%s", n ? n : "");
}

static int import_oci(int root, const char *name, char *canonical, struct sbx_error *err)
{
  _cleanup_free_ char *idx = NULL;
  size_t len;
  if (read_in(root, "index.json", IMG_MAX_MANIFEST, &idx, &len, err) < 0)
    return -1;
  json_t *doc = json_loadb(idx, len, 0, NULL);
  json_t *list = json_object_get(doc, "manifests");
  char own[600] = "";
  if (json_array_size(list) >= 1)
    oci_name(json_array_get(list, 0), own, sizeof own);
  json_decref(doc);
  char digest[IMG_DIGEST_LEN], rel[128];
  /* one level of nesting: index.json → (index →) manifest */
  if (img_index_pick(idx, len, digest, err) < 0)
    return sbx_err_prefix(err, "index.json");
  _cleanup_free_ char *body = NULL;
  blob_rel(digest, rel, sizeof rel);
  if (read_in(root, rel, IMG_MAX_MANIFEST, &body, &len, err) < 0)
    return -1;
  char got[IMG_DIGEST_LEN];
  img_digest_buf(body, len, got);
  if (img_digest_check(rel, digest, got, err) < 0)
    return -1;
  if (img_manifest_kind(body, len, NULL) == 1) {
    if (img_index_pick(body, len, digest, err) < 0)
      return -1;
    free(body);
    body = NULL;
    blob_rel(digest, rel, sizeof rel);
    if (read_in(root, rel, IMG_MAX_MANIFEST, &body, &len, err) < 0)
      return -1;
    img_digest_buf(body, len, got);
    if (img_digest_check(rel, digest, got, err) < 0)
      return -1;
  }
  struct sbx_image_ref ref;
  const char *use = name && *name ? name : own;
  if (!*use)
    return sbx_err_field(err, "name",
                         "the OCI layout names no image (no io.containerd.image.name or full "
                         "ref.name annotation): give --name");
  if (sbx_image_ref_parse(use, "name", &ref, err) < 0)
    return -1;
  _cleanup_free_ struct img_manifest *m = calloc(1, sizeof *m);
  if (!m || img_manifest_parse(body, len, m, err) < 0 || img_blob_put(body, len, got, err) < 0)
    return m ? -1 : sbx_err_sys(err, ENOMEM, "import");
  for (size_t i = 0; i <= m->nlayers; i++) {
    const struct img_desc *d = i == 0 ? &m->config : &m->layers[i - 1];
    char bd[IMG_DIGEST_LEN];
    blob_rel(d->digest, rel, sizeof rel);
    if (copy_blob(root, rel, d->digest, bd, NULL, err) < 0)
      return -1;
  }
  if (record(ref.canonical, got, m, err) < 0)
    return -1;
  snprintf(canonical, sizeof ref.canonical, "%s", ref.canonical);
  return 0;
}

static const char *layer_media(int root, const char *rel)
{
  unsigned char magic[4] = {0};
  _cleanup_close_ int fd = open_in(root, rel);
  if (fd >= 0 && read(fd, magic, sizeof magic) == (ssize_t)sizeof magic) {
    if (magic[0] == 0x1f && magic[1] == 0x8b)
      return "application/vnd.docker.image.rootfs.diff.tar.gzip";
    if (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
      return "application/vnd.oci.image.layer.v1.tar+zstd";
  }
  return "application/vnd.docker.image.rootfs.diff.tar";
}

/* docker save: manifest.json = [{Config, RepoTags[], Layers[]}] (first image). */
static int import_docker(int root, const char *name, char *canonical, struct sbx_error *err)
{
  _cleanup_free_ char *mj = NULL;
  size_t len;
  if (read_in(root, "manifest.json", IMG_MAX_MANIFEST, &mj, &len, err) < 0)
    return -1;
  json_t *doc = json_loadb(mj, len, 0, NULL);
  json_t *img = json_array_get(doc, 0);
  const char *config = json_string_value(json_object_get(img, "Config"));
  const char *tag = json_string_value(json_array_get(json_object_get(img, "RepoTags"), 0));
  json_t *layers = json_object_get(img, "Layers");
  _cleanup_free_ struct img_manifest *m = calloc(1, sizeof *m);
  struct sbx_image_ref ref;
  const char *use = name && *name ? name : tag;
  int rc = -1;
  if (!m) {
    sbx_err_sys(err, ENOMEM, "import");
  } else if (!config || !json_is_array(layers) || json_array_size(layers) > IMG_MAX_LAYERS) {
    sbx_err_set(err, SBX_E_INVALID, 0, "manifest.json: not a docker-save manifest");
  } else if (!use) {
    sbx_err_field(err, "name", "the docker-save tarball has no RepoTags: give --name");
  } else if (sbx_image_ref_parse(use, "name", &ref, err) == 0 &&
             copy_blob(root, config, NULL, m->config.digest, &m->config.size, err) == 0) {
    snprintf(m->config.media_type, sizeof m->config.media_type,
             "application/vnd.docker.container.image.v1+json");
    rc = 0;
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
      struct img_desc *d = &m->layers[i];
      const char *rel = json_string_value(l);
      if (!rel || copy_blob(root, rel, NULL, d->digest, &d->size, err) < 0) {
        rc = rel ? -1 : sbx_err_set(err, SBX_E_INVALID, 0, "manifest.json: bad layer");
        break;
      }
      snprintf(d->media_type, sizeof d->media_type, "%s", layer_media(root, rel));
      m->nlayers++;
    }
  }
  json_decref(doc);
  if (rc < 0)
    return -1;
  /* a manifest of our own, so the record looks like a pulled image's */
  json_t *ls = json_array();
  for (size_t i = 0; i < m->nlayers; i++)
    json_array_append_new(ls, json_pack("{s:s,s:I,s:s}", "mediaType", m->layers[i].media_type,
                                        "size", (json_int_t)m->layers[i].size, "digest",
                                        m->layers[i].digest));
  json_t *man = json_pack("{s:i,s:s,s:{s:s,s:I,s:s},s:o}", "schemaVersion", 2, "mediaType",
                          "application/vnd.docker.distribution.manifest.v2+json", "config",
                          "mediaType", m->config.media_type, "size", (json_int_t)m->config.size,
                          "digest", m->config.digest, "layers", ls);
  _cleanup_free_ char *text = man ? json_dumps(man, JSON_COMPACT) : NULL;
  json_decref(man);
  char digest[IMG_DIGEST_LEN];
  if (!text || img_blob_put(text, strlen(text), digest, err) < 0 ||
      record(ref.canonical, digest, m, err) < 0)
    return text ? -1 : sbx_err_sys(err, ENOMEM, "import");
  snprintf(canonical, sizeof ref.canonical, "%s", ref.canonical);
  return 0;
}

static bool has(int root, const char *rel)
{
  int fd = open_in(root, rel);
  if (fd >= 0)
    close(fd);
  return fd >= 0;
}

int sbx_image_import(const char *path, const char *name, char *canonical, struct sbx_error *err)
{
  char canon[700] = "";
  if (img_store_ready(err) < 0)
    return -1;
  struct stat st;
  if (stat(path, &st) < 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, errno, "%s: %s", path, strerror(errno));
  _cleanup_close_ int lk = img_lock("gc.lock", LOCK_SH, err);
  if (lk < 0)
    return -1;
  char tmp[PATH_MAX] = "";
  const char *dir = path;
  if (S_ISREG(st.st_mode)) {
    img_tmp_path("import", tmp, sizeof tmp);
    if (mkdir(tmp, 0700) < 0)
      return sbx_err_sys(err, errno, "mkdir %s", tmp);
    if (img_unpack_plain(path, tmp, err) < 0) {
      sbx_rm_rf(tmp);
      return sbx_err_prefix(err, "import %s", path);
    }
    dir = tmp;
  } else if (!S_ISDIR(st.st_mode)) {
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s is neither a directory nor a file", path);
  }
  int rc;
  int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    rc = sbx_err_sys(err, errno, "open %s", dir);
  else if (has(root, "index.json"))
    rc = import_oci(root, name, canon, err);
  else if (has(root, "manifest.json"))
    rc = import_docker(root, name, canon, err);
  else
    rc = sbx_err_set(err, SBX_E_INVALID, 0,
                     "%s is not an OCI layout, an OCI archive or a docker-save tarball", path);
  if (root >= 0)
    close(root);
  if (tmp[0])
    sbx_rm_rf(tmp);
  if (rc < 0)
    return sbx_err_prefix(err, "import %s", path);
  sbx_info(IMG_SUB, "imported %s as %s", path, canon);
  if (canonical)
    snprintf(canonical, sizeof canon, "%s", canon);
  return 0;
}
