/* run.c — `sbx run`: a one-shot execution.  Submits it (POST
 * /v1/sandbox/executions), long-polls until its status is final, writes the
 * program's output verbatim, optionally downloads the collected files, and
 * exits with the program's exit code (the table in cli.h). */
#include <errno.h>
#include <libgen.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#define WAIT_S 30

static const char help[] =
    "Usage: sbx run [OPTIONS] --lang python|node|bash CODE\n"
    "       sbx run [OPTIONS] -- PROGRAM [ARGS…]\n"
    "\n"
    "Runs code once in a fresh sandbox, waits for it, prints its stdout and\n"
    "stderr verbatim and exits with its exit code.  CODE may be '-' to read\n"
    "the code from stdin.  Without '--', everything from PROGRAM on is the\n"
    "program's argv.\n"
    "\n"
    "Options:\n"
    "  -l, --lang LANG        run CODE with python, node or bash\n"
    "  -p, --profile NAME     isolation profile (see `sbx profiles`)\n"
    "      --image IMAGE      image to run in\n"
    "      --timeout SECONDS  wall-clock limit\n"
    "      --memory SIZE      memory limit, e.g. 256Mi, 1Gi\n"
    "      --cpu CPU          CPU limit, e.g. 500m, 2\n"
    "  -e, --env KEY=VALUE    environment variable (repeatable)\n"
    "      --file LOCAL[:REMOTE]  copy a local file in before start (repeatable;\n"
    "                         REMOTE defaults to /work/<name>)\n"
    "      --collect GLOB     collect files matching GLOB afterwards, e.g.\n"
    "                         '/work/out/*' (repeatable)\n"
    "      --download DIR     save the collected files under DIR\n"
    "      --stdin-file FILE  feed FILE ('-' for stdin) to the program's stdin\n"
    "      --json             print the final execution object instead of the output\n"
    "      --url URL, --api-key KEY   see `sbx --help`\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: the program's own; 128+N if it died of signal N; 124 on\n"
    "timeout; 137 when killed for memory or cancelled; 125 if the service\n"
    "failed (e.g. runtime_unavailable); 130 if interrupted (the execution is\n"
    "cancelled); 1 for other API or network errors; 2 for usage errors.\n"
    "\n"
    "Examples:\n"
    "  sbx run --lang python 'print(2+2)'\n"
    "  sbx run --timeout 5 --memory 256Mi -- sh -c 'echo hi; exit 3'\n"
    "  sbx run --collect '/work/out/*' --download ./out -- sh -c 'mkdir -p out; date > out/t'\n";

enum {
  OPT_IMAGE = SBX_OPT_VERB_BASE,
  OPT_TIMEOUT,
  OPT_MEMORY,
  OPT_CPU,
  OPT_FILE,
  OPT_COLLECT,
  OPT_DOWNLOAD,
  OPT_STDIN_FILE,
  OPT_JSON,
};

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"lang", required_argument, NULL, 'l'},
    {"profile", required_argument, NULL, 'p'},
    {"env", required_argument, NULL, 'e'},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"file", required_argument, NULL, OPT_FILE},
    {"collect", required_argument, NULL, OPT_COLLECT},
    {"download", required_argument, NULL, OPT_DOWNLOAD},
    {"stdin-file", required_argument, NULL, OPT_STDIN_FILE},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

struct run_opts {
  const char *lang, *code, *profile, *image, *memory, *cpu, *stdin_file, *download;
  long timeout_s;
  bool json;
  json_t *env;     /* owned */
  json_t *files;   /* owned; array of "LOCAL:REMOTE" specs */
  json_t *collect; /* owned */
  char **argv;     /* program argv (command mode) */
  int argc;
};

static void run_opts_free(struct run_opts *o)
{
  json_decref(o->env);
  json_decref(o->files);
  json_decref(o->collect);
}

static int append_string(json_t **arr, const char *s)
{
  if (!*arr)
    *arr = json_array();
  return json_array_append_new(*arr, json_string(s));
}

