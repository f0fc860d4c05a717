/* main.c — `sbx`, the sandboxd command-line client: global options, the
 * verb table, and the only exit() of the program.  It talks to the daemon
 * over HTTP only (cli/http.c); it never links the daemon's modules. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define DEFAULT_URL "http://127.0.0.1:8080"

volatile sig_atomic_t sbx_cli_interrupted;

static const char usage[] =
    "Usage: sbx [--url URL] [--api-key KEY] COMMAND [ARGS…]\n"
    "\n"
    "sbx is the command-line client of sandboxd: it runs untrusted code in\n"
    "isolated sandboxes and hands back its output, files and exit status.\n"
    "\n"
    "Commands:\n"
    "  run          run code or a command once in a fresh sandbox\n"
    "  session      create, list, show and remove sessions (long-lived sandboxes)\n"
    "  exec         run a command in a session\n"
    "  cp           copy files or directories to or from a session\n"
    "  profiles     list the isolation profiles and whether they are usable here\n"
    "  executions   list, show and cancel one-shot executions\n"
    "  image        pull, list, remove and collect images (admin key for changes)\n"
    "  mcp          serve MCP on stdin/stdout for a local agent (docs/mcp.md)\n"
    "  help CMD     show the help of a command\n"
    "\n"
    "Global options (also accepted after the command):\n"
    "  --url URL       sandboxd's address (env SANDBOXD_URL, default " DEFAULT_URL ")\n"
    "  --api-key KEY   API key (env SANDBOXD_API_KEY)\n"
    "  -h, --help      show this help\n"
    "  --version       print the version\n"
    "\n"
    "Exit status: 0 on success; 1 for an API or network error; 2 for a usage\n"
    "error.  run and exec exit with the program's own status instead: 128+N if\n"
    "it died of signal N, 124 on timeout, 137 when killed for memory, 125 when\n"
    "the service failed (e.g. runtime_unavailable).\n"
    "\n"
    "Example:\n"
    "  export SANDBOXD_API_KEY=…\n"
    "  sbx run --lang python 'print(2+2)'\n";

static void on_signal(int sig) { sbx_cli_interrupted = sig; }

void sbx_cli_trap_signals(void)
{
  /* No SA_RESTART: curl's poll must return so its progress callback can
   * notice the flag and abort the transfer. */
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

struct sbx_http *sbx_cli_http(struct sbx_cli *cli)
{
  if (cli->http)
    return cli->http;
  struct sbx_error err = {0};
  cli->http = sbx_http_new(cli->url, cli->api_key, &err);
  if (!cli->http)
    sbx_cli_fail(&err);
  return cli->http;
}

struct verb {
  const char *name;
  const char *alias;
  int (*fn)(struct sbx_cli *cli, int argc, char **argv);
};

static const struct verb verbs[] = {
    {"run", NULL, sbx_cmd_run},
    {"session", "sessions", sbx_cmd_session},
    {"exec", NULL, sbx_cmd_exec},
    {"cp", NULL, sbx_cmd_cp},
    {"profiles", "profile", sbx_cmd_profiles},
    {"executions", "execution", sbx_cmd_executions},
    {"image", "images", sbx_cmd_image},
    {"mcp", NULL, sbx_cmd_mcp},
};

static const struct verb *find_verb(const char *name)
{
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (!strcmp(verbs[i].name, name) || (verbs[i].alias && !strcmp(verbs[i].alias, name)))
      return &verbs[i];
  return NULL;
}

/* `sbx help [CMD]`: the command's own --help. */
static int help_verb(struct sbx_cli *cli, int argc, char **argv)
{
  if (argc < 2) {
    fputs(usage, stdout);
    return SBX_EXIT_OK;
  }
  const struct verb *v = find_verb(argv[1]);
  if (!v) {
    fprintf(stderr, "sbx: unknown command '%s'\nTry 'sbx --help'.\n", argv[1]);
    return SBX_EXIT_USAGE;
  }
  char *hargv[] = {argv[1], (char *)"--help", NULL};
  return v->fn(cli, 2, hargv);
}

/* Parses the options before the command; returns -1 to go on, else an
 * exit code. */
static int parse_global(struct sbx_cli *cli, int argc, char **argv)
{
  static const struct option opts[] = {SBX_CLI_COMMON_LONGOPTS,
                                       {"version", no_argument, NULL, 'V'},
                                       {NULL, 0, NULL, 0}};
  int c, exit_now = -1;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (c == 'V') {
      puts("sbx 0.1.0");
      return SBX_EXIT_OK;
    }
    if (!sbx_cli_common_opt(cli, c, usage, &exit_now)) {
      fputs("Try 'sbx --help'.\n", stderr);
      return SBX_EXIT_USAGE;
    }
    if (exit_now >= 0)
      return exit_now;
  }
  return -1;
}

int main(int argc, char **argv)
{
  struct sbx_cli cli = {.url = getenv("SANDBOXD_URL"), .api_key = getenv("SANDBOXD_API_KEY")};
  if (!cli.url || !*cli.url)
    cli.url = DEFAULT_URL;
  if (cli.api_key && !*cli.api_key)
    cli.api_key = NULL;
  signal(SIGPIPE, SIG_IGN);
  int rc = parse_global(&cli, argc, argv);
  if (rc >= 0)
    return rc;
  if (optind >= argc) {
    fputs(usage, stderr);
    return SBX_EXIT_USAGE;
  }
  const char *name = argv[optind];
  const struct verb *v = find_verb(name);
  if (!v && strcmp(name, "help") != 0) {
    fprintf(stderr, "sbx: unknown command '%s'\nTry 'sbx --help'.\n", name);
    return SBX_EXIT_USAGE;
  }
  int vargc = argc - optind;
  char **vargv = argv + optind;
  optind = 0; /* re-initialise getopt for the verb's own options */
  rc = v ? v->fn(&cli, vargc, vargv) : help_verb(&cli, vargc, vargv);
  sbx_http_free(cli.http);
  fflush(stdout);
  return rc;
}
