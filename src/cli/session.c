/* session.c — `sbx session create|ls|get|rm`: long-lived sandboxes
 * (/v1/sandbox/sessions). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/cleanup.h"

static const char help[] =
    "Usage: sbx session create [--profile P] [--image I] [--ttl SECONDS]\n"
    "                          [--memory SIZE] [--cpu CPU] [--env KEY=VALUE]… [--json]\n"
    "       sbx session ls [--json]\n"
    "       sbx session get ID\n"
    "       sbx session rm ID…\n"
    "\n"
    "A session is a sandbox that lives for minutes or hours: run commands in it\n"
    "with `sbx exec`, move files with `sbx cp`.\n"
    "\n"
    "  create   create a session; prints its id (the whole object with --json)\n"
    "  ls       list your sessions: ID STATUS PROFILE CREATED EXPIRES\n"
    "           (--json prints a JSON array of session objects)\n"
    "  get      print one session as JSON\n"
    "  rm       delete sessions (every process in them is killed, their files\n"
    "           are gone); prints each id removed\n"
    "\n"
    "create options:\n"
    "  -p, --profile NAME   isolation profile (see `sbx profiles`)\n"
    "      --image IMAGE    image to run in\n"
    "      --ttl SECONDS    lifetime before the session expires\n"
    "      --memory SIZE    memory limit, e.g. 256Mi\n"
    "      --cpu CPU        CPU limit, e.g. 500m\n"
    "  -e, --env KEY=VALUE  environment for every command (repeatable)\n"
    "      --json           print the session object\n"
    "      --url URL, --api-key KEY   see `sbx --help`\n"
    "\n"
    "Exit status: 0 on success, 1 for an API or network error (rm: if any id\n"
    "failed), 2 for a usage error.\n";

enum { OPT_IMAGE = SBX_OPT_VERB_BASE, OPT_TTL, OPT_MEMORY, OPT_CPU, OPT_JSON };

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"profile", required_argument, NULL, 'p'},
    {"env", required_argument, NULL, 'e'},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"ttl", required_argument, NULL, OPT_TTL},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

struct session_opts {
  const char *profile, *image, *memory, *cpu;
  long ttl_s;
  bool json;
  json_t *env;  /* owned */
  json_t *args; /* owned: positionals */
};

/* One option; returns -1 to go on, else an exit code. */
static int take_opt(struct sbx_cli *cli, struct session_opts *o, int c, const char *what)
{
  struct sbx_error err = {0};
  int exit_now = -1;
  switch (c) {
  case SBX_OPT_POSITIONAL:
    json_array_append_new(o->args, json_string(optarg));
    return -1;
  case 'p':
    o->profile = optarg;
    return -1;
  case OPT_IMAGE:
    o->image = optarg;
    return -1;
  case OPT_JSON:
    o->json = true;
    return -1;
  case OPT_MEMORY:
    return sbx_cli_take_limit(what, optarg, &o->memory, sbx_cli_check_memory);
  case OPT_CPU:
    return sbx_cli_take_limit(what, optarg, &o->cpu, sbx_cli_check_cpu);
  case 'e':
    return sbx_cli_add_env(&o->env, optarg, &err) < 0 ? sbx_cli_usage(what, "%s", err.msg) : -1;
  case OPT_TTL:
    if (sbx_cli_parse_seconds(optarg, &o->ttl_s, &err) < 0)
      return sbx_cli_usage(what, "--ttl wants whole seconds > 0, got '%s'", optarg);
    return -1;
  default:
    if (sbx_cli_common_opt(cli, c, help, &exit_now))
      return exit_now;
    fprintf(stderr, "Try 'sbx %s --help'.\n", what);
    return SBX_EXIT_USAGE;
  }
}

static int parse(struct sbx_cli *cli, int argc, char **argv, const char *what,
                 struct session_opts *o)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, what, &a);
  int c, rc;
  while ((c = sbx_cli_getopt(&a, "+hp:e:", longopts)) != -1)
    if ((rc = take_opt(cli, o, c, what + 4)) >= 0)
      return rc;
  for (int i = 0; i < a.nrest; i++)
    json_array_append_new(o->args, json_string(a.rest[i]));
  return -1;
}

