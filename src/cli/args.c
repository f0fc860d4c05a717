/* args.c — argument helpers every verb uses: splitting at "--", the common
 * options, usage errors, K=V and quantity checks, reading local files. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/quantity.h"

void sbx_cli_split(int argc, char **argv, const char *display_name, struct sbx_cli_args *out)
{
  *out =
      (struct sbx_cli_args){.argc = argc, .argv = argv, .rest = argv + argc, .all_argc = argc};
  argv[0] = (char *)display_name; /* getopt's messages then read "sbx VERB: …" */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      out->argc = i;
      out->rest = argv + i + 1;
      out->nrest = argc - i - 1;
      out->had_dashdash = true;
      return;
    }
  }
}

int sbx_cli_getopt(struct sbx_cli_args *a, const char *optstring, const struct option *lo)
{
  int c = getopt_long(a->argc, a->argv, optstring, lo, NULL);
  if (c != -1)
    return c;
  if (optind >= a->argc)
    return -1;
  optarg = a->argv[optind++];
  return SBX_OPT_POSITIONAL;
}

void sbx_cli_take_tail(struct sbx_cli_args *a, char ***argv, int *n)
{
  int start = optind - 1;
  *argv = a->argv + start;
  *n = a->all_argc - start;
  a->had_dashdash = false;
  a->nrest = 0;
  optind = a->argc; /* nothing left for getopt */
}

int sbx_cli_common_opt(struct sbx_cli *cli, int c, const char *help, int *exit_now)
{
  switch (c) {
  case SBX_OPT_URL:
    cli->url = optarg;
    return 1;
  case SBX_OPT_API_KEY:
    cli->api_key = *optarg ? optarg : NULL;
    return 1;
  case 'h':
    fputs(help, stdout);
    *exit_now = SBX_EXIT_OK;
    return 1;
  default:
    return 0;
  }
}

int sbx_cli_usage(const char *verb, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "sbx %s: ", verb);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'sbx %s --help'.\n", verb);
  return SBX_EXIT_USAGE;
}

int sbx_cli_fail(const struct sbx_error *err)
{
  if (err->field[0])
    fprintf(stderr, "sbx: %s (field: %s)\n", err->msg, err->field);
  else
    fprintf(stderr, "sbx: %s\n", err->msg);
  return SBX_EXIT_API;
}

int sbx_cli_fail_api(struct sbx_cli *cli, const struct sbx_error *err)
{
  sbx_cli_fail(err);
  if (err->code == SBX_E_UNAUTHENTICATED && !cli->api_key)
    fputs("sbx: hint: set SANDBOXD_API_KEY or pass --api-key "
          "(`sandboxd key create --tenant NAME` prints one)\n",
          stderr);
  return SBX_EXIT_API;
}

int sbx_cli_add_env(json_t **env, const char *kv, struct sbx_error *err)
{
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return sbx_err_field(err, "env", "--env wants KEY=VALUE, got '%s'", kv);
  if (!*env && !(*env = json_object()))
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  _cleanup_free_ char *key = strndup(kv, (size_t)(eq - kv));
  json_t *val = json_string(eq + 1);
  if (!key || !val || json_object_set_new(*env, key, val) < 0)
    return sbx_err_field(err, "env", "--env %s: the value is not valid UTF-8", kv);
  return 0;
}

int sbx_cli_parse_seconds(const char *s, long *out, struct sbx_error *err)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v <= 0)
    return sbx_err_field(err, "timeout_s", "--timeout wants whole seconds > 0, got '%s'", s);
  *out = v;
  return 0;
}

int sbx_cli_check_cpu(const char *s, struct sbx_error *err)
{
  uint64_t v;
  if (sbx_parse_cpu_millis(s, &v) < 0 || v == 0)
    return sbx_err_field(err, "limits.cpu",
                         "--cpu wants a CPU quantity like 500m or 2, got '%s'", s);
  return 0;
}

int sbx_cli_check_memory(const char *s, struct sbx_error *err)
{
  uint64_t v;
  if (sbx_parse_bytes(s, &v) < 0 || v == 0)
    return sbx_err_field(err, "limits.memory",
                         "--memory wants a size like 256Mi or 1Gi, got '%s'", s);
  return 0;
}

int sbx_cli_take_limit(const char *verb, const char *arg, const char **dst,
                       int (*check)(const char *, struct sbx_error *))
{
  struct sbx_error err = {0};
  if (check(arg, &err) < 0)
    return sbx_cli_usage(verb, "%s", err.msg);
  *dst = arg;
  return -1;
}

static int read_stream(FILE *f, const char *path, size_t max, char **out, size_t *len,
                       struct sbx_error *err)
{
  _cleanup_buf_ struct sbx_buf b = SBX_BUF_INIT(max);
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (sbx_buf_append(&b, chunk, got) == 0)
      continue;
    if (errno == E2BIG)
      return sbx_err_set(err, SBX_E_TOO_LARGE, EFBIG, "%s is larger than %zu bytes", path, max);
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  }
  if (ferror(f))
    return sbx_err_sys(err, errno, "cannot read %s", path);
  if (sbx_buf_reserve(&b, 0) < 0) /* an empty file is "" too */
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  b.data[b.len] = '\0';
  *out = sbx_buf_steal(&b, len);
  return 0;
}

int sbx_cli_read_file(const char *path, size_t max, char **out, size_t *len,
                      struct sbx_error *err)
{
  if (strcmp(path, "-") == 0)
    return read_stream(stdin, "stdin", max, out, len, err);
  _cleanup_fclose_ FILE *f = fopen(path, "rbe");
  if (!f)
    return sbx_err_sys(err, errno, "cannot open %s", path);
  return read_stream(f, path, max, out, len, err);
}

