/* e2b_common.c — see e2b.h: error shapes, authentication, access tokens,
 * the template mapping and Connect framing of the E2B-compatible surface. */
#include <arpa/inet.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b.h"
#include "api/envelope.h"
#include "common/cleanup.h"
#include "core/core.h"

#define MAX_TEMPLATES 64

struct template
{
  char name[64];
  char profile[64];
  char image[512];
};

static struct template templates[MAX_TEMPLATES];
static size_t ntemplates;
static unsigned char secret[crypto_auth_hmacsha256_KEYBYTES];
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;

static void draw_secret(void)
{
  if (sodium_init() < 0)
    abort(); /* libsodium cannot run: no token could be trusted */
  randombytes_buf(secret, sizeof secret);
}

bool sbx_e2b_owns(const struct sbx_req *r) { return !strncmp(r->path, "/e2b/", 5); }

static bool is_envd(const struct sbx_req *r)
{
  return !strncmp(r->path, SBX_E2B_ENVD_PREFIX "/", sizeof SBX_E2B_ENVD_PREFIX);
}

/* /e2b/envd/<package.Service>/<Method>: a Connect call. */
static bool is_connect(const struct sbx_req *r)
{
  if (!is_envd(r))
    return false;
  const char *svc = r->path + sizeof SBX_E2B_ENVD_PREFIX;
  const char *slash = strchr(svc, '/');
  return slash && memchr(svc, '.', (size_t)(slash - svc)) != NULL;
}

bool sbx_e2b_connect_streaming(struct sbx_req *r)
{
  const char *ct = sbx_req_header(r, "Content-Type");
  return ct && !strncasecmp(ct, "application/connect+json", 24);
}

const char *sbx_e2b_connect_code(int code)
{
  switch (code) {
  case SBX_E_INVALID:
    return "invalid_argument";
  case SBX_E_UNAUTHENTICATED:
    return "unauthenticated";
  case SBX_E_FORBIDDEN:
    return "permission_denied";
  case SBX_E_NOT_FOUND:
    return "not_found";
  case SBX_E_METHOD:
    return "unimplemented";
  case SBX_E_CONFLICT:
    return "failed_precondition";
  case SBX_E_TOO_LARGE:
    return "resource_exhausted";
  case SBX_E_QUOTA:
    return "resource_exhausted";
  case SBX_E_RATE:
    return "resource_exhausted";
  case SBX_E_RUNTIME_UNAVAILABLE:
    return "unavailable";
  case SBX_E_NOT_READY:
    return "unavailable";
  default:
    return "internal";
  }
}

static json_t *connect_error_json(const struct sbx_error *err)
{
  /* A conflict that is "it already exists" has Connect's own code. */
  const char *code = err->code == SBX_E_CONFLICT && !strcmp(err->field, "already_exists")
                         ? "already_exists"
                         : sbx_e2b_connect_code(err->code);
  return json_pack("{s:s, s:s}", "code", code, "message", err->msg);
}

char *sbx_e2b_frame(int flags, json_t *msg, size_t *len)
{
  char *js = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
  json_decref(msg);
  if (!js)
    return NULL;
  size_t n = strlen(js);
  char *out = malloc(n + 5);
  if (out) {
    uint32_t be = htonl((uint32_t)n);
    out[0] = (char)flags;
    memcpy(out + 1, &be, 4);
    memcpy(out + 5, js, n);
    *len = n + 5;
  }
  free(js);
  return out;
}

char *sbx_e2b_end_frame(const struct sbx_error *err, size_t *len)
{
  json_t *m = err ? json_pack("{s:o}", "error", connect_error_json(err)) : json_object();
  return sbx_e2b_frame(0x02, m, len);
}

/* E2B calls the SDK makes that have no route here.  The router's "no such
 * route" 404 would tell the SDK the sandbox is gone (fork and network throw
 * SandboxNotFoundError on any 404) or say nothing useful, so each is named
 * and explained instead; volumes and snapshots by id stay 404, which is true
 * (none exists) and what the SDK turns into `false` / VolumeNotFoundError. */
