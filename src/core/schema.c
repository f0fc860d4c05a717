/* schema.c — see schema.h. */
#include "core/schema.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quantity.h"
#include "net/net.h"

/* Error helpers: one English and one French sentence per kind of fault
 * (common/err.h). */
#define bad_type sbx_err_bad_type
#define bad_value sbx_err_bad_value

void sbx_strv_free(char **v)
{
  if (!v)
    return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

size_t sbx_strv_len(char *const *v)
{
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

void sbx_exec_spec_free(struct sbx_exec_spec *s)
{
  sbx_strv_free(s->argv);
  sbx_strv_free(s->env);
  free(s->cwd);
  free(s->stdin_data);
  free(s->code);
  memset(s, 0, sizeof *s);
}

int sbx_schema_only(json_t *body, const char *prefix, const char *const *allowed,
                    struct sbx_error *err)
{
  const char *key;
  json_t *v;
  json_object_foreach(body, key, v)
  {
    bool ok = false;
    for (const char *const *a = allowed; *a && !ok; a++)
      ok = strcmp(*a, key) == 0;
    if (!ok) {
      char field[64];
      snprintf(field, sizeof field, "%s%s", prefix, key);
      return bad_value(err, field, "unknown field", "champ inconnu");
    }
  }
  return 0;
}

/* A JSON string without embedded NUL bytes (they cannot reach execve). */
static const char *plain_string(json_t *v, size_t max, const char *field, struct sbx_error *err)
{
  if (!json_is_string(v)) {
    bad_type(err, field, "a string", "une chaîne");
    return NULL;
  }
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (strlen(s) != n) {
    bad_value(err, field, "must not contain NUL bytes", "ne doit pas contenir d'octet NUL");
    return NULL;
  }
  if (n > max) {
    char en[96], fr[96];
    snprintf(en, sizeof en, "longer than %zu bytes", max);
    snprintf(fr, sizeof fr, "plus long que %zu octets", max);
    bad_value(err, field, en, fr);
    return NULL;
  }
  return s;
}

static char **strv_new(size_t n) { return calloc(n + 1, sizeof(char *)); }

static int parse_command(json_t *cmd, char ***out, struct sbx_error *err)
{
  if (!json_is_array(cmd))
    return bad_type(err, "command", "an array of strings", "un tableau de chaînes");
  size_t n = json_array_size(cmd);
  if (n == 0)
    return bad_value(err, "command", "must not be empty", "ne doit pas être vide");
  if (n > 4096)
    return bad_value(err, "command", "too many arguments (max 4096)",
                     "trop d'arguments (4096 au plus)");
  char **argv = strv_new(n);
  if (!argv)
    return sbx_err_sys(err, ENOMEM, "command");
  for (size_t i = 0; i < n; i++) {
    char field[32];
    snprintf(field, sizeof field, "command[%zu]", i);
    const char *s = plain_string(json_array_get(cmd, i), 128 * 1024, field, err);
    if (!s || !(argv[i] = strdup(s))) {
      sbx_strv_free(argv);
      return s ? sbx_err_sys(err, ENOMEM, "command") : -1;
    }
  }
  if (argv[0][0] == '\0') {
    sbx_strv_free(argv);
    return bad_value(err, "command[0]", "the program name must not be empty",
                     "le nom du programme ne doit pas être vide");
  }
  *out = argv;
  return 0;
}

static const struct {
  const char *language;
  const char *interpreter;
  const char *inline_flag;
  const char *ext;
} languages[] = {
    {"python", "python3", "-c", ".py"},
    {"node", "node", "-e", ".js"},
    {"bash", "bash", "-c", ".sh"},
    /* The same as node: the wasm profile runs it on QuickJS, the others on Node. */
    {"javascript", "node", "-e", ".js"},
};

const char *sbx_schema_interpreter(const char *language)
{
  for (size_t i = 0; i < sizeof languages / sizeof languages[0]; i++)
    if (strcmp(languages[i].language, language) == 0)
      return languages[i].interpreter;
  return NULL;
}

static int parse_language(json_t *lang, json_t *code, struct sbx_exec_spec *out,
                          struct sbx_error *err)
{
  const char *l = plain_string(lang, 32, "language", err);
  if (!l)
    return -1;
  size_t i = 0, nl = sizeof languages / sizeof languages[0];
  while (i < nl && strcmp(languages[i].language, l) != 0)
    i++;
  if (i == nl)
    return bad_value(err, "language", "must be one of python, node, bash, javascript",
                     "doit être python, node, bash ou javascript");
  if (!code)
    return bad_value(err, "code", "is required with language", "est requis avec language");
  const char *c = plain_string(code, 16u << 20, "code", err);
  if (!c)
    return -1;
  char **argv = strv_new(3);
  if (!argv)
    return sbx_err_sys(err, ENOMEM, "code");
  argv[0] = strdup(languages[i].interpreter);
  if (strlen(c) <= SBX_INLINE_CODE_MAX) {
    argv[1] = strdup(languages[i].inline_flag);
    argv[2] = strdup(c);
  } else {
    /* core writes the code to a file and appends its path as argv[1] */
    out->code = strdup(c);
    out->code_ext = languages[i].ext;
  }
  out->argv = argv;
  out->language = languages[i].language;
  if (!argv[0] || (!out->code && (!argv[1] || !argv[2])))
    return sbx_err_sys(err, ENOMEM, "code");
  return 0;
}

int sbx_schema_env(json_t *env, const char *field, char ***out, struct sbx_error *err)
{
  *out = NULL;
  if (!env || json_is_null(env))
    return 0;
  if (!json_is_object(env))
    return bad_type(err, field, "an object of strings", "un objet de chaînes");
  size_t n = json_object_size(env);
  if (n > 256)
    return bad_value(err, field, "too many variables (max 256)",
                     "trop de variables (256 au plus)");
  char **v = strv_new(n);
  if (!v)
    return sbx_err_sys(err, ENOMEM, "env");
  size_t i = 0;
  const char *key;
  json_t *val;
  json_object_foreach(env, key, val)
  {
    char f[192];
    snprintf(f, sizeof f, "%s.%.128s", field, key);
    bool ok = key[0] && strlen(key) <= 128 && (isalpha((unsigned char)key[0]) || key[0] == '_');
    for (const char *k = key; ok && *k; k++)
      ok = isalnum((unsigned char)*k) || *k == '_';
    if (!ok) {
      sbx_strv_free(v);
      return bad_value(err, f, "a variable name is letters, digits and _",
                       "un nom de variable est fait de lettres, chiffres et _");
    }
    const char *s = plain_string(val, 32 * 1024, f, err);
    if (!s) {
      sbx_strv_free(v);
      return -1;
    }
    if (asprintf(&v[i++], "%s=%s", key, s) < 0) {
      v[i - 1] = NULL;
      sbx_strv_free(v);
      return sbx_err_sys(err, ENOMEM, "env");
    }
  }
  *out = v;
  return 0;
}

int sbx_schema_path(const char *path, const char *field, struct sbx_error *err)
{
  if (!path || !*path)
    return bad_value(err, field, "a path is required", "un chemin est requis");
  if (strlen(path) >= 4096)
    return bad_value(err, field, "path too long", "chemin trop long");
  return 0;
}

static int parse_timeout(json_t *v, uint64_t max, const char *field, double *out,
                         struct sbx_error *err)
{
  if (!json_is_number(v))
    return bad_type(err, field, "a number of seconds", "un nombre de secondes");
  double t = json_number_value(v);
  if (!(t > 0) || !isfinite(t))
    return bad_value(err, field, "must be greater than 0", "doit être supérieur à 0");
  if (t > (double)max) {
    char en[96], fr[96];
    snprintf(en, sizeof en, "exceeds the profile's maximum of %llu s", (unsigned long long)max);
    snprintf(fr, sizeof fr, "dépasse le maximum du profil (%llu s)", (unsigned long long)max);
    return bad_value(err, field, en, fr);
  }
  *out = t;
  return 0;
}

/* pty: {cols, rows}; only for a background process, whose
 * stdin can be fed after it started. */
static int pty_dim(json_t *pty, const char *key, unsigned dflt, unsigned *out,
                   struct sbx_error *err)
{
  json_t *v = json_object_get(pty, key);
  *out = dflt;
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096)
    return bad_value(err, !strcmp(key, "cols") ? "pty.cols" : "pty.rows",
                     "must be an integer from 1 to 4096", "doit être un entier de 1 à 4096");
  *out = (unsigned)json_integer_value(v);
  return 0;
}

static int parse_pty(json_t *v, struct sbx_exec_spec *out, struct sbx_error *err)
{
  static const char *const allowed[] = {"cols", "rows", NULL};
  if (!json_is_object(v))
    return bad_type(err, "pty", "an object {cols, rows}", "un objet {cols, rows}");
  if (sbx_schema_only(v, "pty.", allowed, err) < 0 ||
      pty_dim(v, "cols", 80, &out->pty_cols, err) < 0 ||
      pty_dim(v, "rows", 24, &out->pty_rows, err) < 0)
    return -1;
  if (!out->background)
    return bad_value(err, "pty",
                     "pty needs background:true (a terminal is a background "
                     "process: drive it through /processes/{pid})",
                     "pty exige background:true (un terminal est un processus en "
                     "arrière-plan)");
  out->pty = true;
  return 0;
}

int sbx_schema_exec(json_t *body, uint64_t max_timeout_s, bool allow_background,
                    struct sbx_exec_spec *out, struct sbx_error *err)
{
  return sbx_schema_exec_ex(body, max_timeout_s, allow_background, false, out, err);
}

/* What runs: command, or language+code (or neither, when allowed). */
static int parse_program(json_t *body, bool allow_no_command, struct sbx_exec_spec *out,
                         struct sbx_error *err)
{
  json_t *cmd = json_object_get(body, "command"), *lang = json_object_get(body, "language");
  json_t *code = json_object_get(body, "code");
  if (cmd && lang)
    return bad_value(err, "command", "give either command or language+code, not both",
                     "donner command ou language+code, pas les deux");
  if (cmd)
    return code ? bad_value(err, "code", "code goes with language, not with command",
                            "code va avec language, pas avec command")
                : parse_command(cmd, &out->argv, err);
  if (lang)
    return parse_language(lang, code, out, err);
  if (allow_no_command)
    return code ? bad_value(err, "code", "code goes with language", "code va avec language") : 0;
  return bad_value(err, "command", "command or language+code is required",
                   "command ou language+code est requis");
}

/* -1 with err untouched when out of memory (the caller says so). */
static int parse_stdin(json_t *v, struct sbx_exec_spec *out, struct sbx_error *err)
{
  if (!json_is_string(v))
    return bad_type(err, "stdin", "a string", "une chaîne");
  out->stdin_len = json_string_length(v);
  out->stdin_data = malloc(out->stdin_len + 1);
  if (!out->stdin_data)
    return -1;
  memcpy(out->stdin_data, json_string_value(v), out->stdin_len + 1);
  return 0;
}

/* -1 with err untouched when out of memory (the caller says so). */
static int parse_cwd(json_t *v, struct sbx_exec_spec *out, struct sbx_error *err)
{
  const char *cwd = plain_string(v, 4095, "cwd", err);
  if (!cwd || sbx_schema_path(cwd, "cwd", err) < 0 || !(out->cwd = strdup(cwd)))
    return -1;
  return 0;
}

static int parse_background(json_t *v, bool allow_background, struct sbx_exec_spec *out,
                            struct sbx_error *err)
{
  if (!json_is_boolean(v))
    return bad_type(err, "background", "a boolean", "un booléen");
  out->background = json_is_true(v);
  if (out->background && !allow_background)
    return bad_value(err, "background", "background processes are not available in this version",
                     "les processus en arrière-plan ne sont pas disponibles dans cette version");
  return 0;
}

/* body's member key, NULL when absent or null. */
static json_t *member(json_t *body, const char *key)
{
  json_t *v = json_object_get(body, key);
  return v && !json_is_null(v) ? v : NULL;
}

int sbx_schema_exec_ex(json_t *body, uint64_t max_timeout_s, bool allow_background,
                       bool allow_no_command, struct sbx_exec_spec *out, struct sbx_error *err)
{
  memset(out, 0, sizeof *out);
  json_t *v;
  if (parse_program(body, allow_no_command, out, err) < 0)
    goto fail;
  if ((v = member(body, "stdin")) && parse_stdin(v, out, err) < 0)
    goto fail;
  if (sbx_schema_env(json_object_get(body, "env"), "env", &out->env, err) < 0)
    goto fail;
  if ((v = member(body, "cwd")) && parse_cwd(v, out, err) < 0)
    goto fail;
  if ((v = member(body, "timeout_s")) &&
      parse_timeout(v, max_timeout_s, "timeout_s", &out->timeout_s, err) < 0)
    goto fail;
  if ((v = member(body, "background")) && parse_background(v, allow_background, out, err) < 0)
    goto fail;
  if ((v = member(body, "pty")) && parse_pty(v, out, err) < 0)
    goto fail;
  return 0;
fail:
  if (err && err->code == SBX_E_NONE)
    sbx_err_sys(err, ENOMEM, "exec request");
  sbx_exec_spec_free(out);
  return -1;
}

/* One limit: parse, check against the ceiling, store. */
static int limit_bytes(json_t *v, const char *field, uint64_t ceiling, uint64_t *out,
                       struct sbx_error *err)
{
  uint64_t b;
  if (json_is_integer(v) && json_integer_value(v) > 0)
    b = (uint64_t)json_integer_value(v);
  else if (json_is_string(v)) {
    if (sbx_parse_bytes(json_string_value(v), &b) < 0)
      return bad_value(err, field, "not a quantity (examples: 256Mi, 1Gi, 1048576)",
                       "n'est pas une quantité (exemples : 256Mi, 1Gi, 1048576)");
  } else
    return bad_type(err, field, "a quantity string like \"256Mi\" or a positive integer",
                    "une quantité comme \"256Mi\" ou un entier positif");
  if (b == 0)
    return bad_value(err, field, "must be greater than 0", "doit être supérieur à 0");
  if (ceiling && b > ceiling) {
    char c[32], en[96], fr[96];
    sbx_format_bytes(ceiling, c, sizeof c);
    snprintf(en, sizeof en, "exceeds the profile's maximum of %s", c);
    snprintf(fr, sizeof fr, "dépasse le maximum du profil (%s)", c);
    return bad_value(err, field, en, fr);
  }
  *out = b;
  return 0;
}

static int limit_cpu(json_t *v, uint64_t ceiling, uint64_t *out, struct sbx_error *err)
{
  uint64_t m;
  if (json_is_string(v)) {
    if (sbx_parse_cpu_millis(json_string_value(v), &m) < 0)
      return bad_value(err, "limits.cpu", "not a CPU quantity (examples: 500m, 2, 0.5)",
                       "n'est pas une quantité de CPU (exemples : 500m, 2, 0.5)");
  } else if (json_is_number(v) && json_number_value(v) > 0 && json_number_value(v) < 1e6) {
    m = (uint64_t)llround(json_number_value(v) * 1000.0);
  } else
    return bad_type(err, "limits.cpu", "a CPU quantity like \"500m\" or a number of cores",
                    "une quantité de CPU comme \"500m\" ou un nombre de cœurs");
  if (m == 0)
    return bad_value(err, "limits.cpu", "must be at least 1m", "doit valoir au moins 1m");
  if (ceiling && m > ceiling) {
    char c[32], en[96], fr[96];
    sbx_format_cpu(ceiling, c, sizeof c);
    snprintf(en, sizeof en, "exceeds the profile's maximum of %s", c);
    snprintf(fr, sizeof fr, "dépasse le maximum du profil (%s)", c);
    return bad_value(err, "limits.cpu", en, fr);
  }
  *out = m;
  return 0;
}

static int limit_count(json_t *v, const char *field, uint64_t ceiling, uint64_t *out,
                       struct sbx_error *err)
{
  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return bad_type(err, field, "a positive integer", "un entier positif");
  uint64_t n = (uint64_t)json_integer_value(v);
  if (ceiling && n > ceiling) {
    char en[96], fr[96];
    snprintf(en, sizeof en, "exceeds the profile's maximum of %llu",
             (unsigned long long)ceiling);
    snprintf(fr, sizeof fr, "dépasse le maximum du profil (%llu)", (unsigned long long)ceiling);
    return bad_value(err, field, en, fr);
  }
  *out = n;
  return 0;
}

int sbx_schema_limits(json_t *limits, const struct sbx_profile *p, struct sbx_limits *out,
                      struct sbx_error *err)
{
  *out = p->defaults;
  out->timeout_s = p->default_timeout_s;
  if (!limits || json_is_null(limits))
    return 0;
  if (!json_is_object(limits))
    return bad_type(err, "limits", "an object", "un objet");
  static const char *const allowed[] = {"cpu",       "memory",       "disk", "pids",
                                        "timeout_s", "output_bytes", NULL};
  if (sbx_schema_only(limits, "limits.", allowed, err) < 0)
    return -1;
  json_t *v;
  if ((v = json_object_get(limits, "cpu")) &&
      limit_cpu(v, p->max.cpu_millis, &out->cpu_millis, err) < 0)
    return -1;
  if ((v = json_object_get(limits, "memory")) &&
      limit_bytes(v, "limits.memory", p->max.memory_bytes, &out->memory_bytes, err) < 0)
    return -1;
  if ((v = json_object_get(limits, "disk")) &&
      limit_bytes(v, "limits.disk", p->max.disk_bytes, &out->disk_bytes, err) < 0)
    return -1;
  if ((v = json_object_get(limits, "output_bytes")) &&
      limit_bytes(v, "limits.output_bytes", p->max.output_bytes, &out->output_bytes, err) < 0)
    return -1;
  if ((v = json_object_get(limits, "pids")) &&
      limit_count(v, "limits.pids", p->max.pids, &out->pids, err) < 0)
    return -1;
  if ((v = json_object_get(limits, "timeout_s"))) {
    double t;
    if (parse_timeout(v, p->max.timeout_s, "limits.timeout_s", &t, err) < 0)
      return -1;
    out->timeout_s = (uint64_t)ceil(t);
  }
  return 0;
}

int sbx_schema_network(json_t *net, const char *field, struct sbx_net_policy **out,
                       struct sbx_error *err)
{
  /* The net module owns the syntax (domains, wildcards, CIDRs, ports) so
   * that the daemon and its tests agree on one parser. */
  return sbx_net_policy_parse(net, field, out, err);
}

int sbx_schema_metadata(json_t *md, const char *field, struct sbx_error *err)
{
  if (!md || json_is_null(md))
    return 0;
  if (!json_is_object(md))
    return bad_type(err, field, "an object of strings", "un objet de chaînes");
  if (json_object_size(md) > 64)
    return bad_value(err, field, "at most 64 keys", "64 clés au plus");
  const char *key;
  json_t *v;
  json_object_foreach(md, key, v)
  {
    char f[192];
    snprintf(f, sizeof f, "%s.%.128s", field, key);
    if (strlen(key) == 0 || strlen(key) > 128)
      return bad_value(err, f, "keys are 1 to 128 bytes", "les clés font 1 à 128 octets");
    if (!plain_string(v, 1024, f, err))
      return -1;
  }
  return 0;
}

int sbx_schema_ttl(json_t *v, int64_t max, int64_t *out, struct sbx_error *err)
{
  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return bad_type(err, "ttl_s", "a positive integer of seconds",
                    "un nombre entier positif de secondes");
  if (json_integer_value(v) > max) {
    char en[96], fr[96];
    snprintf(en, sizeof en, "exceeds the maximum of %lld s", (long long)max);
    snprintf(fr, sizeof fr, "dépasse le maximum de %lld s", (long long)max);
    return bad_value(err, "ttl_s", en, fr);
  }
  *out = json_integer_value(v);
  return 0;
}
