/* schema.h — the one place request bodies are validated (STYLE: "the policy
 * is a schema").  Wrong types, unknown fields, unknown enum values and bad
 * quantities become SBX_E_INVALID with details.field naming the culprit
 * ("limits.memory", "command[2]", "env.FOO") in English and French.  The
 * OpenAPI document (docs/api/openapi.yaml) describes the same shapes. */
#ifndef SBX_CORE_SCHEMA_H
#define SBX_CORE_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "core/profile.h"
#include "runtime/driver.h"

/* A command to run, from either `command` or `language`+`code`. */
struct sbx_exec_spec {
  char **argv;      /* malloc'd, NULL-terminated */
  char **env;       /* "K=V" from the request, malloc'd, NULL-terminated */
  char *cwd;        /* NULL → /work */
  char *stdin_data; /* malloc'd or NULL */
  size_t stdin_len;
  double timeout_s; /* 0 → the profile's default */
  bool background;
  bool pty; /* a terminal (background only) of pty_cols × pty_rows */
  unsigned pty_cols, pty_rows;
  char *code;           /* language+code: the code, when too long to inline */
  const char *code_ext; /* ".py", ".js", ".sh" */
  const char *language; /* "python", "node", "bash" when given as language+code (static) */
};
void sbx_exec_spec_free(struct sbx_exec_spec *s);

/* Longest code passed inline as an argument; longer code is written to a
 * file in the sandbox first (the kernel caps one argument at 128 KiB). */
#define SBX_INLINE_CODE_MAX 100000

/* Fields allowed in `body`; anything else → unknown field error. */
int sbx_schema_only(json_t *body, const char *prefix, const char *const *allowed,
                    struct sbx_error *err);
/* command | language+code, stdin, env, cwd, timeout_s (ceiling: max_timeout_s). */
int sbx_schema_exec(json_t *body, uint64_t max_timeout_s, bool allow_background,
                    struct sbx_exec_spec *out, struct sbx_error *err);
/* The same; with allow_no_command, neither command nor language is fine
 * (out->argv stays NULL: an image's Entrypoint+Cmd fills it). */
/* The program a `language` runs ("python" → "python3"), NULL if none. */
const char *sbx_schema_interpreter(const char *language);
int sbx_schema_exec_ex(json_t *body, uint64_t max_timeout_s, bool allow_background,
                       bool allow_no_command, struct sbx_exec_spec *out, struct sbx_error *err);
/* limits: each given value must be ≤ the profile's ceiling; missing ones
 * take the profile's value.  out starts as the profile's limits. */
int sbx_schema_limits(json_t *limits, const struct sbx_profile *p, struct sbx_limits *out,
                      struct sbx_error *err);
/* network: {"egress":"none"} (also when absent/null) or
 * {"egress":"allowlist","allow":[…]} (DESIGN §5, net/net.h).  *out is the
 * parsed policy (free with sbx_net_policy_free); errors name the entry. */
struct sbx_net_policy;
int sbx_schema_network(json_t *net, const char *field, struct sbx_net_policy **out,
                       struct sbx_error *err);
/* metadata: object of ≤ 64 string values, keys ≤ 128 bytes, values ≤ 1 KiB. */
int sbx_schema_metadata(json_t *md, const char *field, struct sbx_error *err);
/* env: object of NAME → string.  Appends "K=V" strings to a new vector. */
int sbx_schema_env(json_t *env, const char *field, char ***out, struct sbx_error *err);
/* ttl_s: integer 1..max. */
int sbx_schema_ttl(json_t *v, int64_t max, int64_t *out, struct sbx_error *err);
/* A path inside a sandbox: absolute or relative, no NUL, ≤ 4096 bytes,
 * at most `..`-free after normalisation is NOT required (the sandbox
 * resolves it inside its root); only shape is checked here. */
int sbx_schema_path(const char *path, const char *field, struct sbx_error *err);

/* NULL-terminated string vector helpers. */
void sbx_strv_free(char **v);
size_t sbx_strv_len(char *const *v);

#endif
