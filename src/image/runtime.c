/* runtime.c — images in use: sbx_image_get resolves a reference (pulling
 * when missing and allowed), makes sure every layer is unpacked, and holds
 * the image.  A hold is two things: an in-process refcount (one struct per
 * manifest digest, shared by every sandbox of that image) and a shared
 * flock on each layer directory, which the GC of *any* process respects
 * (it takes an exclusive flock, non-blocking, before deleting a layer).
 * Also the management calls on references: pull, list, remove. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "image/image_int.h"

struct held {
  struct sbx_image pub; /* first: the public pointer is the struct's */
  int refs;
  int *fds; /* one per layer, flock(LOCK_SH) */
  struct held *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct held *cache;

static void held_free(struct held *h)
{
  if (!h)
    return;
  for (size_t i = 0; i < h->pub.nlayers; i++) {
    if (h->fds && h->fds[i] >= 0)
      close(h->fds[i]);
    if (h->pub.layers)
      free(h->pub.layers[i]);
  }
  free(h->fds);
  free(h->pub.layers);
  img_config_free(&h->pub);
  free(h);
}

/* The record for ref: by canonical name, or for a digest reference any
 * record of that manifest/index digest (content-addressed: same bytes). */
static json_t *find_record(json_t *refs, const struct sbx_image_ref *ref)
{
  json_t *rec = json_object_get(refs, ref->canonical);
  if (rec || !ref->digest[0])
    return rec;
  const char *k;
  json_t *v;
  json_object_foreach(refs, k, v)
  {
    const char *d = json_string_value(json_object_get(v, "digest"));
    const char *ix = json_string_value(json_object_get(v, "index"));
    if ((d && !strcmp(d, ref->digest)) || (ix && !strcmp(ix, ref->digest)))
      return v;
  }
  return NULL;
}

/* Builds a held image from a stored manifest: config, layers unpacked and
 * flocked.  Called with gc.lock held shared. */
static int build(const char *canonical, const char *digest, struct held **out,
                 struct sbx_error *err)
{
  _cleanup_free_ char *body = NULL;
  _cleanup_free_ char *cfg = NULL;
  size_t len, clen;
  _cleanup_free_ struct img_manifest *m = calloc(1, sizeof *m);
  struct held *h = calloc(1, sizeof *h);
  if (!m || !h) {
    free(h);
    return sbx_err_sys(err, ENOMEM, "image");
  }
  snprintf(h->pub.ref, sizeof h->pub.ref, "%s", canonical);
  snprintf(h->pub.digest, sizeof h->pub.digest, "%s", digest);
  h->refs = 1;
  if (img_blob_read(digest, IMG_MAX_MANIFEST, &body, &len, err) < 0 ||
      img_manifest_parse(body, len, m, err) < 0 ||
      img_blob_read(m->config.digest, IMG_MAX_CONFIG, &cfg, &clen, err) < 0 ||
      img_config_parse(cfg, clen, m->nlayers, &h->pub, err) < 0)
    goto fail;
  h->pub.layers = calloc(m->nlayers + 1, sizeof *h->pub.layers);
  h->fds = malloc((m->nlayers + 1) * sizeof *h->fds);
  if (!h->pub.layers || !h->fds) {
    sbx_err_sys(err, ENOMEM, "image");
    goto fail;
  }
  for (size_t i = 0; i < m->nlayers; i++) {
    char p[PATH_MAX];
    h->fds[i] = -1;
    h->pub.nlayers = i + 1;
    if (img_layer_ensure(m->layers[i].digest, err) < 0)
      goto fail;
    img_layer_path(m->layers[i].digest, p, sizeof p);
    h->fds[i] = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (h->fds[i] < 0 || flock(h->fds[i], LOCK_SH) < 0 || !(h->pub.layers[i] = strdup(p))) {
      sbx_err_sys(err, errno, "layer %s", p);
      goto fail;
    }
  }
  *out = h;
  return 0;
fail:
  held_free(h);
  return sbx_err_prefix(err, "image %s", canonical);
}

/* text parsed into ref, with the GC lock held shared (a GC, exclusive,
 * cannot run between finding the layers and taking their flocks): the
 * lock's fd, or -1. */
static int ref_locked(const char *text, struct sbx_image_ref *ref, struct sbx_error *err)
{
  if (img_store_ready(err) < 0 || sbx_image_ref_parse(text, "image", ref, err) < 0)
    return -1;
  return img_lock("gc.lock", LOCK_SH, err);
}

