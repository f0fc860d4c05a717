/* cli.h — what the `sbx` verbs share: the global options, the exit-code
 * contract, argument helpers and the output helpers for exec results.
 *
 * Exit codes (the contract scripts and tests rely on):
 *   0..255  run/exec: the program's own exit status
 *   2       usage error (bad flag, missing argument, bad quantity)
 *   1       API error (4xx envelope) or network error, any verb
 *   124     run/exec: the program hit its timeout (like timeout(1))
 *   137     run/exec: oom_killed, or killed without a reported signal
 *   128+N   run/exec: the program died of signal N
 *   125     run/exec: the service failed (status "error", or a 5xx such as
 *           runtime_unavailable) — nothing says how the program itself ended
 *   130     run: interrupted by Ctrl-C (the execution is cancelled)
 * Every verb returns its exit code; only main() calls exit(). */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/http.h"
#include "common/err.h"

enum {
  SBX_EXIT_OK = 0,
  SBX_EXIT_API = 1,
  SBX_EXIT_USAGE = 2,
  SBX_EXIT_TIMEOUT = 124,
  SBX_EXIT_SERVICE = 125,
  SBX_EXIT_OOM = 137,
  SBX_EXIT_INTERRUPTED = 130,
};

/* Global options; filled by main() from flags and the environment, then by
 * each verb's own parser (--url/--api-key are accepted after the verb too). */
struct sbx_cli {
  const char *url;       /* borrowed from argv/environ */
  const char *api_key;   /* borrowed; NULL if none */
  struct sbx_http *http; /* owned; created by sbx_cli_http() */
};

/* Long ids for the options every verb accepts (see SBX_CLI_COMMON_LONGOPTS). */
enum { SBX_OPT_URL = 0x1000, SBX_OPT_API_KEY, SBX_OPT_HELP, SBX_OPT_VERB_BASE = 0x1100 };
#define SBX_CLI_COMMON_LONGOPTS                                                                 \
  {"url", required_argument, NULL, SBX_OPT_URL},                                                \
      {"api-key", required_argument, NULL, SBX_OPT_API_KEY},                                    \
  {                                                                                             \
    "help", no_argument, NULL, 'h'                                                              \
  }

/* Set by the SIGINT/SIGTERM handler that sbx_cli_trap_signals() installs;
 * the HTTP layer aborts a transfer in flight when it turns non-zero. */
extern volatile sig_atomic_t sbx_cli_interrupted;
void sbx_cli_trap_signals(void);

/* The HTTP client for cli->url/api_key, created on first use.  NULL and a
 * message on stderr if libcurl cannot be initialised. */
struct sbx_http *sbx_cli_http(struct sbx_cli *cli);

/* --- argument handling (args.c) --- */

/* A verb's arguments, split at the first literal "--": options are parsed
 * only before it (so a program's own flags are never taken for ours), and
 * `rest`/`nrest` is what follows it. */
struct sbx_cli_args {
  int argc; /* the part getopt sees; argv[0] is "sbx VERB" for messages */
  char **argv;
  char **rest;
  int nrest;
  bool had_dashdash;
  int all_argc; /* the verb's whole argument count */
};
/* Returned by sbx_cli_getopt for a non-option argument (in optarg). */
enum { SBX_OPT_POSITIONAL = 1 };
void sbx_cli_split(int argc, char **argv, const char *display_name, struct sbx_cli_args *out);
/* getopt_long in "stop at a non-option" mode that hands each non-option
 * back as SBX_OPT_POSITIONAL and then goes on parsing options after it.
 * optstring must start with '+'.  Returns -1 at the end of the options. */
int sbx_cli_getopt(struct sbx_cli_args *a, const char *optstring, const struct option *lo);
/* A program's argv that starts at the positional just returned: it and
 * everything after it, "--" included, verbatim.  Ends option parsing. */
void sbx_cli_take_tail(struct sbx_cli_args *a, char ***argv, int *n);
/* Handles --url/--api-key/--help for a verb.  Returns 1 if `c` was one of
 * them (help: prints `help` on stdout and sets *exit_now = 0), else 0. */
