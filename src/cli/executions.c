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

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"status", required_argument, NULL, SBX_OPT_SUB_STATUS},
    {"json", no_argument, NULL, SBX_OPT_SUB_JSON},
    {NULL, 0, NULL, 0},
};

static json_t *execution_row(json_t *e)
{
  static const char *const keys[] = {"id", "status", "reason", "exit_code", "created_at"};
  return sbx_cli_row(e, keys, sizeof keys / sizeof keys[0]);
}

static int do_ls(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  static const char *const headers[] = {"ID", "STATUS", "REASON", "EXIT", "CREATED"};
  _cleanup_free_ char *path = NULL;
  if (o->nargs)
    return sbx_cli_usage("executions ls", "unexpected argument '%s'", o->args[0]);
  if (o->status) {
    _cleanup_free_ char *esc = sbx_http_escape(o->status);
    if (asprintf(&path, "/v1/sandbox/executions?status=%s", esc) < 0)
      abort();
  }
  return sbx_cli_ls(cli, path ? path : "/v1/sandbox/executions", "executions", o->json, headers,
                    5, execution_row);
}

static int one(struct sbx_cli *cli, struct sbx_cli_sub_opts *o, const char *verb,
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

static int do_get(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  return one(cli, o, "executions get", "GET", "");
}

static int do_cancel(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  return one(cli, o, "executions cancel", "POST", "/cancel");
}

int sbx_cmd_executions(struct sbx_cli *cli, int argc, char **argv)
{
  static const struct sbx_cli_sub subs[] = {{"ls", "list", do_ls},
                                            {"get", "show", do_get},
                                            {"cancel", "kill", do_cancel}};
  return sbx_cli_subcommands(cli, argc, argv, "executions", help, longopts, subs,
                             sizeof subs / sizeof subs[0], "ls, get, cancel");
}
