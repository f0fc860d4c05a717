/* result.c — what run and exec do with a final result: write the program's
 * output verbatim, say why it stopped, and pick the exit code (the table in
 * cli.h). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

static const char *str_member(json_t *obj, const char *key)
{
  const char *s = json_string_value(json_object_get(obj, key));
  return s ? s : "";
}

static int decode_base64(const char *in, size_t inlen, char **out, size_t *len,
                         struct sbx_error *err)
{
  size_t cap = inlen / 4 * 3 + 3;
  _cleanup_free_ char *buf = malloc(cap + 1);
  if (!buf)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  /* Accept padded and unpadded forms, and line breaks some encoders add. */
  if (sodium_base642bin((unsigned char *)buf, cap, in, inlen, "\r\n", len, NULL,
                        sodium_base64_VARIANT_ORIGINAL) != 0 &&
      sodium_base642bin((unsigned char *)buf, cap, in, inlen, "\r\n", len, NULL,
                        sodium_base64_VARIANT_ORIGINAL_NO_PADDING) != 0)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "sandboxd sent invalid base64 output");
  buf[*len] = '\0';
  *out = steal_pointer(&buf);
  return 0;
}

int sbx_cli_stream_bytes(json_t *result, const char *name, char **out, size_t *len,
                         struct sbx_error *err)
{
  char enc_key[32];
  snprintf(enc_key, sizeof enc_key, "%s_encoding", name);
  json_t *v = json_object_get(result, name);
  const char *s = json_string_value(v);
  size_t n = s ? json_string_length(v) : 0;
  if (s && strcmp(str_member(result, enc_key), "base64") == 0)
    return decode_base64(s, n, out, len, err);
  *out = malloc(n + 1);
  if (!*out)
    return sbx_err_set(err, SBX_E_INTERNAL, ENOMEM, "out of memory");
  if (n)
    memcpy(*out, s, n);
  (*out)[n] = '\0';
  *len = n;
  return 0;
}

static int write_stream(json_t *result, const char *name, int fd, struct sbx_error *err)
{
  _cleanup_free_ char *buf = NULL;
  size_t len = 0;
  if (sbx_cli_stream_bytes(result, name, &buf, &len, err) < 0)
    return -1;
  if (len && sbx_write_all(fd, buf, len) < 0 && errno != EPIPE)
    return sbx_err_sys(err, errno, "cannot write the program's %s", name);
  return 0;
}

static void note_truncation(json_t *result, const char *name)
{
  char key[48];
  snprintf(key, sizeof key, "%s_truncated", name);
  if (!json_is_true(json_object_get(result, key)))
    return;
  snprintf(key, sizeof key, "%s_dropped_bytes", name);
  json_int_t dropped = json_integer_value(json_object_get(result, key));
  fprintf(stderr,
          "sbx: note: %s was truncated (%" JSON_INTEGER_FORMAT
          " bytes dropped from the middle)\n",
          name, dropped);
}

/* Says why a program did not simply exit: timeout, memory, cancel, or a
 * failure of the service itself. */
static void note_stop(json_t *result)
{
  const char *status = str_member(result, "status");
  if (!strcmp(status, "succeeded") || !strcmp(status, "failed") || !*status)
    return;
  json_t *e = json_object_get(result, "error");
  const char *code = json_is_string(e) ? NULL : json_string_value(json_object_get(e, "code"));
  const char *msg = json_is_string(e) ? json_string_value(e)
                                      : json_string_value(json_object_get(e, "message"));
  const char *reason = str_member(result, "reason");
  if (msg)
    fprintf(stderr, "sbx: %s: %s\n", code ? code : status, msg);
  else if (*reason)
    fprintf(stderr, "sbx: %s (reason: %s)\n", status, reason);
  else
    fprintf(stderr, "sbx: %s\n", status);
}

int sbx_cli_print_result(json_t *result, struct sbx_error *err)
{
  fflush(stdout);
  if (write_stream(result, "stdout", STDOUT_FILENO, err) < 0 ||
      write_stream(result, "stderr", STDERR_FILENO, err) < 0)
    return -1;
  note_truncation(result, "stdout");
  note_truncation(result, "stderr");
  note_stop(result);
  return 0;
}

/* The signal as a number whether the daemon sends 9, "9", "SIGKILL" or
 * "KILL". 0 if none. */
static int signal_number(json_t *v)
{
  if (json_is_integer(v))
    return (int)json_integer_value(v);
  const char *s = json_string_value(v);
  if (!s || !*s)
    return 0;
  if (strncmp(s, "SIG", 3) == 0)
    s += 3;
  char *end;
  long n = strtol(s, &end, 10);
  if (end != s && !*end)
    return (int)n;
  for (int i = 1; i < 65; i++) {
    const char *abbrev = sigabbrev_np(i);
    if (abbrev && strcmp(abbrev, s) == 0)
      return i;
  }
  return 0;
}

int sbx_cli_result_exit_code(json_t *result)
{
  const char *status = str_member(result, "status");
  if (!strcmp(status, "timeout"))
    return SBX_EXIT_TIMEOUT;
  if (!strcmp(status, "oom_killed"))
    return SBX_EXIT_OOM;
  if (!strcmp(status, "error"))
    return SBX_EXIT_SERVICE;
  int sig = signal_number(json_object_get(result, "signal"));
  if (sig > 0 && sig < 128)
    return 128 + sig;
  json_t *code = json_object_get(result, "exit_code");
  if (json_is_integer(code))
    return (int)(json_integer_value(code) & 0xff);
  if (!strcmp(status, "succeeded"))
    return SBX_EXIT_OK;
  if (!strcmp(status, "killed"))
    return SBX_EXIT_OOM; /* 128 + SIGKILL: how a cancelled program ends */
  if (!strcmp(status, "failed"))
    return 1;
  return SBX_EXIT_SERVICE;
}

int sbx_cli_fail_call(struct sbx_cli *cli, const struct sbx_error *err)
{
  sbx_cli_fail_api(cli, err);
  if (cli->http && sbx_http_last_status(cli->http) >= 500)
    return SBX_EXIT_SERVICE;
  return SBX_EXIT_API;
}

int sbx_cli_print_json(json_t *v)
{
  if (json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) < 0)
    return -1;
  fputc('\n', stdout);
  return fflush(stdout) == 0 ? 0 : -1;
}
