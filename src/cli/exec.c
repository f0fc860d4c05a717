/* exec.c — `sbx exec ID -- argv…`: a synchronous command in a session
 * (POST /v1/sandbox/sessions/{id}/exec).  Output and exit code as `sbx run`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/cleanup.h"

static const char help[] =
    "Usage: sbx exec [OPTIONS] ID -- PROGRAM [ARGS…]\n"
    "       sbx exec [OPTIONS] --lang python|node|bash ID CODE\n"
    "\n"
    "Runs a command in session ID, waits for it, prints its stdout and stderr\n"
    "verbatim and exits with its exit code.  Without '--', everything from\n"
    "PROGRAM on is the program's argv.\n"
    "\n"
    "Options:\n"
    "      --timeout SECONDS  wall-clock limit for this command\n"
    "  -e, --env KEY=VALUE    environment variable (repeatable)\n"
    "  -w, --cwd DIR          working directory inside the sandbox\n"
    "      --stdin-file FILE  feed FILE ('-' for stdin) to the program's stdin\n"
    "  -i, --interactive      feed this terminal's or pipe's stdin to the program\n"
    "                         (read to end of file first)\n"
    "  -l, --lang LANG        run CODE with python, node or bash ('-' reads CODE\n"
    "                         from stdin)\n"
    "      --json             print the result object instead of the output\n"
    "      --url URL, --api-key KEY   see `sbx --help`\n"
    "  -h, --help             show this help\n"
    "\n"
    "  -t, --tty              an interactive terminal: the command gets a pty\n"
    "                         the size of this window, this terminal goes raw\n"
    "                         (keys, Ctrl-C and Ctrl-D reach the program as\n"
    "                         typed) and follows window resizes; `sbx exec -it\n"
    "                         ID -- bash` is a shell in the sandbox\n"
    "\n"
    "Exit status: the program's own; 128+N if it died of signal N; 124 on\n"
    "timeout; 137 when killed for memory; 125 if the service failed (e.g.\n"
    "runtime_unavailable); 1 for other API or network errors (e.g. no such\n"
    "session); 2 for usage errors.\n";

enum { OPT_TIMEOUT = SBX_OPT_VERB_BASE, OPT_STDIN_FILE, OPT_JSON };

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"env", required_argument, NULL, 'e'},
    {"cwd", required_argument, NULL, 'w'},
    {"stdin-file", required_argument, NULL, OPT_STDIN_FILE},
    {"interactive", no_argument, NULL, 'i'},
    {"tty", no_argument, NULL, 't'},
    {"lang", required_argument, NULL, 'l'},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

struct exec_opts {
  const char *id, *cwd, *stdin_file, *lang, *code;
  long timeout_s;
  bool json, tty;
  json_t *env; /* owned */
  char **argv;
  int argc;
};

/* One option; returns -1 to go on, else an exit code. */
static int take_opt(struct sbx_cli *cli, void *ud, int c)
{
  struct exec_opts *o = ud;
  struct sbx_error err = {0};
  int exit_now = -1;
  switch (c) {
  case 'w':
    o->cwd = optarg;
    return -1;
  case 'l':
    o->lang = optarg;
    return -1;
  case OPT_JSON:
    o->json = true;
    return -1;
  case 'i':
  case OPT_STDIN_FILE:
    if (o->stdin_file)
      return sbx_cli_usage("exec", "give only one of --stdin-file and -i");
    o->stdin_file = c == 'i' ? "-" : optarg;
    return -1;
  case 't':
    o->tty = true;
    return -1;
  case 'e':
    return sbx_cli_add_env(&o->env, optarg, &err) < 0 ? sbx_cli_usage("exec", "%s", err.msg)
                                                      : -1;
  case OPT_TIMEOUT:
    return sbx_cli_parse_seconds(optarg, &o->timeout_s, &err) < 0
               ? sbx_cli_usage("exec", "%s", err.msg)
               : -1;
  default:
    if (sbx_cli_common_opt(cli, c, help, &exit_now))
      return exit_now;
    fputs("Try 'sbx exec --help'.\n", stderr);
    return SBX_EXIT_USAGE;
  }
}