/* One option; returns -1 to go on, else an exit code. */
static int take_opt(struct sbx_cli *cli, void *ud, int c)
{
  struct run_opts *o = ud;
  struct sbx_error err = {0};
  int exit_now = -1;
  switch (c) {
  case 'l':
    o->lang = optarg;
    break;
  case 'p':
    o->profile = optarg;
    break;
  case OPT_IMAGE:
    o->image = optarg;
    break;
  case OPT_STDIN_FILE:
    o->stdin_file = optarg;
    break;
  case OPT_DOWNLOAD:
    o->download = optarg;
    break;
  case OPT_JSON:
    o->json = true;
    break;
  case OPT_FILE:
    append_string(&o->files, optarg);
    break;
  case OPT_COLLECT:
    append_string(&o->collect, optarg);
    break;
  case 'e':
    if (sbx_cli_add_env(&o->env, optarg, &err) < 0)
      return sbx_cli_usage("run", "%s", err.msg);
    break;
  case OPT_TIMEOUT:
    if (sbx_cli_parse_seconds(optarg, &o->timeout_s, &err) < 0)
      return sbx_cli_usage("run", "%s", err.msg);
    break;
  case OPT_MEMORY:
    return sbx_cli_take_limit("run", optarg, &o->memory, sbx_cli_check_memory);
  case OPT_CPU:
    return sbx_cli_take_limit("run", optarg, &o->cpu, sbx_cli_check_cpu);
  default:
    if (sbx_cli_common_opt(cli, c, help, &exit_now))
      return exit_now;
    fputs("Try 'sbx run --help'.\n", stderr);
    return SBX_EXIT_USAGE;
  }
  return -1;
}

/* A non-option: CODE with --lang, else the start of the program's argv. */
static int take_positional(struct sbx_cli_args *a, void *ud)
{
  struct run_opts *o = ud;
  if (!o->lang) {
    sbx_cli_take_tail(a, &o->argv, &o->argc);
    return -1;
  }
  if (o->code)
    return sbx_cli_usage("run", "unexpected argument '%s' (give CODE once, quoted)", optarg);
  o->code = optarg;
  return -1;
}

static int check_positionals(struct sbx_cli_args *a, void *ud)
{
  struct run_opts *o = ud;
  int rc = sbx_cli_take_program(a, "run", o->lang, &o->code, o->stdin_file, &o->argv, &o->argc,
                                "give --lang LANG CODE or -- PROGRAM [ARGS…]");
  if (rc < 0 && o->lang && strcmp(o->lang, "python") && strcmp(o->lang, "node") &&
      strcmp(o->lang, "bash"))
    return sbx_cli_usage("run", "--lang must be python, node or bash, not '%s'", o->lang);
  return rc;
}

static int parse(struct sbx_cli *cli, int argc, char **argv, struct run_opts *o)
{
  static const struct sbx_cli_verb verb = {"sbx run", "+hl:p:e:",      longopts,
                                           take_opt,  take_positional, check_positionals};
  return sbx_cli_parse_verb(cli, argc, argv, &verb, o);
}

/* --file LOCAL[:REMOTE] → {path, content, encoding}. */
static int file_entry(const char *spec, json_t **out, struct sbx_error *err)
{
  _cleanup_free_ char *local = strdup(spec);
  if (!local)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  char *colon = strrchr(local, ':');
  _cleanup_free_ char *remote = NULL;
  if (colon && colon[1]) {
    *colon = '\0';
    remote = strdup(colon + 1);
  } else {
    if (colon)
      *colon = '\0';
    _cleanup_free_ char *copy = strdup(local);
    if (copy && asprintf(&remote, "/work/%s", basename(copy)) < 0)
      remote = NULL;
  }
  _cleanup_free_ char *buf = NULL;
  size_t len = 0;
  if (!remote || sbx_cli_read_file(local, SBX_CLI_MAX_INPUT, &buf, &len, err) < 0)
    return sbx_err_prefix(err, "--file %s", spec);
  json_t *content = memchr(buf, '\0', len) ? NULL : json_stringn(buf, len);
  const char *encoding = "utf-8";
  if (!content) { /* binary: not valid UTF-8 or has NULs */
    size_t b64len = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
    _cleanup_free_ char *b64 = malloc(b64len);
    if (!b64)
      return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
    sodium_bin2base64(b64, b64len, (unsigned char *)buf, len, sodium_base64_VARIANT_ORIGINAL);
    content = json_string(b64);
    encoding = "base64";
  }
  *out = json_pack("{s:s, s:o, s:s}", "path", remote, "content", content, "encoding", encoding);
  return 0;
}

