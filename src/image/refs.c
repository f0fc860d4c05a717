/* refs.c — images/refs.json: canonical reference → image record
 * {digest, index?, config, layers[], size, created}.  Written whole to a
 * temp file and renamed (readers never see half a file), writers
 * serialised across processes by an flock on images/refs.lock. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "image/image_int.h"

json_t *img_refs_load(struct sbx_error *err)
{
  if (img_store_ready(err) < 0)
    return NULL;
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/refs.json", img_root());
  if (access(p, F_OK) < 0 && errno == ENOENT)
    return json_object();
  json_error_t je;
  json_t *doc = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
  if (!doc) {
    sbx_err_set(err, SBX_E_INTERNAL, 0, "%s: %s (line %d)", p, je.text, je.line);
    return NULL;
  }
  json_t *refs = json_object_get(doc, "refs");
  if (!json_is_object(refs)) {
    json_decref(doc);
    sbx_err_set(err, SBX_E_INTERNAL, 0, "%s: no \"refs\" object", p);
    return NULL;
  }
  json_incref(refs);
  json_decref(doc);
  return refs;
}

static int refs_save(json_t *refs, struct sbx_error *err)
{
  char p[PATH_MAX], tmp[PATH_MAX];
  snprintf(p, sizeof p, "%s/refs.json", img_root());
  img_tmp_path("refs", tmp, sizeof tmp);
  json_t *doc = json_pack("{s:i,s:O}", "version", 1, "refs", refs);
  _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
  json_decref(doc);
  if (!text)
    return sbx_err_sys(err, ENOMEM, "refs.json");
  _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "create %s", tmp);
  if (sbx_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0 || rename(tmp, p) < 0) {
    int e = errno;
    unlink(tmp);
    return sbx_err_sys(err, e, "write %s", p);
  }
  return 0;
}

/* Runs edit(refs) under the refs lock and saves the result. */
static int refs_edit(int (*edit)(json_t *, const char *, json_t *, struct sbx_error *),
                     const char *key, json_t *val, struct sbx_error *err)
{
  if (img_store_ready(err) < 0)
    return -1;
  _cleanup_close_ int lk = img_lock("refs.lock", LOCK_EX, err);
  if (lk < 0)
    return -1;
  json_t *refs = img_refs_load(err);
  if (!refs)
    return -1;
  int rc = edit(refs, key, val, err);
  if (rc == 0)
    rc = refs_save(refs, err);
  json_decref(refs);
  return rc;
}

static int do_put(json_t *refs, const char *key, json_t *val, struct sbx_error *err)
{
  return json_object_set(refs, key, val) < 0 ? sbx_err_sys(err, ENOMEM, "refs") : 0;
}

static int do_remove(json_t *refs, const char *key, json_t *val, struct sbx_error *err)
{
  if (json_object_del(refs, key) < 0)
    return sbx_err_set(err, SBX_E_NOT_FOUND, 0, "image '%s' not found", key);
  return 0;
}

int img_refs_put(const char *canonical, json_t *record, struct sbx_error *err)
{
  char ts[40];
  sbx_format_time(sbx_wall_s(), ts, sizeof ts);
  json_object_set_new(record, "created", json_string(ts));
  return refs_edit(do_put, canonical, record, err);
}

int img_refs_remove(const char *canonical, struct sbx_error *err)
{
  return refs_edit(do_remove, canonical, NULL, err);
}