int sbx_cli_text(const char *what, const char *buf, size_t len, json_t **out,
                 struct sbx_error *err)
{
  /* The API carries code and stdin as JSON strings: they must be UTF-8. */
  json_t *s = memchr(buf, '\0', len) ? NULL : json_stringn(buf, len);
  if (!s)
    return sbx_err_field(err, what, "%s must be UTF-8 text without NUL bytes", what);
  *out = s;
  return 0;
}

int sbx_cli_set_text_file(json_t *body, const char *key, const char *path, size_t max,
                          struct sbx_error *err)
{
  _cleanup_free_ char *buf = NULL;
  size_t len = 0;
  json_t *s = NULL;
  if (sbx_cli_read_file(path, max, &buf, &len, err) < 0 ||
      sbx_cli_text(key, buf, len, &s, err) < 0)
    return -1;
  json_object_set_new(body, key, s);
  return 0;
}

int sbx_cli_set_code(json_t *body, const char *code, size_t max, struct sbx_error *err)
{
  json_t *s = NULL;
  if (strcmp(code, "-") == 0)
    return sbx_cli_set_text_file(body, "code", "-", max, err);
  if (sbx_cli_text("code", code, strlen(code), &s, err) < 0)
    return -1;
  json_object_set_new(body, "code", s);
  return 0;
}

static int parse_sub(struct sbx_cli *cli, int argc, char **argv, const char *what,
                     const char *help, const struct option *longopts, struct sbx_cli_sub_opts *o)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, what, &a);
  int c, exit_now = -1;
  while ((c = sbx_cli_getopt(&a, "+h", longopts)) != -1) {
    if (c == SBX_OPT_SUB_STATUS)
      o->status = optarg;
    else if (c == SBX_OPT_SUB_JSON)
      o->json = true;
    else if (c == SBX_OPT_POSITIONAL && o->nargs < 2)
      o->args[o->nargs++] = optarg;
    else if (c == SBX_OPT_POSITIONAL)
      return sbx_cli_usage(what + 4, "too many arguments");
    else if (!sbx_cli_common_opt(cli, c, help, &exit_now))
      return sbx_cli_usage(what + 4, "bad option");
    if (exit_now >= 0)
      return exit_now;
  }
  for (int i = 0; i < a.nrest; i++) {
    if (o->nargs == 2)
      return sbx_cli_usage(what + 4, "too many arguments");
    o->args[o->nargs++] = a.rest[i];
  }
  return -1;
}

int sbx_cli_subcommands(struct sbx_cli *cli, int argc, char **argv, const char *verb,
                        const char *help, const struct option *longopts,
                        const struct sbx_cli_sub *subs, size_t n, const char *names)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? SBX_EXIT_USAGE : SBX_EXIT_OK;
  }
  for (size_t i = 0; i < n; i++) {
    if (strcmp(subs[i].name, argv[1]) && strcmp(subs[i].alias, argv[1]))
      continue;
    char what[64];
    snprintf(what, sizeof what, "sbx %s %s", verb, subs[i].name);
    struct sbx_cli_sub_opts o = {0};
    int rc = parse_sub(cli, argc - 1, argv + 1, what, help, longopts, &o);
    if (rc < 0)
      rc = sbx_cli_http(cli) ? subs[i].fn(cli, &o) : SBX_EXIT_API;
    return rc;
  }
  return sbx_cli_usage(verb, "unknown subcommand '%s' (%s)", argv[1], names);
}

int sbx_cli_take_program(struct sbx_cli_args *a, const char *verb, const char *lang,
                         const char **code, const char *stdin_file, char ***argv, int *argc,
                         const char *nothing)
{
  if (lang) {
    if (a->nrest > 1 || (a->nrest == 1 && *code))
      return sbx_cli_usage(verb, "--lang takes exactly one CODE argument");
    if (a->nrest == 1)
      *code = a->rest[0];
    if (!*code)
      return sbx_cli_usage(verb, "--lang %s needs CODE (or '-' to read it from stdin)", lang);
    if (!strcmp(*code, "-") && stdin_file && !strcmp(stdin_file, "-"))
      return sbx_cli_usage(verb, "CODE and --stdin-file cannot both read stdin");
    return -1;
  }
  if (a->had_dashdash) {
    *argv = a->rest;
    *argc = a->nrest;
  }
  if (*argc == 0)
    return sbx_cli_usage(verb, "nothing to run: %s", nothing);
  return -1;
}

int sbx_cli_parse_verb(struct sbx_cli *cli, int argc, char **argv, const struct sbx_cli_verb *v,
                       void *o)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, v->display_name, &a);
  int c, rc;
  while ((c = sbx_cli_getopt(&a, v->optstring, v->longopts)) != -1) {
    rc = c == SBX_OPT_POSITIONAL ? v->positional(&a, o) : v->opt(cli, o, c);
    if (rc >= 0)
      return rc;
  }
  return v->check(&a, o);
}

int sbx_cli_set_program(json_t *body, const char *lang, const char *code, char **argv, int argc,
                        struct sbx_error *err)
{
  if (lang) {
    json_object_set_new(body, "language", json_string(lang));
    return sbx_cli_set_code(body, code, SBX_CLI_MAX_INPUT, err);
  }
  json_t *cmd = json_array();
  json_object_set_new(body, "command", cmd);
  for (int i = 0; i < argc; i++)
    if (json_array_append_new(cmd, json_string(argv[i])) < 0)
      return sbx_err_field(err, "command", "argument %d is not valid UTF-8", i);
  return 0;
}
