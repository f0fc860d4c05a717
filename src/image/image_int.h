/* image_int.h — what the files of the image module share and nobody else
 * uses: digests, store paths and locks, refs.json, manifests, the unpacker,
 * the registry client.  Functions are prefixed img_ (module-private). */
#ifndef SBX_IMAGE_IMAGE_INT_H
#define SBX_IMAGE_IMAGE_INT_H

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "image/image.h"

#define IMG_SUB "image"
/* Ceilings for documents fetched from a registry or read from an import:
 * a manifest or index is a few KiB; a config with a long history some
 * hundred KiB.  Anything bigger is refused, not buffered. */
#define IMG_MAX_MANIFEST (4u << 20)
#define IMG_MAX_CONFIG (8u << 20)
#define IMG_MAX_LAYERS 256
/* A layer that unpacks to more than this (a decompression bomb) is refused. */
#define IMG_MAX_LAYER_BYTES (64ULL << 30)
#define IMG_MAX_LAYER_ENTRIES 2000000

/* ---- digest.c ---- */
#define IMG_DIGEST_LEN 80
struct img_hash {
  crypto_hash_sha256_state st;
};
void img_hash_init(struct img_hash *h);
void img_hash_update(struct img_hash *h, const void *buf, size_t len);
/* "sha256:<64 hex>" into out (IMG_DIGEST_LEN). */
void img_hash_final(struct img_hash *h, char *out);
void img_digest_buf(const void *buf, size_t len, char *out);
/* Hashes the whole file from its start; size may be NULL. */
int img_digest_fd(int fd, char *out, uint64_t *size, struct sbx_error *err);
/* true for "sha256:" + 64 lowercase hex (the only algorithm we accept). */
bool img_digest_valid(const char *d);
/* 0 when equal; otherwise a digest error naming what, expected and got. */
int img_digest_check(const char *what, const char *expected, const char *got,
                     struct sbx_error *err);

/* ---- store.c ---- */
/* <state>/images, realpath'd (the unpacker relies on it holding no symlink). */
const char *img_root(void);
/* <state> itself (auth.json lives there). */
const char *img_state_dir(void);
int img_store_ready(struct sbx_error *err);
/* <root>/blobs/sha256/<hex> */
void img_blob_path(const char *digest, char *buf, size_t len);
/* <root>/layers/sha256/<hex> (keyed by the compressed blob's digest, which
 * is verified; a diff id from a config is not, and trusting it would let
 * one image poison another's layer). */
void img_layer_path(const char *digest, char *buf, size_t len);
bool img_blob_exists(const char *digest);
bool img_layer_exists(const char *digest);
/* A fresh private path under <root>/tmp (not created). */
void img_tmp_path(const char *prefix, char *buf, size_t len);
/* Moves the file at tmp (already verified to hash to digest) into blobs. */
int img_blob_commit_file(const char *tmp, const char *digest, struct sbx_error *err);
/* Stores buf as a blob; digest filled. */
int img_blob_put(const void *buf, size_t len, char *digest, struct sbx_error *err);
/* Reads a stored blob (at most max bytes) and checks its digest again. */
int img_blob_read(const char *digest, size_t max, char **out, size_t *len,
                  struct sbx_error *err);
/* flock on <root>/<name>; returns the fd (close to unlock) or -1.  LOCK_NB
 * failures are SBX_E_CONFLICT. */
int img_lock(const char *name, int how, struct sbx_error *err);

/* ---- refs.c: refs.json, canonical ref → record ---- */
/* New reference to the refs object {"<canonical>": {digest, config, layers[],
 * index?, size, created}}; {} when the file is missing. */
json_t *img_refs_load(struct sbx_error *err);
/* Adds/replaces one record (under the refs lock, temp + rename). */
int img_refs_put(const char *canonical, json_t *record, struct sbx_error *err);
/* 404 when absent. */
int img_refs_remove(const char *canonical, struct sbx_error *err);

/* ---- manifest.c ---- */
struct img_desc {
  char digest[IMG_DIGEST_LEN];
  char media_type[128];
  int64_t size;
};
struct img_manifest {
  struct img_desc config;
  size_t nlayers;
  struct img_desc layers[IMG_MAX_LAYERS];
};
bool img_media_is_index(const char *media_type);
/* Classifies a manifest body: 1 index/list, 0 image manifest, -1 neither. */
int img_manifest_kind(const char *body, size_t len, const char *content_type);
/* Picks linux/amd64 (or the only entry) from an index. */
int img_index_pick(const char *body, size_t len, char *digest, struct sbx_error *err);
int img_manifest_parse(const char *body, size_t len, struct img_manifest *m,
                       struct sbx_error *err);
/* The refs.json record for a manifest. */
json_t *img_record_new(const char *manifest_digest, const char *index_digest,
                       const struct img_manifest *m);

/* ---- config.c ---- */
/* Fills the config fields of img from an OCI/Docker config blob. */
int img_config_parse(const char *body, size_t len, size_t nlayers, struct sbx_image *img,
                     struct sbx_error *err);
void img_config_free(struct sbx_image *img);

/* ---- unpack.c / layer.c ---- */
/* Unpacks a layer tar (gzip, zstd or none) from fd into the existing,
 * empty directory dir (absolute, no symlinks), refusing hostile entries and
 * converting whiteouts to overlayfs form. */
int img_unpack_layer(int fd, const char *dir, struct sbx_error *err);
/* Unpacks an archive of plain files (an OCI archive or docker-save
 * tarball) into dir: regular files, directories and relative symlinks only. */
int img_unpack_plain(const char *archive_path, const char *dir, struct sbx_error *err);
/* Makes sure layers/<hex> exists, unpacking the stored blob once. */
int img_layer_ensure(const char *digest, struct sbx_error *err);
bool img_layer_media_ok(const char *media_type);

/* ---- registry.c ---- */
int img_pull(const struct sbx_image_ref *ref, sbx_image_progress_fn cb, void *ud,
             char *manifest_digest, struct sbx_error *err);

/* ---- auth.c ---- */
/* "user:pass" for registry from <state>/auth.json into out ("" if none). */
int img_auth_lookup(const char *registry, char *out, size_t len);

/* ---- import.c ---- */
/* Stores one image read from a layout directory root (fd, opened with
 * O_PATH|O_DIRECTORY): copies blobs in (verifying), records name. */

#endif