static const struct {
  const char *method, *pattern; /* pattern under SBX_E2B_API_PREFIX; '*' is one segment */
  int code;
  const char *what, *why;
} unrouted[] = {
    {"GET", "/snapshots", SBX_E_METHOD, "snapshots", "a sandbox's memory is never saved"},
    {"DELETE", "/templates/*", SBX_E_NOT_FOUND, "snapshot or template",
     "sandboxd keeps no snapshots, and templates are the operator's e2b_templates setting"},
    {"POST", "/sandboxes/*/fork", SBX_E_METHOD, "forking a sandbox",
     "a sandbox's memory is never saved or copied; create another sandbox"},
    {"PUT", "/sandboxes/*/network", SBX_E_METHOD, "changing a sandbox's network",
     "set an allowlist with sandboxd's own PATCH /v1/sandbox/sessions/{id} {network}"},
    {"GET", "/volumes/*", SBX_E_NOT_FOUND, "volume", "volumes do not exist in sandboxd yet"},
    {"DELETE", "/volumes/*", SBX_E_NOT_FOUND, "volume", "volumes do not exist in sandboxd yet"},
};

static bool path_matches(const char *path, const char *pattern)
{
  while (*pattern) {
    if (*pattern == '*') {
      if (*path == '/' || !*path)
        return false; /* a segment is never empty */
      path += strcspn(path, "/");
      pattern++;
    } else if (*path++ != *pattern++) {
      return false;
    }
  }
  return !*path;
}

/* Rewrites the router's 404 for one of those calls; false if it is not one. */
static bool explain_unrouted(const struct sbx_req *r, struct sbx_error *err)
{
  const size_t plen = sizeof SBX_E2B_API_PREFIX - 1;
  if (r->route || err->code != SBX_E_NOT_FOUND || strncmp(r->path, SBX_E2B_API_PREFIX, plen))
    return false;
  for (size_t i = 0; i < sizeof unrouted / sizeof unrouted[0]; i++) {
    if (strcmp(r->method, unrouted[i].method) ||
        !path_matches(r->path + plen, unrouted[i].pattern))
      continue;
    if (unrouted[i].code == SBX_E_NOT_FOUND)
      sbx_err_set(err, SBX_E_NOT_FOUND, 0, "%s not found: %s", unrouted[i].what,
                  unrouted[i].why);
    else
      sbx_err_set(err, SBX_E_METHOD, 0,
                  "%s is not supported by sandboxd's E2B-compatible API: %s", unrouted[i].what,
                  unrouted[i].why);
    return true;
  }
  return false;
}

void sbx_e2b_error(struct sbx_req *r, struct sbx_resp *out, const struct sbx_error *in)
{
  struct sbx_error own = *in;
  const struct sbx_error *err = explain_unrouted(r, &own) ? &own : in;
  int status = sbx_envelope_status(err->code);
  if (is_connect(r) && sbx_e2b_connect_streaming(r)) {
    size_t len = 0;
    char *f = sbx_e2b_end_frame(err, &len);
    sbx_resp_bytes(out, 200, f, f ? len : 0, "application/connect+json");
    return;
  }
  if (is_connect(r)) {
    sbx_resp_json(out, err->code == SBX_E_METHOD ? 501 : status, connect_error_json(err));
    return;
  }
  sbx_resp_json(out, status, json_pack("{s:i, s:s}", "code", status, "message", err->msg));
}

/* ---- tokens and authentication ---- */

static void mac_hex(const char *key_id, const char *sid, char hex[65])
{
  pthread_once(&secret_once, draw_secret);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, secret, sizeof secret);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)key_id, strlen(key_id));
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)"\n", 1);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)sid, strlen(sid));
  crypto_auth_hmacsha256_final(&st, mac);
  sodium_bin2hex(hex, 65, mac, sizeof mac);
}

void sbx_e2b_token(const struct sbx_principal *who, const char *sid, char out[SBX_E2B_TOKEN_MAX])
{
  char hex[65];
  mac_hex(who->key_id, sid, hex);
  snprintf(out, SBX_E2B_TOKEN_MAX, "e2bt_%s_%s", who->key_id, hex);
}

static int unauthenticated(struct sbx_error *err, const char *what)
{
  sbx_err_set(err, SBX_E_UNAUTHENTICATED, 0, "%s", what);
  return sbx_err_fr(err, "Authentification requise : %s", what);
}

static int no_sandbox(struct sbx_error *err, const char *sid)
{
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "sandbox %.200s not found", sid);
  return sbx_err_fr(err, "Bac à sable %.200s introuvable", sid);
}

