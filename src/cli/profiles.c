/* profiles.c — `sbx profiles`: which isolation profiles this daemon offers
 * and whether each is usable here, and why not (GET /v1/sandbox/profiles). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "Usage: sbx profiles [--json]\n"
    "\n"
    "Lists the isolation profiles as a table NAME DRIVER AVAILABLE REASON, or\n"
    "the daemon's answer as JSON with --json (which also says which profile is\n"
    "the default, and each one's capabilities and limits).  A profile that is\n"
    "not available fails requests with runtime_unavailable; REASON says why.\n"
    "\n"
    "Options:\n"
    "      --json     print {\"profiles\":[…]} as returned by sandboxd\n"
    "      --url URL, --api-key KEY   see `sbx --help`\n"
    "  -h, --help     show this help\n";

enum { OPT_JSON = SBX_OPT_VERB_BASE };

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

static json_t *profile_row(json_t *p)
{
  static const char *const keys[] = {"name", "driver", "available", "reason"};
  char buf[64];
  json_t *row = json_array();
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    json_array_append_new(row, json_string(sbx_cli_cell(p, keys[k], buf, sizeof buf)));
  return row;
}

static void print_table(json_t *profiles)
{
  static const char *const headers[] = {"NAME", "DRIVER", "AVAILABLE", "REASON"};
  json_t *rows = json_array(), *p;
  size_t i;
  json_array_foreach(profiles, i, p)
  json_array_append_new(rows, profile_row(p));
  sbx_cli_table(headers, 4, rows);
  json_decref(rows);
}

static int list(struct sbx_cli *cli, bool as_json)
{
  struct sbx_error err = {0};
  json_t *resp = NULL;
  if (sbx_http_json(cli->http, "GET", "/v1/sandbox/profiles", NULL, &resp, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  json_t *profiles = json_object_get(resp, "profiles");
  int rc = SBX_EXIT_OK;
  if (as_json) {
    sbx_cli_print_json(resp);
  } else if (json_is_array(profiles)) {
    print_table(profiles);
  } else {
    fputs("sbx: sandboxd's answer has no 'profiles' list\n", stderr);
    rc = SBX_EXIT_API;
  }
  json_decref(resp);
  return rc;
}

int sbx_cmd_profiles(struct sbx_cli *cli, int argc, char **argv)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, "sbx profiles", &a);
  bool as_json = false;
  int c, exit_now = -1;
  while ((c = sbx_cli_getopt(&a, "+h", longopts)) != -1) {
    if (c == OPT_JSON)
      as_json = true;
    else if (c == SBX_OPT_POSITIONAL)
      return sbx_cli_usage("profiles", "unexpected argument '%s'", optarg);
    else if (!sbx_cli_common_opt(cli, c, help, &exit_now))
      return sbx_cli_usage("profiles", "bad option");
    if (exit_now >= 0)
      return exit_now;
  }
  if (a.nrest)
    return sbx_cli_usage("profiles", "unexpected argument '%s'", a.rest[0]);
  return sbx_cli_http(cli) ? list(cli, as_json) : SBX_EXIT_API;
}