int sbx_cli_common_opt(struct sbx_cli *cli, int c, const char *help, int *exit_now);
/* "sbx VERB: message" + "Try 'sbx VERB --help'." on stderr; returns 2. */
int sbx_cli_usage(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "sbx: <err->msg>" on stderr; returns 1. */
int sbx_cli_fail(const struct sbx_error *err);
/* Same for an API call, adding a hint when the key is missing; returns 1. */
int sbx_cli_fail_api(struct sbx_cli *cli, const struct sbx_error *err);

/* Adds K=V (from --env) to the JSON object *env (created on first use). */
int sbx_cli_add_env(json_t **env, const char *kv, struct sbx_error *err);
/* Parses a timeout in whole seconds (> 0). */
int sbx_cli_parse_seconds(const char *s, long *out, struct sbx_error *err);
/* Validates cpu/memory quantities the way the daemon does (common/quantity). */
int sbx_cli_check_cpu(const char *s, struct sbx_error *err);
int sbx_cli_check_memory(const char *s, struct sbx_error *err);
/* A verb's --memory or --cpu: *dst = arg (borrowed) once check accepts it.
 * -1 to go on parsing, else the usage exit code (the message printed). */
int sbx_cli_take_limit(const char *verb, const char *arg, const char **dst,
                       int (*check)(const char *, struct sbx_error *));
/* Reads all of path ("-" = stdin) into a malloc'd buffer (NUL-terminated,
 * *len excludes the NUL).  Refuses more than max bytes. */
int sbx_cli_read_file(const char *path, size_t max, char **out, size_t *len,
                      struct sbx_error *err);
/* A JSON string for text that must be UTF-8 (stdin, code). */
int sbx_cli_text(const char *what, const char *buf, size_t len, json_t **out,
                 struct sbx_error *err);
/* body[key] = the text of file `path` ("-" = stdin), at most `max` bytes. */
int sbx_cli_set_text_file(json_t *body, const char *key, const char *path, size_t max,
                          struct sbx_error *err);
/* body["code"] = code, or the text read from stdin when code is "-". */
int sbx_cli_set_code(json_t *body, const char *code, size_t max, struct sbx_error *err);
/* The ceiling on what run/exec read from a file or stdin: code, stdin or
 * one --file. */
#define SBX_CLI_MAX_INPUT (64u * 1024 * 1024)
/* What to run into body: "language" + "code" with lang, else "command"
 * from argv[0..argc). */
int sbx_cli_set_program(json_t *body, const char *lang, const char *code, char **argv, int argc,
                        struct sbx_error *err);

/* --- results (result.c) --- */

/* Writes the result's stdout/stderr to fd 1/2, verbatim (base64-decoded
 * when *_encoding says so), then notes truncation and the error on stderr.
 * Returns 0, or -1 if the output could not be decoded or written. */
int sbx_cli_print_result(json_t *result, struct sbx_error *err);
/* The exit code for a final exec/execution result (see the table above). */
int sbx_cli_result_exit_code(json_t *result);
/* Reports a failed API call from run/exec (as sbx_cli_fail_api) and returns
 * 125 for a 5xx answer (the service failed), 1 for a 4xx answer or none. */
int sbx_cli_fail_call(struct sbx_cli *cli, const struct sbx_error *err);
/* Pretty-prints a JSON value on stdout. */
int sbx_cli_print_json(json_t *v);
/* Decodes a result stream ("stdout"/"stderr"); *out malloc'd. */
int sbx_cli_stream_bytes(json_t *result, const char *name, char **out, size_t *len,
                         struct sbx_error *err);

/* --- listings (table.c) --- */

/* GETs `path` page by page (?cursor=/&cursor=) and appends every element of
 * the array member `key` to *all (a new array). */
int sbx_cli_list_all(struct sbx_cli *cli, const char *path, const char *key, json_t **all,
                     struct sbx_error *err);
/* Prints rows (arrays of strings) under headers, columns padded. */
void sbx_cli_table(const char *const *headers, size_t ncols, json_t *rows);
/* A printable cell for member `key` of obj ("-" if missing/null). */
const char *sbx_cli_cell(json_t *obj, const char *key, char *buf, size_t len);
/* A table row: the cells of obj's members keys[0..n). */
json_t *sbx_cli_row(json_t *obj, const char *const *keys, size_t n);
/* `ls`: every element of `key` at path, as JSON (json) or as a table of
 * row(element) under headers.  An exit code. */
int sbx_cli_ls(struct sbx_cli *cli, const char *path, const char *key, bool json,
               const char *const *headers, size_t ncols, json_t *(*row)(json_t *elem));

/* A verb's parse: options (optstring, longopts) one by one to opt,
 * positionals to positional, then check on what is left; each returns -1
 * to go on, else the exit code.  o is the verb's own options struct. */
struct sbx_cli_verb {
  const char *display_name; /* "sbx run" */
  const char *optstring;
  const struct option *longopts;
  int (*opt)(struct sbx_cli *cli, void *o, int c);
  int (*positional)(struct sbx_cli_args *a, void *o);
  int (*check)(struct sbx_cli_args *a, void *o);
};
int sbx_cli_parse_verb(struct sbx_cli *cli, int argc, char **argv, const struct sbx_cli_verb *v,
                       void *o);

/* What `run`/`exec` runs, from the positionals left after the options:
 * with --lang, its CODE (the one positional, unless --code gave it);
 * else PROGRAM [ARGS…] after "--" into *argv and *argc.  -1 when there is
 * something to run, else the usage exit code (nothing names what to give). */
int sbx_cli_take_program(struct sbx_cli_args *a, const char *verb, const char *lang,
                         const char **code, const char *stdin_file, char ***argv, int *argc,
                         const char *nothing);

/* --- verbs made of subcommands (args.c): `sbx executions ls|get|cancel` ---
 * Each subcommand takes --json, --status where the verb's options list it,
 * and at most two positional arguments. */
enum { SBX_OPT_SUB_STATUS = SBX_OPT_VERB_BASE + 0x80, SBX_OPT_SUB_JSON };
struct sbx_cli_sub_opts {
  const char *status;
  bool json;
  const char *args[2];
  int nargs;
};
struct sbx_cli_sub {
  const char *name, *alias;
  int (*fn)(struct sbx_cli *cli, struct sbx_cli_sub_opts *o);
};
/* Runs the subcommand argv[1] of verb ("executions") from subs[0..n);
 * names lists them for the usage message ("ls, get, cancel"). */
int sbx_cli_subcommands(struct sbx_cli *cli, int argc, char **argv, const char *verb,
                        const char *help, const struct option *longopts,
                        const struct sbx_cli_sub *subs, size_t n, const char *names);

/* --- verbs --- */
int sbx_cmd_run(struct sbx_cli *cli, int argc, char **argv);
int sbx_cmd_session(struct sbx_cli *cli, int argc, char **argv);
int sbx_cmd_exec(struct sbx_cli *cli, int argc, char **argv);
/* term.c: `sbx exec -t` — runs body's command as a background
 * process with a pty and drives it from this terminal; returns the exit
 * status (as exec's).  body is borrowed (background and pty are added). */
int sbx_cli_term_run(struct sbx_cli *cli, const char *sid, json_t *body);
int sbx_cmd_cp(struct sbx_cli *cli, int argc, char **argv);
int sbx_cmd_profiles(struct sbx_cli *cli, int argc, char **argv);
int sbx_cmd_executions(struct sbx_cli *cli, int argc, char **argv);
/* image.c: `sbx image pull|ls|rm|gc`. */
int sbx_cmd_image(struct sbx_cli *cli, int argc, char **argv);
int sbx_cmd_mcp(struct sbx_cli *cli, int argc, char **argv); /* mcp.c: MCP stdio relay */

#endif
