/* auth.c — registry credentials from <state>/auth.json, in Docker's
 * config.json format: {"auths": {"host:port": {"auth": base64("user:pass")}}}
 * (or "username"/"password").  Docker Hub's entry may be spelled
 * "https://index.docker.io/v1/", "docker.io" or "registry-1.docker.io". */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "image/image_int.h"

static json_t *entry_for(json_t *auths, const char *registry)
{
  json_t *e = json_object_get(auths, registry);
  if (e)
    return e;
  if (!strcmp(registry, "registry-1.docker.io")) {
    static const char *const hub[] = {"https://index.docker.io/v1/", "docker.io",
                                      "index.docker.io"};
    for (size_t i = 0; i < sizeof hub / sizeof hub[0] && !e; i++)
      e = json_object_get(auths, hub[i]);
    return e;
  }
  /* "https://host:port" and "http://host:port" spellings */
  const char *k;
  json_t *v;
  json_object_foreach(auths, k, v)
  {
    const char *h = strstr(k, "://");
    h = h ? h + 3 : k;
    size_t n = strlen(registry);
    if (!strncmp(h, registry, n) && (h[n] == '\0' || h[n] == '/'))
      return v;
  }
  return NULL;
}

int img_auth_lookup(const char *registry, char *out, size_t len)
{
  out[0] = '\0';
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/auth.json", img_state_dir());
  struct stat st;
  if (stat(p, &st) < 0)
    return 0;
  if (st.st_size > (1 << 20)) {
    sbx_warn(IMG_SUB, "%s is larger than 1 MiB: ignored", p);
    return 0;
  }
  if (st.st_mode & 0044)
    sbx_warn(IMG_SUB, "%s is readable by others: chmod 600 it", p);
  json_error_t je;
  json_t *doc = json_load_file(p, 0, &je);
  if (!doc) {
    sbx_warn(IMG_SUB, "%s: %s (line %d): ignored", p, je.text, je.line);
    return 0;
  }
  json_t *e = entry_for(json_object_get(doc, "auths"), registry);
  const char *b64 = json_string_value(json_object_get(e, "auth"));
  const char *user = json_string_value(json_object_get(e, "username"));
  const char *pass = json_string_value(json_object_get(e, "password"));
  if (b64) {
    size_t n = 0;
    if (sodium_base642bin((unsigned char *)out, len - 1, b64, strlen(b64), "\n\r ", &n, NULL,
                          sodium_base64_VARIANT_ORIGINAL) < 0 ||
        !memchr(out, ':', n)) {
      sbx_warn(IMG_SUB, "%s: the auth of %s is not base64(user:pass): ignored", p, registry);
      n = 0;
    }
    out[n] = '\0';
  } else if (user && pass) {
    snprintf(out, len, "%s:%s", user, pass);
  }
  json_decref(doc);
  return 0;
}
