/* gc.c — garbage collection of the store.  Runs with gc.lock exclusive
 * (so no pull or import is between downloading a blob and recording its
 * reference), keeps every blob a reference names (manifest, index, config,
 * layers), and removes a layer directory only if it can take an exclusive
 * flock on it: an image in use anywhere holds a shared one.  A layer goes
 * by rename into tmp/ first, so a crash mid-delete never leaves a partial
 * directory under layers/ that would look complete; its shifted copies
 * (for hosts that cannot idmap layers) go with it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "image/image_int.h"

#define PARTIAL_MAX_AGE_S (24 * 3600)
#define TMP_MAX_AGE_S 600

static void keep_add(json_t *keep, json_t *v)
{
  if (json_is_string(v))
    json_object_set_new(keep, json_string_value(v), json_true());
}

static json_t *referenced(json_t *refs)
{
  json_t *keep = json_object();
  const char *k;
  json_t *rec;
  json_object_foreach(refs, k, rec)
  {
    keep_add(keep, json_object_get(rec, "digest"));
    keep_add(keep, json_object_get(rec, "index"));
    keep_add(keep, json_object_get(rec, "config"));
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(rec, "layers"), i, l) keep_add(keep, l);
  }
  return keep;
}

static bool kept(json_t *keep, const char *hex)
{
  char d[IMG_DIGEST_LEN];
  snprintf(d, sizeof d, "sha256:%s", hex);
  return !img_digest_valid(d) || json_object_get(keep, d) != NULL;
}

static void gc_blobs(json_t *keep, struct sbx_image_gc_stats *st)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/blobs/sha256", img_root());
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || kept(keep, e->d_name))
      continue;
    struct stat s;
    if (fstatat(dirfd(d), e->d_name, &s, AT_SYMLINK_NOFOLLOW) == 0 &&
        unlinkat(dirfd(d), e->d_name, 0) == 0) {
      st->blobs_removed++;
      st->bytes_freed += (uint64_t)s.st_size;
    }
  }
  if (d)
    closedir(d);
}

/* A layer's shifted copies (isolation/shift.c: <hex>@<base>, and their
 * .<hex>@<base>.tmp and .lock) go with it, while its exclusive flock
 * shows no sandbox uses it; orphans (a crash between) with no layer. */
static bool copy_of(const char *name, const char *hex)
{
  if (name[0] == '.')
    name++;
  size_t n = strlen(hex);
  return !strncmp(name, hex, n) && name[n] == '@';
}

static void gc_copies(const char *dir, const char *hex, struct sbx_image_gc_stats *st)
{
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!copy_of(e->d_name, hex))
      continue;
    char src[PATH_MAX + 300], dst[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
    img_tmp_path("gc", dst, sizeof dst);
    if (rename(src, dst) == 0 && sbx_rm_rf(dst) == 0 && e->d_name[0] != '.')
      st->copies_removed++;
  }
  if (d)
    closedir(d);
}

static void gc_orphan_copies(const char *dir, struct sbx_image_gc_stats *st)
{
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    const char *name = e->d_name[0] == '.' ? e->d_name + 1 : e->d_name;
    const char *at = strchr(name, '@');
    if (!at || at - name != 64)
      continue;
    char hex[65];
    snprintf(hex, sizeof hex, "%.64s", name);
    struct stat s;
    if (fstatat(dirfd(d), hex, &s, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
      gc_copies(dir, hex, st);
  }
  if (d)
    closedir(d);
}

static void gc_layers(json_t *keep, struct sbx_image_gc_stats *st)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/layers/sha256", img_root());
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strchr(e->d_name, '@') || kept(keep, e->d_name))
      continue;
    _cleanup_close_ int fd =
        openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
      continue;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
      sbx_info(IMG_SUB, "gc: layer %.12s unreferenced but in use: kept", e->d_name);
      st->layers_in_use++;
      continue;
    }
    char src[PATH_MAX + 80], dst[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
    img_tmp_path("gc", dst, sizeof dst);
    gc_copies(dir, e->d_name, st);
    if (rename(src, dst) == 0 && sbx_rm_rf(dst) == 0)
      st->layers_removed++;
  }
  if (d)
    closedir(d);
  gc_orphan_copies(dir, st);
}

/* Leftovers in tmp/: interrupted unpacks and imports, and partial
 * downloads old enough that nobody will resume them. */
static void gc_tmp(struct sbx_image_gc_stats *st)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/tmp", img_root());
  DIR *d = opendir(dir);
  time_t now = time(NULL);
  for (struct dirent *e; d && (e = readdir(d));) {
    struct stat s;
    if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    bool partial = !strncmp(e->d_name, "dl-", 3);
    if (now - s.st_mtime < (partial ? PARTIAL_MAX_AGE_S : TMP_MAX_AGE_S))
      continue;
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (sbx_rm_rf(p) == 0)
      st->tmp_removed++;
  }
  if (d)
    closedir(d);
}

int sbx_image_gc(struct sbx_image_gc_stats *st, struct sbx_error *err)
{
  memset(st, 0, sizeof *st);
  if (img_store_ready(err) < 0)
    return -1;
  _cleanup_close_ int lk = img_lock("gc.lock", LOCK_EX | LOCK_NB, err);
  if (lk < 0)
    return -1;
  json_t *refs = img_refs_load(err);
  if (!refs)
    return -1;
  json_t *keep = referenced(refs);
  gc_blobs(keep, st);
  gc_layers(keep, st);
  gc_tmp(st);
  json_decref(keep);
  json_decref(refs);
  sbx_info(
      IMG_SUB,
      "gc: %u blobs (%llu bytes), %u layers and %u shifted copies removed, %u layers in use "
      "kept",
      st->blobs_removed, (unsigned long long)st->bytes_freed, st->layers_removed,
      st->copies_removed, st->layers_in_use);
  return 0;
}
