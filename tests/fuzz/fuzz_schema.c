/* fuzz_schema.c — request bodies as a tenant sends them, through the one
 * place they are validated (core/schema.c): the session create and PATCH
 * bodies (limits against each built-in profile's ceilings, network,
 * metadata, env, ttl_s, image), the exec body of a session (command or
 * language+code, stdin, env, cwd, timeout_s, background, pty) and the
 * execution body (no command: an image's own).  The field lists are the
 * handlers' (core/session.c, execution.c, process.c); the validators are
 * the real ones.  Input: a JSON body. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/profile.h"
#include "core/schema.h"
#include "fuzz.h"
#include "net/net.h"

static struct sbx_profile_set profiles;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  struct sbx_error err = {0};
  if (sbx_profiles_build(NULL, 0, NULL, &profiles, &err) < 0)
    abort();
  return 0;
}

/* Every refusal is a 400 naming the field, in English and French. */
static void refused(const struct sbx_error *err)
{
  if (err->code != SBX_E_INVALID || !err->msg[0])
    abort();
}

static void session_body(json_t *body, const struct sbx_profile *p)
{
  static const char *const create[] = {"profile", "image",    "limits", "network",
                                       "env",     "metadata", "ttl_s",  NULL};
  struct sbx_error err = {0};
  if (sbx_schema_only(body, "", create, &err) < 0)
    return refused(&err);
  char ref[SBX_IMAGE_REF_MAX];
  struct sbx_limits lim;
  struct sbx_net_policy *pol = NULL;
  char **env = NULL;
  int64_t ttl;
  if (sbx_core_image_check(p, json_object_get(body, "image"), ref, &err) < 0 ||
      sbx_schema_limits(json_object_get(body, "limits"), p, &lim, &err) < 0 ||
      sbx_schema_network(json_object_get(body, "network"), "network", &pol, &err) < 0 ||
      sbx_schema_metadata(json_object_get(body, "metadata"), "metadata", &err) < 0 ||
      sbx_schema_env(json_object_get(body, "env"), "env", &env, &err) < 0 ||
      (json_object_get(body, "ttl_s") &&
       sbx_schema_ttl(json_object_get(body, "ttl_s"), 86400, &ttl, &err) < 0))
    refused(&err);
  else if (lim.memory_bytes > p->limits.memory_bytes)
    abort(); /* a request may lower a ceiling, never raise it */
  sbx_net_policy_free(pol);
  sbx_strv_free(env);
}

static void exec_body(json_t *body, uint64_t max_timeout, bool background, bool no_command)
{
  static const char *const exec[] = {"command", "language",  "code",       "stdin", "env",
                                     "cwd",     "timeout_s", "background", "pty",   NULL};
  struct sbx_error err = {0};
  if (!no_command && sbx_schema_only(body, "", exec, &err) < 0)
    return refused(&err);
  struct sbx_exec_spec s;
  memset(&s, 0, sizeof s);
  if (sbx_schema_exec_ex(body, max_timeout, background, no_command, &s, &err) < 0) {
    refused(&err);
    return;
  }
  if ((!s.argv && !no_command) || s.timeout_s > (double)max_timeout ||
      (s.pty && (!s.pty_cols || !s.pty_rows)))
    abort();
  sbx_exec_spec_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  json_error_t je;
  json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
  if (!body)
    return 0;
  if (json_is_object(body)) { /* sbx_req_json refuses anything else */
    for (size_t i = 0; i < profiles.count; i++)
      if (profiles.items[i].driver) /* the daemon refuses to start otherwise */
        session_body(body, &profiles.items[i]);
    exec_body(body, 60, false, false);
    exec_body(body, 3600, true, false);
    exec_body(body, 60, false, true);
  }
  json_decref(body);
  return 0;
}
