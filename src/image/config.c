/* config.c — the image config blob (OCI image config / Docker container
 * config): Env, WorkingDir, User, Entrypoint, Cmd, and the sanity check
 * that it describes as many layers as the manifest lists.  Strings are
 * bounded and must not hold NUL (they end up in execve). */
#include <stdlib.h>
#include <string.h>

#include "image/image_int.h"

#define MAX_ITEMS 4096
#define MAX_STR 65536

static int str_dup(json_t *v, const char *what, char **out, struct sbx_error *err)
{
  *out = NULL;
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_string(v) || json_string_length(v) > MAX_STR ||
      strlen(json_string_value(v)) != json_string_length(v))
    return sbx_err_set(err, SBX_E_INVALID, 0, "image config: bad %s", what);
  if (json_string_length(v) == 0)
    return 0;
  *out = strdup(json_string_value(v));
  return *out ? 0 : sbx_err_sys(err, ENOMEM, "image config");
}

static void strv_free(char **v)
{
  if (!v)
    return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

static int strv_dup(json_t *arr, const char *what, char ***out, struct sbx_error *err)
{
  *out = NULL;
  if (!arr || json_is_null(arr))
    return 0;
  if (!json_is_array(arr) || json_array_size(arr) > MAX_ITEMS)
    return sbx_err_set(err, SBX_E_INVALID, 0, "image config: %s is not a list of strings", what);
  char **v = calloc(json_array_size(arr) + 1, sizeof *v);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "image config");
  size_t i;
  json_t *s;
  json_array_foreach(arr, i, s)
  {
    if (str_dup(s, what, &v[i], err) < 0 || (!v[i] && !(v[i] = strdup("")))) {
      strv_free(v);
      return sbx_err_prefix(err, "%s", what);
    }
  }
  *out = v;
  return 0;
}

int img_config_parse(const char *body, size_t len, size_t nlayers, struct sbx_image *img,
                     struct sbx_error *err)
{
  json_error_t je;
  json_t *doc = json_loadb(body, len, 0, &je);
  if (!doc)
    return sbx_err_set(err, SBX_E_INVALID, 0, "image config is not JSON: %s", je.text);
  int rc = -1;
  const char *os = json_string_value(json_object_get(doc, "os"));
  if (os && strcmp(os, "linux") != 0) {
    sbx_err_set(err, SBX_E_INVALID, 0, "image is for os '%.32s', not linux", os);
    goto out;
  }
  json_t *diff_ids = json_object_get(json_object_get(doc, "rootfs"), "diff_ids");
  if (!json_is_array(diff_ids) || json_array_size(diff_ids) != nlayers) {
    sbx_err_set(err, SBX_E_INVALID, 0,
                "image config lists %zu diff ids for a manifest of %zu layers",
                json_array_size(diff_ids), nlayers);
    goto out;
  }
  json_t *c = json_object_get(doc, "config");
  if (c && !json_is_object(c) && !json_is_null(c)) {
    sbx_err_set(err, SBX_E_INVALID, 0, "image config: \"config\" is not an object");
    goto out;
  }
  if (strv_dup(json_object_get(c, "Env"), "Env", &img->env, err) < 0 ||
      str_dup(json_object_get(c, "WorkingDir"), "WorkingDir", &img->workdir, err) < 0 ||
      str_dup(json_object_get(c, "User"), "User", &img->user, err) < 0 ||
      strv_dup(json_object_get(c, "Entrypoint"), "Entrypoint", &img->entrypoint, err) < 0 ||
      strv_dup(json_object_get(c, "Cmd"), "Cmd", &img->cmd, err) < 0) {
    img_config_free(img);
    goto out;
  }
  if (!img->env && !(img->env = calloc(1, sizeof *img->env))) {
    sbx_err_sys(err, ENOMEM, "image config");
    goto out;
  }
  rc = 0;
out:
  json_decref(doc);
  return rc;
}

void img_config_free(struct sbx_image *img)
{
  strv_free(img->env);
  strv_free(img->entrypoint);
  strv_free(img->cmd);
  free(img->workdir);
  free(img->user);
  img->env = img->entrypoint = img->cmd = NULL;
  img->workdir = img->user = NULL;
}