int sbx_image_get(const char *text, enum sbx_image_pull policy, struct sbx_image **out,
                  struct sbx_error *err)
{
  struct sbx_image_ref ref;
  _cleanup_close_ int lk = ref_locked(text, &ref, err);
  if (lk < 0)
    return -1;
  json_t *refs = img_refs_load(err);
  if (!refs)
    return -1;
  json_t *rec = find_record(refs, &ref);
  char digest[IMG_DIGEST_LEN] = "";
  if (rec)
    snprintf(digest, sizeof digest, "%s", json_string_value(json_object_get(rec, "digest")));
  json_decref(refs);
  if (!img_digest_valid(digest)) {
    if (policy == SBX_IMAGE_PULL_NEVER)
      return sbx_err_set(err, SBX_E_NOT_FOUND, 0,
                         "image '%s' is not in the store (pull policy: never)", ref.canonical);
    if (img_pull(&ref, NULL, NULL, digest, err) < 0)
      return -1;
  }
  pthread_mutex_lock(&mu);
  for (struct held *h = cache; h; h = h->next)
    if (!strcmp(h->pub.digest, digest)) {
      h->refs++;
      pthread_mutex_unlock(&mu);
      *out = &h->pub;
      return 0;
    }
  pthread_mutex_unlock(&mu);
  struct held *h = NULL;
  if (build(ref.canonical, digest, &h, err) < 0)
    return -1;
  pthread_mutex_lock(&mu);
  for (struct held *o = cache; o; o = o->next)
    if (!strcmp(o->pub.digest, digest)) { /* another thread built it meanwhile */
      o->refs++;
      pthread_mutex_unlock(&mu);
      held_free(h);
      *out = &o->pub;
      return 0;
    }
  h->next = cache;
  cache = h;
  pthread_mutex_unlock(&mu);
  *out = &h->pub;
  return 0;
}

struct sbx_image *sbx_image_hold(struct sbx_image *img)
{
  struct held *h = (struct held *)img;
  pthread_mutex_lock(&mu);
  h->refs++;
  pthread_mutex_unlock(&mu);
  return img;
}

void sbx_image_release(struct sbx_image *img)
{
  if (!img)
    return;
  struct held *h = (struct held *)img;
  pthread_mutex_lock(&mu);
  bool last = --h->refs == 0;
  if (last)
    for (struct held **pp = &cache; *pp; pp = &(*pp)->next)
      if (*pp == h) {
        *pp = h->next;
        break;
      }
  pthread_mutex_unlock(&mu);
  if (last)
    held_free(h);
}

int sbx_image_pull(const char *text, sbx_image_progress_fn cb, void *ud, char *canonical,
                   char *digest, struct sbx_error *err)
{
  struct sbx_image_ref ref;
  _cleanup_close_ int lk = ref_locked(text, &ref, err);
  if (lk < 0)
    return -1;
  char d[IMG_DIGEST_LEN];
  if (img_pull(&ref, cb, ud, d, err) < 0)
    return -1;
  if (canonical)
    snprintf(canonical, sizeof ref.canonical, "%s", ref.canonical);
  if (digest)
    snprintf(digest, IMG_DIGEST_LEN, "%s", d);
  return 0;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int sbx_image_list(json_t **out, struct sbx_error *err)
{
  json_t *refs = img_refs_load(err);
  if (!refs)
    return -1;
  size_t n = json_object_size(refs), i = 0;
  const char **keys = calloc(n + 1, sizeof *keys);
  const char *k;
  json_t *v;
  json_object_foreach(refs, k, v) keys[i++] = k;
  qsort(keys, n, sizeof *keys, cmp_str);
  json_t *arr = json_array();
  for (i = 0; i < n; i++) {
    json_t *o = json_deep_copy(json_object_get(refs, keys[i]));
    json_object_set_new(o, "ref", json_string(keys[i]));
    json_array_append_new(arr, o);
  }
  free(keys);
  json_decref(refs);
  *out = arr;
  return 0;
}

int sbx_image_remove(const char *text, struct sbx_error *err)
{
  struct sbx_image_ref ref;
  if (img_store_ready(err) < 0 || sbx_image_ref_parse(text, "ref", &ref, err) < 0)
    return -1;
  return img_refs_remove(ref.canonical, err);
}
