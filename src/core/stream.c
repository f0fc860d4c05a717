/* stream.c — the streamed session exec: the same exec as the
 * buffered one (same timeout, limits and output caps: the result at the
 * end is identical), run on a thread of its own so the HTTP connection can
 * stream its output as it is read.
 *
 * Disconnect: a foreground exec belongs to its caller, so when the client
 * goes away the exec is killed with reason `cancelled` (background
 * processes are the way to outlive a connection).  The API reports the
 * disconnect by token: a registry maps tokens to the running execs' cancel
 * tokens, so a late report about a finished exec finds nothing and is
 * harmless. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/internal.h"
#include "core/resources.h"

struct stream_job {
  struct sbx_core *core;
  struct sbx_live_session *ls; /* the thread's reference */
  struct sbx_exec_slot *slot;
  struct sbx_exec_spec spec;
  char **env;
  uint64_t timeout_ms;
  int64_t tenant;
  struct sbx_exec_sink sink;
  uint64_t token;
  struct stream_job *next; /* registry */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_job *registry;
static uint64_t next_token = 1;

uint64_t sbx_exec_stream_token(void)
{
  pthread_mutex_lock(&reg_lock);
  uint64_t t = next_token++;
  pthread_mutex_unlock(&reg_lock);
  return t;
}

static void reg_add(struct stream_job *job)
{
  pthread_mutex_lock(&reg_lock);
  job->next = registry;
  registry = job;
  pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(struct stream_job *job)
{
  pthread_mutex_lock(&reg_lock);
  for (struct stream_job **pp = &registry; *pp; pp = &(*pp)->next)
    if (*pp == job) {
      *pp = job->next;
      break;
    }
  pthread_mutex_unlock(&reg_lock);
}

void sbx_exec_stream_cancel(uint64_t token)
{
  pthread_mutex_lock(&reg_lock);
  for (struct stream_job *j = registry; j; j = j->next)
    if (j->token == token)
      sbx_cancel_fire(&j->slot->cancel, SBX_RS_CANCELLED);
  pthread_mutex_unlock(&reg_lock);
}

static void job_free(struct stream_job *job)
{
  sbx_strv_free(job->env);
  sbx_exec_spec_free(&job->spec);
  free(job);
}

static void *stream_main(void *arg)
{
  struct stream_job *job = arg;
  struct sbx_exec_request tmpl = {.timeout_ms = job->timeout_ms,
                                  .output_cap = job->ls->limits.output_bytes,
                                  .cancel = &job->slot->cancel,
                                  .on_output = job->sink.output,
                                  .on_output_ctx = job->sink.ctx};
  struct sbx_exec_result res = {0};
  struct sbx_error err = {0};
  if (sbx_run_spec_ex(job->ls->sb, &job->spec, job->env, &tmpl, &res, &err) < 0 && !res.error[0])
    snprintf(res.error, sizeof res.error, "%s", err.msg);
  reg_remove(job); /* before the slot goes: cancel reports find nothing */
  json_t *result = sbx_result_json(&res);
  sbx_session_exec_done(job->core, job->ls, NULL, &res, true, NULL);
  sbx_exec_result_free(&res);
  sbx_session_slot_remove(job->core, job->ls, job->slot);
  sbx_res_fds_give(job->tenant, job->ls->id, SBX_RES_FDS_PROCESS);
  sbx_session_touch(job->core, job->ls);
  pthread_mutex_lock(&job->core->sess_lock);
  const char *end = job->ls->dying ? sbx_session_end_reason(job->ls->dying_reason) : NULL;
  pthread_mutex_unlock(&job->core->sess_lock);
  sbx_session_release(job->core, job->ls);
  job->sink.exit(job->sink.ctx, result, end);
  job_free(job);
  sbx_procs_thread_leave();
  return NULL;
}

static int spawn(struct stream_job *job, struct sbx_error *err)
{
  sbx_procs_thread_enter();
  int rc = sbx_thread_detached(stream_main, job);
  if (rc != 0) {
    sbx_procs_thread_leave();
    return sbx_err_sys(err, rc, "starting the exec thread");
  }
  return 0;
}

int sbx_session_exec_stream(struct sbx_core *core, const struct sbx_principal *who,
                            const char *id, json_t *body, const struct sbx_exec_sink *sink,
                            uint64_t token, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_exec_acquire(core, who, id, body, err);
  if (!ls)
    return -1;
  if (sbx_res_fds_take(core, who->tenant_id, ls->id, SBX_RES_FDS_PROCESS, err) < 0) {
    sbx_session_release(core, ls);
    return -1;
  }
  struct stream_job *job = calloc(1, sizeof *job);
  if (!job) {
    sbx_res_fds_give(who->tenant_id, ls->id, SBX_RES_FDS_PROCESS);
    sbx_session_release(core, ls);
    return sbx_err_sys(err, ENOMEM, "exec");
  }
  job->core = core;
  job->ls = ls;
  job->tenant = who->tenant_id;
  job->sink = *sink;
  if (sbx_schema_exec(body, ls->profile->max.timeout_s, false, &job->spec, err) < 0 ||
      sbx_core_image_exec(ls->image, &job->spec, false, err) < 0) /* image config */
    goto fail;
  if (!(job->env = sbx_session_run_env(ls, job->spec.env)) ||
      !(job->slot = sbx_session_slot_add(core, ls))) {
    sbx_err_sys(err, ENOMEM, "exec");
    goto fail;
  }
  /* Same timeout rule as the buffered exec (core/session.c). */
  double t = job->spec.timeout_s > 0 ? job->spec.timeout_s : (double)ls->limits.timeout_s;
  job->timeout_ms = (uint64_t)(t * 1000.0);
  job->token = token;
  reg_add(job);
  if (spawn(job, err) < 0) {
    reg_remove(job);
    sbx_session_slot_remove(core, ls, job->slot);
    goto fail;
  }
  return 0;
fail:
  sbx_res_fds_give(who->tenant_id, ls->id, SBX_RES_FDS_PROCESS);
  sbx_session_release(core, ls);
  job_free(job);
  return -1;
}