static int add_files(struct run_opts *o, json_t *body, struct sbx_error *err)
{
  size_t i;
  json_t *spec, *files = json_array();
  json_object_set_new(body, "files", files);
  json_array_foreach(o->files, i, spec)
  {
    json_t *entry = NULL;
    if (file_entry(json_string_value(spec), &entry, err) < 0)
      return -1;
    json_array_append_new(files, entry);
  }
  return 0;
}

static void add_limits(struct run_opts *o, json_t *body)
{
  json_t *limits = json_object();
  if (o->cpu)
    json_object_set_new(limits, "cpu", json_string(o->cpu));
  if (o->memory)
    json_object_set_new(limits, "memory", json_string(o->memory));
  if (o->timeout_s)
    json_object_set_new(limits, "timeout_s", json_integer(o->timeout_s));
  if (json_object_size(limits))
    json_object_set_new(body, "limits", limits);
  else
    json_decref(limits);
}

static int build_body(struct run_opts *o, json_t *body, struct sbx_error *err)
{
  if (o->profile)
    json_object_set_new(body, "profile", json_string(o->profile));
  if (o->image)
    json_object_set_new(body, "image", json_string(o->image));
  if (sbx_cli_set_program(body, o->lang, o->code, o->argv, o->argc, err) < 0)
    return -1;
  if (o->files && add_files(o, body, err) < 0)
    return -1;
  if (o->collect)
    json_object_set(body, "collect", o->collect);
  if (o->stdin_file &&
      sbx_cli_set_text_file(body, "stdin", o->stdin_file, SBX_CLI_MAX_INPUT, err) < 0)
    return -1;
  if (o->env)
    json_object_set(body, "env", o->env);
  add_limits(o, body);
  return 0;
}

static bool is_final(json_t *exe)
{
  const char *st = json_string_value(json_object_get(exe, "status"));
  return st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
}

/* Long-polls until the status is final; *final is a new reference. */
static int wait_final(struct sbx_cli *cli, const char *id, json_t **final, struct sbx_error *err)
{
  _cleanup_free_ char *esc = sbx_http_escape(id);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/v1/sandbox/executions/%s?wait_s=%d", esc, WAIT_S) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  for (;;) {
    uint64_t start = sbx_now_ms();
    json_t *exe = NULL;
    if (sbx_http_json(cli->http, "GET", path, NULL, &exe, err) < 0)
      return -1;
    if (is_final(exe)) {
      *final = exe;
      return 0;
    }
    json_decref(exe);
    /* A daemon that answers before wait_s must not make us spin. */
    if (sbx_now_ms() - start < 200)
      usleep(200 * 1000);
  }
}

static int cancel_after_interrupt(struct sbx_cli *cli, const char *id)
{
  struct sbx_error err = {0};
  _cleanup_free_ char *esc = sbx_http_escape(id);
  _cleanup_free_ char *path = NULL;
  sbx_cli_interrupted = 0;
  if (asprintf(&path, "/v1/sandbox/executions/%s/cancel", esc) >= 0 &&
      sbx_http_json(cli->http, "POST", path, NULL, NULL, &err) == 0)
    fprintf(stderr, "sbx: interrupted; execution %s cancelled\n", id);
  else
    fprintf(stderr, "sbx: interrupted; cancelling execution %s failed: %s\n", id, err.msg);
  return SBX_EXIT_INTERRUPTED;
}

/* The sha256 of a local file, hex, to check a download against. */
static int file_sha256(const char *path, char hex[65])
{
  _cleanup_fclose_ FILE *f = fopen(path, "rbe");
  if (!f)
    return -1;
  crypto_hash_sha256_state st;
  unsigned char buf[65536], digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_init(&st);
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    crypto_hash_sha256_update(&st, buf, n);
  crypto_hash_sha256_final(&st, digest);
  sbx_hex(digest, sizeof digest, hex);
  return ferror(f) ? -1 : 0;
}

/* DIR + the sandbox path; refuses ".." so a hostile listing cannot write
 * outside DIR. */
