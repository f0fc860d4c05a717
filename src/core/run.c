/* run.c — running one command in a sandbox and turning the result into the
 * API's result object: shared by session exec and one-shot executions. */
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/internal.h"

/* What every workload sees; nothing of the daemon's own environment leaks
 * in (DESIGN §5: environment scrubbed). */
static const char *const base_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/work",
    "LANG=C.UTF-8",
    "TMPDIR=/tmp",
    "USER=sandbox",
    "PYTHONUNBUFFERED=1",
    NULL,
};

/* Replaces an existing NAME= entry or appends. */
static void env_put(char **env, size_t *n, const char *kv)
{
  size_t klen = strcspn(kv, "=");
  for (size_t i = 0; i < *n; i++)
    if (strncmp(env[i], kv, klen) == 0 && env[i][klen] == '=') {
      free(env[i]);
      env[i] = strdup(kv);
      return;
    }
  env[(*n)++] = strdup(kv);
}

static size_t cstrv_len(const char *const *v)
{
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

char **sbx_run_env(const char *const *image_env, const char *const *net_env,
                   char *const *session_env, char *const *request_env)
{
  size_t cap = 8 + cstrv_len(image_env) + cstrv_len(net_env) + sbx_strv_len(session_env) +
               sbx_strv_len(request_env),
         n = 0;
  char **env = calloc(cap + 1, sizeof *env);
  if (!env)
    return NULL;
  for (const char *const *p = base_env; *p; p++)
    env_put(env, &n, *p);
  char tp[80]; /* the current span's context; the caller's own env may override it */
  if (sbx_trace_env_entry(tp, sizeof tp))
    env_put(env, &n, tp);
  for (const char *const *p = image_env; p && *p; p++)
    env_put(env, &n, *p);
  for (const char *const *p = net_env; p && *p; p++)
    env_put(env, &n, *p);
  for (char *const *p = session_env; p && *p; p++)
    env_put(env, &n, *p);
  for (char *const *p = request_env; p && *p; p++)
    env_put(env, &n, *p);
  for (size_t i = 0; i < n; i++)
    if (!env[i]) {
      sbx_strv_free(env);
      return NULL;
    }
  return env;
}

int sbx_err_runtime_unavailable(struct sbx_error *err, const struct sbx_profile *p)
{
  sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
              "profile '%s' (driver %s) is unavailable on this host: %s", p->name,
              p->driver_name, p->reason);
  return sbx_err_fr(err,
                    "Le profil « %s » (pilote %s) est indisponible sur cet hôte : %s — le code "
                    "n'a pas été exécuté",
                    p->name, p->driver_name, p->reason);
}

int sbx_run_spec(struct sbx_sandbox *sb, const struct sbx_exec_spec *spec, char *const *env,
                 uint64_t timeout_ms, uint64_t output_cap, struct sbx_cancel *cancel,
                 struct sbx_exec_result *res, struct sbx_error *err)
{
  struct sbx_exec_request tmpl = {.timeout_ms = timeout_ms,
                                  .output_cap = output_cap,
                                  .cancel = cancel};
  return sbx_run_spec_ex(sb, spec, env, &tmpl, res, err);
}

/* A code too long for one EXEC: written before, removed after (two more
 * round trips).  The command never started when it fails. */
static int code_file_write(struct sbx_sandbox *sb, const char *path, const char *code,
                           struct sbx_exec_result *res, struct sbx_error *err)
{
  if (sbx_sandbox_file_write(sb, path, code, strlen(code), err) == 0)
    return 0;
  res->status = SBX_ST_ERROR; /* a result for the callers that send one */
  res->reason = err->errnum == ENOSPC || err->errnum == EDQUOT ? SBX_RS_DISK : SBX_RS_NONE;
  res->exit_code = -1;
  return sbx_err_prefix(err, "writing the code into the sandbox");
}