/* ID first; then CODE with --lang, else the start of the program's argv. */
static int take_positional(struct sbx_cli_args *a, void *ud)
{
  struct exec_opts *o = ud;
  if (!o->id)
    o->id = optarg;
  else if (!o->lang)
    sbx_cli_take_tail(a, &o->argv, &o->argc);
  else if (!o->code)
    o->code = optarg;
  else
    return sbx_cli_usage("exec", "unexpected argument '%s' (give CODE once, quoted)", optarg);
  return -1;
}

static int check_tty(struct exec_opts *o)
{
  if (!o->tty)
    return -1;
  if (o->json)
    return sbx_cli_usage("exec", "-t and --json do not go together");
  if (o->stdin_file && strcmp(o->stdin_file, "-"))
    return sbx_cli_usage("exec", "-t reads the keyboard: --stdin-file does not apply");
  if (o->lang && !strcmp(o->code ? o->code : "", "-"))
    return sbx_cli_usage("exec", "-t reads the keyboard: give CODE as an argument");
  o->stdin_file = NULL; /* -i is implied: keys go to the terminal as typed */
  return -1;
}

static int check_positionals(struct sbx_cli_args *a, void *ud)
{
  struct exec_opts *o = ud;
  if (!o->id)
    return sbx_cli_usage("exec", "wants a session ID (see `sbx session ls`)");
  if (check_tty(o) >= 0)
    return SBX_EXIT_USAGE;
  return sbx_cli_take_program(a, "exec", o->lang, &o->code, o->stdin_file, &o->argv, &o->argc,
                              "give ID -- PROGRAM [ARGS…]");
}

static int parse(struct sbx_cli *cli, int argc, char **argv, struct exec_opts *o)
{
  static const struct sbx_cli_verb verb = {"sbx exec", "+hitw:e:l:",    longopts,
                                           take_opt,   take_positional, check_positionals};
  return sbx_cli_parse_verb(cli, argc, argv, &verb, o);
}

static int build_body(struct exec_opts *o, json_t *body, struct sbx_error *err)
{
  if (sbx_cli_set_program(body, o->lang, o->code, o->argv, o->argc, err) < 0)
    return -1;
  if (o->stdin_file &&
      sbx_cli_set_text_file(body, "stdin", o->stdin_file, SBX_CLI_MAX_INPUT, err) < 0)
    return -1;
  if (o->env)
    json_object_set(body, "env", o->env);
  if (o->cwd)
    json_object_set_new(body, "cwd", json_string(o->cwd));
  if (o->timeout_s)
    json_object_set_new(body, "timeout_s", json_integer(o->timeout_s));
  return 0;
}

static int execute(struct sbx_cli *cli, struct exec_opts *o)
{
  struct sbx_error err = {0};
  json_t *body = json_object(), *result = NULL;
  if (build_body(o, body, &err) < 0) {
    json_decref(body);
    return sbx_cli_usage("exec", "%s", err.msg);
  }
  if (o->tty) {
    int trc = sbx_cli_term_run(cli, o->id, body);
    json_decref(body);
    return trc;
  }
  _cleanup_free_ char *esc = sbx_http_escape(o->id);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/v1/sandbox/sessions/%s/exec", esc) < 0)
    abort();
  int r = sbx_http_json(cli->http, "POST", path, body, &result, &err);
  json_decref(body);
  if (r < 0)
    return sbx_cli_fail_call(cli, &err);
  int rc = sbx_cli_result_exit_code(result);
  if (o->json ? sbx_cli_print_json(result) < 0 : sbx_cli_print_result(result, &err) < 0)
    rc = sbx_cli_fail(&err);
  json_decref(result);
  return rc;
}

int sbx_cmd_exec(struct sbx_cli *cli, int argc, char **argv)
{
  struct exec_opts o = {0};
  int rc = parse(cli, argc, argv, &o);
  if (rc < 0)
    rc = sbx_cli_http(cli) ? execute(cli, &o) : SBX_EXIT_API;
  json_decref(o.env);
  return rc;
}