static json_t *create_body(struct session_opts *o)
{
  json_t *body = json_object();
  json_t *limits = json_object();
  if (o->profile)
    json_object_set_new(body, "profile", json_string(o->profile));
  if (o->image)
    json_object_set_new(body, "image", json_string(o->image));
  if (o->ttl_s)
    json_object_set_new(body, "ttl_s", json_integer(o->ttl_s));
  if (o->env)
    json_object_set(body, "env", o->env);
  if (o->memory)
    json_object_set_new(limits, "memory", json_string(o->memory));
  if (o->cpu)
    json_object_set_new(limits, "cpu", json_string(o->cpu));
  if (json_object_size(limits))
    json_object_set(body, "limits", limits);
  json_decref(limits);
  return body;
}

static int do_create(struct sbx_cli *cli, struct session_opts *o)
{
  if (json_array_size(o->args))
    return sbx_cli_usage("session create", "unexpected argument '%s'",
                         json_string_value(json_array_get(o->args, 0)));
  struct sbx_error err = {0};
  json_t *body = create_body(o), *sess = NULL;
  int r = sbx_http_json(cli->http, "POST", "/v1/sandbox/sessions", body, &sess, &err);
  json_decref(body);
  if (r < 0)
    return sbx_cli_fail_api(cli, &err);
  const char *id = json_string_value(json_object_get(sess, "id"));
  if (o->json)
    sbx_cli_print_json(sess);
  else if (id)
    puts(id);
  json_decref(sess);
  return o->json || id ? SBX_EXIT_OK : SBX_EXIT_API;
}

static json_t *session_row(json_t *s)
{
  static const char *const keys[] = {"id", "status", "profile", "created_at", "expires_at"};
  return sbx_cli_row(s, keys, sizeof keys / sizeof keys[0]);
}

static int do_ls(struct sbx_cli *cli, struct session_opts *o)
{
  static const char *const headers[] = {"ID", "STATUS", "PROFILE", "CREATED", "EXPIRES"};
  if (json_array_size(o->args))
    return sbx_cli_usage("session ls", "unexpected argument '%s'",
                         json_string_value(json_array_get(o->args, 0)));
  return sbx_cli_ls(cli, "/v1/sandbox/sessions", "sessions", o->json, headers, 5, session_row);
}

static char *session_path(const char *id)
{
  _cleanup_free_ char *esc = sbx_http_escape(id);
  char *path = NULL;
  if (asprintf(&path, "/v1/sandbox/sessions/%s", esc) < 0)
    abort();
  return path;
}

static int do_get(struct sbx_cli *cli, struct session_opts *o)
{
  if (json_array_size(o->args) != 1)
    return sbx_cli_usage("session get", "wants exactly one session ID");
  struct sbx_error err = {0};
  _cleanup_free_ char *path = session_path(json_string_value(json_array_get(o->args, 0)));
  json_t *sess = NULL;
  if (sbx_http_json(cli->http, "GET", path, NULL, &sess, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  sbx_cli_print_json(sess);
  json_decref(sess);
  return SBX_EXIT_OK;
}

static int do_rm(struct sbx_cli *cli, struct session_opts *o)
{
  if (json_array_size(o->args) == 0)
    return sbx_cli_usage("session rm", "wants at least one session ID");
  int rc = SBX_EXIT_OK;
  size_t i;
  json_t *v;
  json_array_foreach(o->args, i, v)
  {
    struct sbx_error err = {0};
    const char *id = json_string_value(v);
    _cleanup_free_ char *path = session_path(id);
    if (sbx_http_json(cli->http, "DELETE", path, NULL, NULL, &err) < 0) {
      sbx_err_prefix(&err, "%s", id);
      rc = sbx_cli_fail_api(cli, &err);
    } else {
      puts(id);
    }
  }
  return rc;
}

static const struct {
  const char *name, *alias;
  int (*fn)(struct sbx_cli *, struct session_opts *);
} subs[] = {
    {"create", "new", do_create},
    {"ls", "list", do_ls},
    {"get", "show", do_get},
    {"rm", "delete", do_rm},
};

int sbx_cmd_session(struct sbx_cli *cli, int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? SBX_EXIT_USAGE : SBX_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    if (strcmp(subs[i].name, argv[1]) && strcmp(subs[i].alias, argv[1]))
      continue;
    char what[32];
    snprintf(what, sizeof what, "sbx session %s", subs[i].name);
    struct session_opts o = {.args = json_array()};
    int rc = parse(cli, argc - 1, argv + 1, what, &o);
    if (rc < 0)
      rc = sbx_cli_http(cli) ? subs[i].fn(cli, &o) : SBX_EXIT_API;
    json_decref(o.env);
    json_decref(o.args);
    return rc;
  }
  return sbx_cli_usage("session", "unknown subcommand '%s' (create, ls, get, rm)", argv[1]);
}
