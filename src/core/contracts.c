/* contracts.c — the named JSON Schema contracts (GET /v1/contracts,
 * POST /v1/contracts/{name}/validate): the embedded schemas, compiled once
 * through core/jsonschema.h, and the checks a schema cannot say (a
 * tool-manifest's input_schema must itself be a usable draft-07 schema; its
 * sandbox_profile must name a profile this daemon offers). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "core/contracts.h"
#include "core/core.h"
#include "core/jsonschema.h"

#define MAX_CONTRACTS 8

static pthread_once_t compiled_once = PTHREAD_ONCE_INIT;
static struct sbx_jschema *compiled[MAX_CONTRACTS]; /* by index in sbx_contracts */
static struct sbx_jschema *draft07;
static struct sbx_error compile_err;

static struct sbx_jschema *compile_text(const char *text, size_t len, struct sbx_error *err)
{
  struct sbx_jdoc *d = sbx_jdoc_parse(text, len, err);
  if (!d)
    return NULL;
  struct sbx_jschema *s = sbx_jschema_compile(d, "", err);
  sbx_jdoc_free(d);
  return s;
}

/* The embedded schemas are ours and checked by the unit test, so a
 * failure here is a build defect; it is reported (500) rather than fatal. */
static void compile_all(void)
{
  draft07 = compile_text(sbx_contract_draft07, strlen(sbx_contract_draft07), &compile_err);
  for (size_t i = 0; i < sbx_ncontracts && i < MAX_CONTRACTS && draft07; i++)
    if (!(compiled[i] = compile_text(sbx_contracts[i].text, sbx_contracts[i].len, &compile_err)))
      sbx_err_prefix(&compile_err, "contract %s", sbx_contracts[i].name);
}

static int find(const char *name, struct sbx_error *err)
{
  for (size_t i = 0; i < sbx_ncontracts && i < MAX_CONTRACTS; i++)
    if (strcmp(sbx_contracts[i].name, name) == 0)
      return (int)i;
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "no contract named '%s' (GET /v1/contracts lists them)",
              name);
  return sbx_err_fr(err, "Aucun contrat nommé « %s » (GET /v1/contracts les liste)", name);
}

json_t *sbx_core_contract_names(void)
{
  json_t *arr = json_array();
  for (size_t i = 0; i < sbx_ncontracts; i++)
    json_array_append_new(arr, json_string(sbx_contracts[i].name));
  return arr;
}

int sbx_core_contract_get(const char *name, const char **text, size_t *len,
                          struct sbx_error *err)
{
  int i = find(name, err);
  if (i < 0)
    return -1;
  *text = sbx_contracts[i].text;
  *len = sbx_contracts[i].len;
  return 0;
}

static void add_violation(void *ctx, const char *path, const char *en, const char *fr)
{
  json_array_append_new((json_t *)ctx, json_pack("{s:s, s:{s:s, s:s}}", "path", path,
                                                 "message_i18n", "en", en, "fr", fr));
}

/* What the tool-manifest schema cannot say. */
static int tool_manifest_extra(struct sbx_core *core, const struct sbx_jdoc *d,
                               json_t *violations, struct sbx_error *err)
{
  static const char input[] = "/spec/input_schema";
  if (sbx_jdoc_is_object(d, input)) {
    if (sbx_jschema_validate(draft07, d, input, add_violation, violations, err) < 0)
      return -1;
    if (sbx_jschema_check_schema(d, input, add_violation, violations, err) < 0)
      return -1;
  }
  char profile[256];
  if (sbx_jdoc_string(d, "/spec/sandbox_profile", profile, sizeof profile) == 0 &&
      !sbx_profile_find(sbx_core_profiles(core), profile, NULL)) {
    char en[400], fr[400];
    snprintf(en, sizeof en,
             "profile '%s' is not offered by this daemon (GET /v1/sandbox/profiles lists them)",
             profile);
    snprintf(
        fr, sizeof fr,
        "le profil « %s » n'est pas proposé par ce démon (GET /v1/sandbox/profiles les liste)",
        profile);
    add_violation(violations, "/spec/sandbox_profile", en, fr);
  }
  return 0;
}

json_t *sbx_core_contract_validate(struct sbx_core *core, const char *name, const char *body,
                                   size_t len, struct sbx_error *err)
{
  int i = find(name, err);
  if (i < 0)
    return NULL;
  pthread_once(&compiled_once, compile_all);
  if (!compiled[i]) {
    *err = compile_err;
    return NULL;
  }
  struct sbx_jdoc *d = sbx_jdoc_parse(body, len, err);
  if (!d)
    return NULL;
  _cleanup_json_ json_t *violations = json_array();
  int rc = sbx_jschema_validate(compiled[i], d, "", add_violation, violations, err);
  if (rc >= 0 && strcmp(name, "tool-manifest") == 0)
    rc = tool_manifest_extra(core, d, violations, err);
  sbx_jdoc_free(d);
  if (rc < 0)
    return NULL;
  return json_pack("{s:b, s:O}", "valid", json_array_size(violations) == 0, "violations",
                   violations);
}
