/* profiles.c — `sbx profiles`: which isolation profiles this daemon offers
 * and whether each is usable here (or still probing), and why not, with
 * each limit's default and maximum (GET /v1/sandbox/profiles). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "Usage: sbx profiles [--json]\n"
    "\n"
    "Lists the isolation profiles as a table NAME DRIVER STATE CPU MEMORY DISK\n"
    "PIDS REASON, or the daemon's answer as JSON with --json (which also says\n"
    "which profile is the default, and each one's capabilities and limits).\n"
    "Each limit reads DEFAULT/MAX: what a request gets when it gives none, and\n"
    "the most it may ask for.  STATE is probing (the driver's start probe is\n"
    "still running), available or unavailable; a profile that is not available\n"
    "fails requests with runtime_unavailable, and REASON says why.\n"
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

/* "default/max" of one limit, e.g. "512Mi/11Gi". */
static json_t *limit_cell(json_t *p, const char *key)
{
  char d[64], m[64], cell[136];
  const char *dv = sbx_cli_cell(json_object_get(p, "limits"), key, d, sizeof d);
  const char *mv = sbx_cli_cell(json_object_get(p, "max_limits"), key, m, sizeof m);
  snprintf(cell, sizeof cell, "%s/%s", dv, mv);
  return json_string(cell);
}

static json_t *profile_row(json_t *p)
{
  static const char *const limits[] = {"cpu", "memory", "disk", "pids"};
  char buf[64];
  json_t *row = json_array();
  json_array_append_new(row, json_string(sbx_cli_cell(p, "name", buf, sizeof buf)));
  json_array_append_new(row, json_string(sbx_cli_cell(p, "driver", buf, sizeof buf)));
  /* older daemons have no state: their available says it */
  const char *st = json_string_value(json_object_get(p, "state"));
  if (!st)
    st = json_is_true(json_object_get(p, "available")) ? "available" : "unavailable";
  json_array_append_new(row, json_string(st));
  for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++)
    json_array_append_new(row, limit_cell(p, limits[k]));
  json_array_append_new(row, json_string(sbx_cli_cell(p, "reason", buf, sizeof buf)));
  return row;
}

static void print_table(json_t *profiles)
{
  static const char *const headers[] = {"NAME",   "DRIVER", "STATE", "CPU",
                                        "MEMORY", "DISK",   "PIDS",  "REASON"};
  json_t *rows = json_array(), *p;
  size_t i;
  json_array_foreach(profiles, i, p) json_array_append_new(rows, profile_row(p));
  sbx_cli_table(headers, 8, rows);
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
