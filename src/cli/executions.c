/* executions.c — `sbx executions ls|get|cancel`: one-shot executions
 * after the fact (/v1/sandbox/executions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/cleanup.h"

static const char help[] =
    "Usage: sbx executions ls [--status STATUS] [--json]\n"
    "       sbx executions get ID\n"
    "       sbx executions cancel ID\n"
    "\n"
    "  ls       list your executions: ID STATUS REASON EXIT CREATED\n"
    "           (--json prints a JSON array of execution objects);\n"
    "           --status keeps one of queued, running, succeeded, failed,\n"
    "           timeout, oom_killed, killed, error\n"
    "  get      print one execution as JSON\n"
    "  cancel   cancel a queued or running execution; prints its id\n"
    "\n"
    "Options: --url URL, --api-key KEY (see `sbx --help`), -h/--help.\n"
    "Exit status: 0 on success, 1 for an API or network error, 2 for a usage\n"
    "error.\n";

enum { OPT_STATUS = SBX_OPT_VERB_BASE, OPT_JSON };

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"status", required_argument, NULL, OPT_STATUS},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

struct executions_opts {
  const char *status;
  bool json;
  const char *args[2];
  int nargs;
};

static json_t *execution_row(json_t *e)
{
  static const char *const keys[] = {"id", "status", "reason", "exit_code", "created_at"};
  char buf[64];
  json_t *row = json_array();
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    json_array_append_new(row, json_string(sbx_cli_cell(e, keys[k], buf, sizeof buf)));
  return row;
}

static int do_ls(struct sbx_cli *cli, struct executions_opts *o)
{
  static const char *const headers[] = {"ID", "STATUS", "REASON", "EXIT", "CREATED"};
  struct sbx_error err = {0};
  _cleanup_free_ char *path = NULL;
  if (o->nargs)
    return sbx_cli_usage("executions ls", "unexpected argument '%s'", o->args[0]);
  if (o->status) {
    _cleanup_free_ char *esc = sbx_http_escape(o->status);
    if (asprintf(&path, "/v1/sandbox/executions?status=%s", esc) < 0)
      abort();
  }
  json_t *all = NULL;
  if (sbx_cli_list_all(cli, path ? path : "/v1/sandbox/executions", "executions", &all, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  if (o->json) {
    sbx_cli_print_json(all);
  } else {
    json_t *rows = json_array(), *e;
    size_t i;
    json_array_foreach(all, i, e) json_array_append_new(rows, execution_row(e));
    sbx_cli_table(headers, 5, rows);
    json_decref(rows);
  }
  json_decref(all);
  return SBX_EXIT_OK;
}

static int one(struct sbx_cli *cli, struct executions_opts *o, const char *verb,
               const char *method, const char *suffix)
{
  if (o->nargs != 1)
    return sbx_cli_usage(verb, "wants exactly one execution ID");
  struct sbx_error err = {0};
  _cleanup_free_ char *esc = sbx_http_escape(o->args[0]);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/v1/sandbox/executions/%s%s", esc, suffix) < 0)
    abort();
  json_t *resp = NULL;
  if (sbx_http_json(cli->http, method, path, NULL, &resp, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  if (!strcmp(method, "GET"))
    sbx_cli_print_json(resp);
  else
    puts(o->args[0]);
  json_decref(resp);
  return SBX_EXIT_OK;
}

static int do_get(struct sbx_cli *cli, struct executions_opts *o)
{
  return one(cli, o, "executions get", "GET", "");
}

static int do_cancel(struct sbx_cli *cli, struct executions_opts *o)
{
  return one(cli, o, "executions cancel", "POST", "/cancel");
}

static int parse(struct sbx_cli *cli, int argc, char **argv, const char *what,
                 struct executions_opts *o)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, what, &a);
  int c, exit_now = -1;
  while ((c = sbx_cli_getopt(&a, "+h", longopts)) != -1) {
    if (c == OPT_STATUS)
      o->status = optarg;
    else if (c == OPT_JSON)
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

int sbx_cmd_executions(struct sbx_cli *cli, int argc, char **argv)
{
  static const struct {
    const char *name, *alias;
    int (*fn)(struct sbx_cli *, struct executions_opts *);
  } subs[] = {{"ls", "list", do_ls}, {"get", "show", do_get}, {"cancel", "kill", do_cancel}};
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? SBX_EXIT_USAGE : SBX_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    if (strcmp(subs[i].name, argv[1]) && strcmp(subs[i].alias, argv[1]))
      continue;
    char what[40];
    snprintf(what, sizeof what, "sbx executions %s", subs[i].name);
    struct executions_opts o = {0};
    int rc = parse(cli, argc - 1, argv + 1, what, &o);
    if (rc < 0)
      rc = sbx_cli_http(cli) ? subs[i].fn(cli, &o) : SBX_EXIT_API;
    return rc;
  }
  return sbx_cli_usage("executions", "unknown subcommand '%s' (ls, get, cancel)", argv[1]);
}
