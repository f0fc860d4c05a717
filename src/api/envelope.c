/* envelope.c — the one place an error becomes an HTTP status and the error
 * envelope {"error":{code,message,message_i18n:{en,fr},request_id,details}}.
 * `message` follows Accept-Language (fr or en, default en). */
#include "api/envelope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
  enum sbx_errcode code;
  int status;
  const char *name;
  const char *fr; /* sentence used when the raiser wrote no French text */
} codes[] = {
    {SBX_E_INVALID, 400, "invalid_request", "Requête invalide"},
    {SBX_E_UNAUTHENTICATED, 401, "unauthenticated", "Authentification requise"},
    {SBX_E_FORBIDDEN, 403, "forbidden", "Accès refusé"},
    {SBX_E_NOT_FOUND, 404, "not_found", "Introuvable"},
    {SBX_E_METHOD, 405, "method_not_allowed", "Méthode non autorisée"},
    {SBX_E_CONFLICT, 409, "conflict", "Conflit"},
    {SBX_E_TOO_LARGE, 413, "payload_too_large", "Contenu trop volumineux"},
    {SBX_E_QUOTA, 429, "quota_exceeded", "Quota dépassé"},
    {SBX_E_RATE, 429, "rate_limited", "Trop de requêtes"},
    {SBX_E_INTERNAL, 500, "internal", "Erreur interne"},
    {SBX_E_RUNTIME_UNAVAILABLE, 503, "runtime_unavailable",
     "Environnement d'exécution indisponible"},
    {SBX_E_NOT_READY, 503, "not_ready", "Service pas encore prêt"},
    {SBX_E_BAD_GATEWAY, 502, "bad_gateway", "Passerelle incorrecte"},
};

static int find(enum sbx_errcode code)
{
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (codes[i].code == code)
      return (int)i;
  return 9; /* internal */
}

int sbx_envelope_status(enum sbx_errcode code) { return codes[find(code)].status; }
const char *sbx_envelope_code_name(enum sbx_errcode code) { return codes[find(code)].name; }

void sbx_envelope_lang(const char *accept_language, char out[3])
{
  /* First language tag wins among those we speak; quality values are
   * honoured only in their order of appearance, which is what clients send. */
  strcpy(out, "en");
  if (!accept_language)
    return;
  const char *p = accept_language;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (strncasecmp(p, "fr", 2) == 0 &&
        (p[2] == '\0' || p[2] == '-' || p[2] == ';' || p[2] == ',' || p[2] == '_')) {
      strcpy(out, "fr");
      return;
    }
    if (strncasecmp(p, "en", 2) == 0 &&
        (p[2] == '\0' || p[2] == '-' || p[2] == ';' || p[2] == ',' || p[2] == '_'))
      return;
    p = strchr(p, ',');
    if (!p)
      return;
  }
}

void sbx_envelope_localise(json_t *violations, const char *lang)
{
  size_t i;
  json_t *v;
  const char *l = strcmp(lang, "fr") == 0 ? "fr" : "en";
  json_array_foreach(violations, i, v)
  {
    json_t *text = json_object_get(json_object_get(v, "message_i18n"), l);
    json_object_set(v, "message", text);
  }
}

json_t *sbx_envelope_build(const struct sbx_error *err, const char *lang, const char *request_id)
{
  int i = find(err->code);
  char fr[1100];
  if (err->msg_fr[0])
    snprintf(fr, sizeof fr, "%s", err->msg_fr);
  else
    snprintf(fr, sizeof fr, "%s : %s", codes[i].fr, err->msg);
  const char *en = err->msg[0] ? err->msg : codes[i].name;
  json_t *details = json_object();
  const char *colon = strchr(err->field, ':');
  if ((err->code == SBX_E_QUOTA || err->code == SBX_E_RATE) && colon) {
    /* core/quota.h: the limit breached travels as "NAME:VALUE". */
    double v = strtod(colon + 1, NULL);
    json_object_set_new(details, "limit",
                        json_stringn(err->field, (size_t)(colon - err->field)));
    json_object_set_new(details, "value",
                        v == (double)(json_int_t)v ? json_integer((json_int_t)v) : json_real(v));
  } else if (err->field[0]) {
    json_object_set_new(details, "field", json_string(err->field));
  }
  json_t *e = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:o}", "code", codes[i].name, "message",
                        strcmp(lang, "fr") == 0 ? fr : en, "message_i18n", "en", en, "fr", fr,
                        "request_id", request_id ? request_id : "", "details", details);
  if (!e) /* an invalid UTF-8 message: never fail to answer */
    e = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:{}}", "code", codes[i].name, "message",
                  codes[i].name, "message_i18n", "en", codes[i].name, "fr", codes[i].fr,
                  "request_id", request_id ? request_id : "", "details");
  return json_pack("{s:o}", "error", e);
}