static int local_target(const char *dir, const char *remote, char **out, struct sbx_error *err)
{
  const char *rel = remote;
  while (*rel == '/')
    rel++;
  if (!*rel || !strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
      (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")))
    return sbx_err_set(err, SBX_E_INVALID, 0, "refusing to download unsafe path '%s'", remote);
  if (asprintf(out, "%s/%s", dir, rel) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  return 0;
}

static int download_one(struct sbx_cli *cli, const char *id, json_t *file, const char *dir,
                        struct sbx_error *err)
{
  const char *remote = json_string_value(json_object_get(file, "path"));
  const char *want = json_string_value(json_object_get(file, "sha256"));
  _cleanup_free_ char *local = NULL, *parent = NULL, *url = NULL;
  _cleanup_free_ char *eid = sbx_http_escape(id);
  if (!remote || local_target(dir, remote, &local, err) < 0)
    return -1;
  _cleanup_free_ char *epath = sbx_http_escape(remote);
  parent = strdup(local);
  if (!parent || sbx_mkdir_p(dirname(parent), 0755) < 0)
    return sbx_err_sys(err, errno, "cannot create the directory for %s", local);
  if (asprintf(&url, "/v1/sandbox/executions/%s/files?path=%s", eid, epath) < 0)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  if (sbx_http_get_to_file(cli->http, url, local, 0644, err) < 0)
    return sbx_err_prefix(err, "downloading %s", remote);
  char got[65];
  if (want && (file_sha256(local, got) < 0 || strcasecmp(got, want) != 0))
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "%s: sha256 mismatch after download", local);
  return 0;
}

static int download_all(struct sbx_cli *cli, const char *id, json_t *final, const char *dir,
                        struct sbx_error *err)
{
  if (sbx_mkdir_p(dir, 0755) < 0)
    return sbx_err_sys(err, errno, "cannot create %s", dir);
  size_t i;
  json_t *file;
  json_array_foreach(json_object_get(final, "files"), i, file)
  {
    if (download_one(cli, id, file, dir, err) < 0)
      return -1;
  }
  return 0;
}

static int submit(struct sbx_cli *cli, json_t *body, char **id, struct sbx_error *err)
{
  json_t *resp = NULL;
  if (sbx_http_json(cli->http, "POST", "/v1/sandbox/executions", body, &resp, err) < 0)
    return -1;
  const char *s = json_string_value(json_object_get(resp, "id"));
  *id = s ? strdup(s) : NULL;
  json_decref(resp);
  if (!*id)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "sandboxd accepted the execution without an id");
  return 0;
}

/* Prints the result (or the object with --json) and fetches the files. */
static int finish(struct sbx_cli *cli, struct run_opts *o, const char *id, json_t *final)
{
  struct sbx_error err = {0};
  int rc = sbx_cli_result_exit_code(final);
  if (o->json ? sbx_cli_print_json(final) < 0 : sbx_cli_print_result(final, &err) < 0)
    return sbx_cli_fail(&err);
  if (o->download && download_all(cli, id, final, o->download, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  return rc;
}

static int execute(struct sbx_cli *cli, struct run_opts *o)
{
  struct sbx_error err = {0};
  json_t *body = json_object();
  int rc = build_body(o, body, &err);
  if (rc < 0) {
    json_decref(body);
    return sbx_cli_usage("run", "%s", err.msg);
  }
  _cleanup_free_ char *id = NULL;
  sbx_cli_trap_signals();
  rc = submit(cli, body, &id, &err);
  json_decref(body);
  if (rc < 0)
    return sbx_cli_fail_call(cli, &err);
  json_t *final = NULL;
  if (wait_final(cli, id, &final, &err) < 0)
    return err.errnum == EINTR ? cancel_after_interrupt(cli, id) : sbx_cli_fail_call(cli, &err);
  rc = finish(cli, o, id, final);
  json_decref(final);
  return rc;
}

int sbx_cmd_run(struct sbx_cli *cli, int argc, char **argv)
{
  struct run_opts o = {0};
  int rc = parse(cli, argc, argv, &o);
  if (rc < 0)
    rc = sbx_cli_http(cli) ? execute(cli, &o) : SBX_EXIT_API;
  run_opts_free(&o);
  return rc;
}