/* "e2bt_<key id>_<hex mac>" for sid → the key's principal. */
static int verify_token(struct sbx_req *r, const char *tok, const char *sid,
                        struct sbx_error *err)
{
  char key_id[40];
  const char *us = tok ? strchr(tok + (strncmp(tok, "e2bt_", 5) ? 0 : 5), '_') : NULL;
  if (!tok || strncmp(tok, "e2bt_", 5) || !us || (size_t)(us - tok - 5) >= sizeof key_id ||
      strlen(us + 1) != 64)
    return unauthenticated(err, "an X-Access-Token of this sandbox is required");
  snprintf(key_id, sizeof key_id, "%.*s", (int)(us - tok - 5), tok + 5);
  char want[65];
  mac_hex(key_id, sid, want);
  if (sodium_memcmp(want, us + 1, 64) != 0)
    return no_sandbox(err, sid); /* another sandbox's token says nothing of this one */
  struct sbx_error lookup = {0};
  if (sbx_core_key_principal(r->core, key_id, &r->who, &lookup) < 0) {
    if (lookup.code != SBX_E_NOT_FOUND) {
      *err = lookup;
      return -1;
    }
    return unauthenticated(err, "the API key that opened this sandbox was revoked");
  }
  return 0;
}

int sbx_e2b_authenticate(struct sbx_req *r, bool sandbox, struct sbx_error *err)
{
  if (!sandbox) {
    const char *key = sbx_req_header(r, "X-API-Key");
    if (!key)
      return unauthenticated(err, "an X-API-Key header with a sandboxd API key is required");
    return sbx_core_keys_verify(r->core, key, &r->who, err);
  }
  const char *sid = sbx_req_header(r, "E2b-Sandbox-Id");
  if (!sid || !*sid || strlen(sid) >= sizeof r->params[0]) {
    sbx_err_field(err, "E2b-Sandbox-Id", "the E2b-Sandbox-Id header must name the sandbox");
    return sbx_err_fr(err, "L'en-tête E2b-Sandbox-Id doit nommer le bac à sable");
  }
  const char *tok = sbx_req_header(r, "X-Access-Token");
  if (!tok)
    tok = sbx_req_header(r, "E2B-Traffic-Access-Token");
  if (verify_token(r, tok, sid, err) < 0)
    return -1;
  /* The session id goes first; the route's own params move up one. */
  if (r->nparams >= SBX_MAX_PARAMS)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "too many route parameters");
  memmove(r->params[1], r->params[0], sizeof r->params[0] * (size_t)r->nparams);
  snprintf(r->params[0], sizeof r->params[0], "%s", sid);
  r->nparams++;
  return 0;
}

/* ---- templates ---- */

static int add_template(const char *name, const char *profile, const char *image,
                        struct sbx_error *err)
{
  if (ntemplates >= MAX_TEMPLATES)
    return sbx_err_set(err, SBX_E_INVALID, 0, "e2b_templates: %d entries at most",
                       MAX_TEMPLATES);
  struct template *t = &templates[ntemplates];
  if (!*name || !*profile || strlen(name) >= sizeof t->name ||
      strlen(profile) >= sizeof t->profile || strlen(image) >= sizeof t->image)
    return sbx_err_set(err, SBX_E_INVALID, 0, "e2b_templates: '%s' is not NAME=PROFILE[:IMAGE]",
                       name);
  for (size_t i = 0; i < ntemplates; i++) /* the operator's entry overrides */
    if (!strcmp(templates[i].name, name))
      t = &templates[i];
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->profile, sizeof t->profile, "%s", profile);
  snprintf(t->image, sizeof t->image, "%s", image);
  if (t == &templates[ntemplates])
    ntemplates++;
  return 0;
}

int sbx_e2b_configure(const char *spec, struct sbx_error *err)
{
  ntemplates = 0;
  /* The SDKs' default templates run on the default profile's image. */
  add_template("base", "@default", "", err);
  add_template("code-interpreter-v1", "@default", "", err);
  if (!spec || !*spec)
    return 0;
  _cleanup_free_ char *copy = strdup(spec);
  if (!copy)
    return sbx_err_sys(err, ENOMEM, "e2b_templates");
  char *save = NULL;
  for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq)
      return sbx_err_set(err, SBX_E_INVALID, 0,
                         "e2b_templates: '%s' is not NAME=PROFILE[:IMAGE]", tok);
    *eq = '\0';
    char *prof = eq + 1, *colon = strchr(prof, ':');
    if (colon)
      *colon = '\0';
    if (add_template(tok, prof, colon ? colon + 1 : "", err) < 0)
      return -1;
  }
  return 0;
}