int sbx_run_spec_ex(struct sbx_sandbox *sb, const struct sbx_exec_spec *spec, char *const *env,
                    const struct sbx_exec_request *tmpl, struct sbx_exec_result *res,
                    struct sbx_error *err)
{
  struct sbx_exec_request req = *tmpl;
  req.argv = spec->argv;
  req.env = env;
  req.cwd = spec->cwd;
  req.stdin_data = spec->stdin_data;
  req.stdin_len = spec->stdin_len;
  char *with_file[3] = {NULL, NULL, NULL};
  char code_path[128], run_path[4300];
  bool by_file = false;
  if (spec->code) { /* too long for an argument: run it from a file */
    char rnd[40];
    sbx_random_id("code", rnd, sizeof rnd);
    snprintf(code_path, sizeof code_path, "/tmp/.sbx-%s%s", rnd, spec->code_ext);
    /* The workload may see host paths (process driver): name the file as
     * it sees it. */
    snprintf(run_path, sizeof run_path, "%s%s", sb->host_root, code_path);
    with_file[0] = spec->argv[0];
    with_file[1] = run_path;
    req.argv = with_file;
    /* Usually written by the exec itself (sbx-init's shepherd). */
    by_file = strlen(spec->code) > SBX_EXEC_CODE_MAX;
    if (by_file && code_file_write(sb, code_path, spec->code, res, err) < 0)
      return -1;
    req.code_path = by_file ? NULL : code_path;
    req.code = by_file ? NULL : spec->code;
  }
  int rc = sbx_sandbox_exec(sb, &req, res, err);
  /* By file, or its shepherd killed before it could remove it. */
  if (by_file || (req.code && res->reason == SBX_RS_SHEPHERD_LOST))
    sbx_sandbox_remove(sb, code_path, NULL);
  if (rc < 0)
    return -1;
  /* oom_killed is decided in sbx_sandbox_exec from the cgroup's counter
   * over the exec (runtime/sandbox.c), for every caller. */
  if (res->status == SBX_ST_TIMEOUT && !res->error[0])
    snprintf(res->error, sizeof res->error,
             "timeout of %.3g s reached; the process tree was "
             "killed",
             (double)tmpl->timeout_ms / 1000.0);
  return 0;
}

void sbx_session_exec_done(struct sbx_core *core, struct sbx_live_session *ls,
                           const struct sbx_principal *who, const struct sbx_exec_result *res,
                           bool ran, struct sbx_span *span)
{
  if (ran) {
    sbx_span_set_str(span, "sandbox.status", sbx_status_name(res->status));
    sbx_obs_exec_done(core, who, ls, res);
  }
  /* After the usage record: what it holds is not charged twice. */
  sbx_session_cpu_exec_done(core, ls, ls->tenant_id, res, ran);
}

void sbx_json_set_output(json_t *o, const char *name, const char *buf, size_t len)
{
  char enc[64];
  snprintf(enc, sizeof enc, "%s_encoding", name);
  json_t *s = json_stringn(buf ? buf : "", buf ? len : 0);
  if (s) {
    json_object_set_new(o, name, s);
    json_object_set_new(o, enc, json_string("utf-8"));
    return;
  }
  size_t b64len = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
  char *b64 = malloc(b64len);
  if (!b64)
    return;
  sodium_bin2base64(b64, b64len, (const unsigned char *)buf, len,
                    sodium_base64_VARIANT_ORIGINAL);
  json_object_set_new(o, name, json_string(b64));
  json_object_set_new(o, enc, json_string("base64"));
  free(b64);
}

const char *sbx_result_reason(const struct sbx_exec_result *res)
{
  const char *r = sbx_reason_name(res->reason);
  if (r[0])
    return r;
  switch (res->status) {
  case SBX_ST_SUCCEEDED:
  case SBX_ST_FAILED:
    return "exit";
  case SBX_ST_TIMEOUT:
    return "timeout";
  case SBX_ST_OOM_KILLED:
    return "memory";
  case SBX_ST_KILLED:
    return "signal";
  default:
    return "internal";
  }
}

json_t *sbx_result_json(const struct sbx_exec_result *res)
{
  bool signalled = res->signal != 0;
  /* A run that failed before it started (e.g. its code could not be
   * written) left the status unset: a service error, never "queued". */
  enum sbx_status st = sbx_status_final(res->status) ? res->status : SBX_ST_ERROR;
  json_t *o =
      json_pack("{s:s, s:s, s:o, s:o, s:b, s:b, s:I, s:I, s:I, s:{s:f, s:I}}", "status",
                sbx_status_name(st), "reason", sbx_result_reason(res), "exit_code",
                signalled || st == SBX_ST_ERROR ? json_null() : json_integer(res->exit_code),
                "signal", signalled ? json_integer(res->signal) : json_null(),
                "stdout_truncated", res->std_out.truncated, "stderr_truncated",
                res->std_err.truncated, "stdout_dropped_bytes", (json_int_t)res->std_out.dropped,
                "stderr_dropped_bytes", (json_int_t)res->std_err.dropped, "duration_ms",
                (json_int_t)res->duration_ms, "usage", "cpu_seconds",
                round(res->cpu_seconds * 1e6) / 1e6, "memory_peak_bytes",
                (json_int_t)res->memory_peak_bytes);
  json_object_set_new(json_object_get(o, "usage"), "oom_kills",
                      json_integer((json_int_t)res->oom_kills));
  sbx_json_set_output(o, "stdout", res->std_out.buf, res->std_out.len);
  sbx_json_set_output(o, "stderr", res->std_err.buf, res->std_err.len);
  json_object_set_new(o, "error",
                      res->error[0] ? json_pack("{s:s, s:s}", "reason", sbx_result_reason(res),
                                                "message", res->error)
                                    : json_null());
  return o;
}