int sbx_e2b_template(const char *name, char profile[64], char image[512], struct sbx_error *err)
{
  if (ntemplates == 0)
    sbx_e2b_configure(NULL, err);
  for (size_t i = 0; i < ntemplates; i++) {
    if (strcmp(templates[i].name, name) != 0)
      continue;
    snprintf(profile, 64, "%s", templates[i].profile);
    snprintf(image, 512, "%s", templates[i].image);
    return 0;
  }
  sbx_err_set(err, SBX_E_NOT_FOUND, 0,
              "template '%.100s' not found: sandboxd maps templates to profiles with the "
              "e2b_templates setting (built in: base, code-interpreter-v1)",
              name);
  return sbx_err_fr(err, "Modèle « %.100s » introuvable (réglage e2b_templates)", name);
}

/* ---- Connect requests ---- */

json_t *sbx_e2b_connect_msg(struct sbx_req *r, struct sbx_error *err)
{
  const char *body = r->body ? r->body : "";
  size_t len = r->body_len;
  if (sbx_e2b_connect_streaming(r)) {
    uint32_t be;
    if (len < 5 || (body[0] & 0x01)) {
      sbx_err_field(err, "body", "a server-streaming call takes one uncompressed envelope");
      sbx_err_fr(err, "Un appel en flux prend une seule enveloppe non compressée");
      return NULL;
    }
    memcpy(&be, body + 1, 4);
    if ((size_t)ntohl(be) != len - 5) {
      sbx_err_field(err, "body", "the envelope's length does not match the body");
      sbx_err_fr(err, "La longueur de l'enveloppe ne correspond pas au corps");
      return NULL;
    }
    body += 5;
    len -= 5;
  }
  json_error_t je;
  json_t *j = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &je) : json_object();
  if (!json_is_object(j)) {
    json_decref(j);
    sbx_err_field(err, "body", "the message must be a JSON object");
    sbx_err_fr(err, "Le message doit être un objet JSON");
    return NULL;
  }
  return j;
}

unsigned long sbx_e2b_deadline_ms(struct sbx_req *r)
{
  const char *v = sbx_req_header(r, "Connect-Timeout-Ms");
  if (!v)
    return 0;
  char *end;
  unsigned long ms = strtoul(v, &end, 10);
  return *v && !*end ? ms : 0;
}

json_t *sbx_e2b_b64(const void *data, size_t len)
{
  size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
  char *b = malloc(n);
  if (!b)
    return NULL;
  sodium_bin2base64(b, n, data, len, sodium_base64_VARIANT_ORIGINAL);
  json_t *s = json_string(b);
  free(b);
  return s;
}

int sbx_e2b_unb64(json_t *s, char **out, size_t *len)
{
  const char *t = json_string_value(s);
  if (!t)
    return -1;
  size_t tl = strlen(t), cap = tl / 4 * 3 + 3;
  char *b = malloc(cap + 1);
  if (!b)
    return -1;
  /* protobuf JSON accepts both alphabets, padded or not */
  int variant =
      strpbrk(t, "-_") ? sodium_base64_VARIANT_URLSAFE : sodium_base64_VARIANT_ORIGINAL;
  if (!strchr(t, '='))
    variant = variant == sodium_base64_VARIANT_URLSAFE
                  ? sodium_base64_VARIANT_URLSAFE_NO_PADDING
                  : sodium_base64_VARIANT_ORIGINAL_NO_PADDING;
  if (sodium_base642bin((unsigned char *)b, cap, t, tl, NULL, len, NULL, variant) != 0) {
    free(b);
    return -1;
  }
  *out = b;
  return 0;
}

void sbx_e2b_origin(struct sbx_req *r, char *buf, size_t len)
{
  const char *host = sbx_req_header(r, "Host");
  bool sane = host && *host && strlen(host) < 256 && !strpbrk(host, "/\\ \"'<>@");
  snprintf(buf, len, "http://%s", sane ? host : "127.0.0.1");
}
