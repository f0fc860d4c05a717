/* e2b_process.c — envd's Connect service process.Process over our
 * background processes (core/process.c): Start (a command or a pty) and
 * Connect are server streams of ProcessEvent (start, data, end,
 * keepalive), fed by a follower thread like the SSE one of
 * h_processes.c; List, SendInput, CloseStdin, SendSignal and Update
 * (terminal resize) are unary.  Connect-Timeout-Ms on Start is the
 * process's deadline, as in envd: it is killed then, whether or not its
 * client is still there (a client that merely leaves does not kill it);
 * on Connect it only bounds the stream.  Both end deadline_exceeded.  StreamInput (client streaming) needs
 * HTTP/2 end to end and is answered unimplemented. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/handlers.h"
#include "api/sse.h"
#include "common/util.h"
#include "core/core.h"

#define QUEUE_BYTES (1u << 20)
#define POLL_MS 1000
#define KEEPALIVE_MS 15000

struct follower {
  struct sbx_proc *p;
  struct sbx_sse *sse;
  struct sbx_core *core;
  struct sbx_principal who;
  char sid[256], pid[16];
  bool pty;
  bool kill_at_deadline; /* Start: the deadline is the process's too */
  uint64_t deadline_ms;  /* monotonic ms, 0 = none */
  uint64_t off[2];
};

/* Queues one frame, waiting while the client is slow; false once gone. */
static bool send_frame(struct sbx_sse *sse, char *f, size_t len)
{
  for (;;) {
    char *copy = f ? malloc(len) : NULL;
    if (!copy) {
      free(f);
      return false;
    }
    memcpy(copy, f, len);
    int rc = sbx_sse_push_raw(sse, copy, len, POLL_MS);
    if (rc != 1) {
      free(f);
      return rc == 0;
    }
  }
}

static bool send_event(struct sbx_sse *sse, const char *kind, json_t *value)
{
  size_t len = 0;
  char *f = sbx_e2b_frame(0, json_pack("{s:{s:o}}", "event", kind, value), &len);
  return send_frame(sse, f, len);
}

static bool send_chunk(struct follower *f, const struct sbx_proc_chunk *c)
{
  const char *name = f->pty ? "pty" : c->stream == 2 ? "stderr" : "stdout";
  json_t *b = sbx_e2b_b64(c->data, c->len);
  return b && send_event(f->sse, "data", json_pack("{s:o}", name, b));
}

/* Our result → envd's EndEvent {exitCode, exited, status, error?}. */
static json_t *end_event(json_t *res)
{
  json_t *ec = json_object_get(res, "exit_code"), *sig = json_object_get(res, "signal");
  char status[96];
  bool exited = json_is_integer(ec);
  if (exited)
    snprintf(status, sizeof status, "exit status %lld", (long long)json_integer_value(ec));
  else if (json_is_string(sig))
    snprintf(status, sizeof status, "signal: %s", json_string_value(sig));
  else if (json_is_integer(sig))
    snprintf(status, sizeof status, "signal: %lld", (long long)json_integer_value(sig));
  else
    snprintf(status, sizeof status, "%s",
             json_string_value(json_object_get(res, "status")) ?: "unknown");
  json_int_t code = exited ? json_integer_value(ec) : -1;
  json_t *o = json_pack("{s:I, s:b, s:s}", "exitCode", code, "exited", exited, "status", status);
  if (code != 0)
    json_object_set_new(o, "error", json_string(status));
  return o;
}

/* At the call's deadline: Start kills its process (envd runs it under the
 * request's timeout); Connect only ends its stream. */
static void deadline_passed(struct follower *f, bool client_gone)
{
  if (f->kill_at_deadline) {
    json_t *body = json_pack("{s:s}", "signal", "SIGKILL"), *res = NULL;
    struct sbx_error ignore = {0};
    sbx_process_signal(f->core, &f->who, f->sid, f->pid, body, &res, &ignore);
    json_decref(body);
    json_decref(res);
  }
  if (client_gone)
    return;
  size_t len = 0;
  char *fr =
      sbx_e2b_frame(0x02,
                    json_pack("{s:{s:s, s:s}}", "error", "code", "deadline_exceeded", "message",
                              f->kill_at_deadline
                                  ? "the call's deadline passed: the process was "
                                    "killed"
                                  : "the call's deadline passed"),
                    &len);
  send_frame(f->sse, fr, len);
}

/* Relays the process until it ends or the client leaves; a Start with a
 * deadline outlives its client, since its process must still die then. */
static void *follow_main(void *arg)
{
  struct follower *f = arg;
  struct sbx_proc_chunk *c = malloc(sizeof *c);
  uint64_t quiet_since = sbx_now_ms();
  bool open = c && send_event(f->sse, "start", json_pack("{s:i}", "pid", atoi(f->pid)));
  bool watch_deadline = f->kill_at_deadline && f->deadline_ms;
  while (c) {
    bool gone = !open || sbx_sse_gone(f->sse);
    if (gone && !watch_deadline)
      break;
    if (f->deadline_ms && sbx_now_ms() >= f->deadline_ms) {
      deadline_passed(f, gone);
      break;
    }
    json_t *result = NULL;
    int rc = sbx_process_next(f->p, f->off, c, POLL_MS, &result);
    if (rc == 1 && !gone) {
      open = send_chunk(f, c);
      quiet_since = sbx_now_ms();
    } else if (rc < 0) {
      if (!gone && send_event(f->sse, "end", end_event(result))) {
        size_t len = 0;
        char *fr = sbx_e2b_end_frame(NULL, &len);
        send_frame(f->sse, fr, len);
      }
      json_decref(result);
      break;
    } else if (rc == 0 && !gone && sbx_now_ms() - quiet_since >= KEEPALIVE_MS) {
      open = send_event(f->sse, "keepalive", json_object());
      quiet_since = sbx_now_ms();
    }
  }
  sbx_sse_finish(f->sse);
  free(c);
  sbx_sse_unref(f->sse);
  sbx_process_detach(f->p);
  free(f);
  return NULL;
}

static int follow(struct sbx_req *r, struct sbx_resp *out, const char *pid, bool pty,
                  bool kill_at_deadline, struct sbx_error *err)
{
  struct follower *f = calloc(1, sizeof *f);
  if (!f)
    return sbx_err_sys(err, ENOMEM, "follower");
  f->core = r->core;
  f->who = r->who;
  f->pty = pty;
  f->kill_at_deadline = kill_at_deadline;
  snprintf(f->sid, sizeof f->sid, "%s", sbx_e2b_sid(r));
  snprintf(f->pid, sizeof f->pid, "%s", pid);
  unsigned long ms = sbx_e2b_deadline_ms(r);
  f->deadline_ms = ms ? sbx_now_ms() + ms : 0;
  if (!(f->p = sbx_process_attach(r->core, &r->who, f->sid, f->pid, err))) {
    free(f);
    return -1;
  }
  if (!(f->sse = sbx_sse_new(QUEUE_BYTES))) {
    sbx_process_detach(f->p);
    free(f);
    return sbx_err_sys(err, ENOMEM, "event stream");
  }
  sbx_sse_respond_raw(out, f->sse, "application/connect+json", NULL, NULL);
  int rc = sbx_thread_detached(follow_main, f);
  if (rc != 0) {
    sbx_sse_finish(f->sse);
    sbx_sse_unref(f->sse);
    sbx_process_detach(f->p);
    free(f);
  }
  return 0;
}

/* ---- Start ---- */

/* ProcessConfig {cmd, args, envs, cwd} → our exec body. */
static json_t *start_body(json_t *msg, bool *pty, struct sbx_error *err)
{
  json_t *pc = json_object_get(msg, "process");
  const char *cmd = json_string_value(json_object_get(pc, "cmd"));
  json_t *args = json_object_get(pc, "args"), *envs = json_object_get(pc, "envs");
  json_t *cwd = json_object_get(pc, "cwd"), *pt = json_object_get(msg, "pty");
  if (!cmd || !*cmd) {
    sbx_err_field(err, "process.cmd", "process.cmd must name the program to run");
    return NULL;
  }
  if (args && !json_is_array(args)) {
    sbx_err_field(err, "process.args", "process.args must be a list of strings");
    return NULL;
  }
  json_t *argv = json_pack("[s]", cmd), *a;
  size_t i;
  json_array_foreach(args, i, a) json_array_append(argv, a); /* core checks each is a string */
  json_t *b = json_pack("{s:o, s:b}", "command", argv, "background", 1);
  if (json_is_object(envs))
    json_object_set(b, "env", envs);
  if (json_is_string(cwd) && json_string_length(cwd))
    json_object_set(b, "cwd", cwd);
  *pty = json_is_object(pt);
  if (*pty) {
    json_t *size = json_object_get(pt, "size");
    json_int_t cols = json_integer_value(json_object_get(size, "cols"));
    json_int_t rows = json_integer_value(json_object_get(size, "rows"));
    json_object_set_new(b, "pty",
                        json_pack("{s:I, s:I}", "cols", cols > 0 ? cols : 80, "rows",
                                  rows > 0 ? rows : 24));
  }
  return b;
}

int sbx_h_e2b_proc_start(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err);
  if (!msg)
    return -1;
  bool pty = false;
  json_t *body = start_body(msg, &pty, err), *res = NULL;
  bool keep_stdin = json_is_true(json_object_get(msg, "stdin")) || pty;
  json_decref(msg);
  if (!body)
    return -1;
  int rc = sbx_process_start(r->core, &r->who, sbx_e2b_sid(r), body, &res, err);
  json_decref(body);
  if (rc < 0)
    return -1;
  char pid[16];
  snprintf(pid, sizeof pid, "%lld", (long long)json_integer_value(json_object_get(res, "pid")));
  json_decref(res);
  if (!keep_stdin) { /* envd gives such a command no stdin: it reads EOF, never waits */
    struct sbx_error ignore = {0};
    json_t *o = NULL;
    sbx_process_stdin(r->core, &r->who, sbx_e2b_sid(r), pid, "", 0, true, &o, &ignore);
    json_decref(o);
  }
  return follow(r, out, pid, pty, true, err);
}

/* ---- the selector of the other calls ---- */

static int selected_pid(json_t *msg, char pid[16], struct sbx_error *err)
{
  json_t *sel = json_object_get(msg, "process"), *p = json_object_get(sel, "pid");
  if (json_object_get(sel, "tag")) {
    sbx_err_set(err, SBX_E_NOT_FOUND, 0,
                "no process has that tag: sandboxd names processes "
                "by pid only");
    return sbx_err_fr(err, "Aucun processus n'a cette étiquette");
  }
  if (!json_is_integer(p) || json_integer_value(p) <= 0)
    return sbx_err_field(err, "process.pid", "process.pid must be a process id");
  snprintf(pid, 16, "%lld", (long long)json_integer_value(p));
  return 0;
}

int sbx_h_e2b_proc_connect(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *info = NULL;
  char pid[16];
  if (!msg)
    return -1;
  int rc = selected_pid(msg, pid, err);
  json_decref(msg);
  if (rc < 0 || sbx_process_get(r->core, &r->who, sbx_e2b_sid(r), pid, &info, err) < 0)
    return -1;
  bool pty = json_is_object(json_object_get(info, "pty"));
  json_decref(info);
  return follow(r, out, pid, pty, false, err);
}

static json_t *process_info(json_t *p)
{
  json_t *cmd = json_object_get(p, "command"), *args = json_array(), *a;
  size_t i;
  json_array_foreach(cmd, i, a) if (i > 0) json_array_append(args, a);
  const char *prog = json_string_value(json_array_get(cmd, 0));
  return json_pack("{s:{s:s, s:o, s:{}}, s:O}", "config", "cmd", prog ? prog : "", "args", args,
                   "envs", "pid", json_object_get(p, "pid"));
}

int sbx_h_e2b_proc_list(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *res = NULL, *arr = json_array(), *p;
  if (sbx_process_list(r->core, &r->who, sbx_e2b_sid(r), &res, err) < 0) {
    json_decref(arr);
    return -1;
  }
  size_t i;
  json_array_foreach(json_object_get(res, "processes"), i,
                     p) if (!strcmp(json_string_value(json_object_get(p, "status")) ?: "",
                                    "running")) json_array_append_new(arr, process_info(p));
  json_decref(res);
  sbx_resp_json(out, 200, json_pack("{s:o}", "processes", arr));
  return 0;
}

/* The end of every unary process call: core's answer is not E2B's (an
 * empty message), so it is dropped and {} sent once the call succeeded. */
static int empty_reply(struct sbx_resp *out, int rc, json_t *core_res)
{
  json_decref(core_res);
  if (rc < 0)
    return -1;
  sbx_resp_json(out, 200, json_object());
  return 0;
}

int sbx_h_e2b_proc_input(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *res = NULL;
  char pid[16], *data = NULL;
  size_t len = 0;
  if (!msg)
    return -1;
  json_t *in = json_object_get(msg, "input");
  json_t *b =
      json_object_get(in, "stdin") ? json_object_get(in, "stdin") : json_object_get(in, "pty");
  int rc = selected_pid(msg, pid, err);
  if (rc == 0 && sbx_e2b_unb64(b, &data, &len) < 0)
    rc = sbx_err_field(err, "input", "input.stdin or input.pty must be base64 bytes");
  json_decref(msg);
  if (rc == 0)
    rc = sbx_process_stdin(r->core, &r->who, sbx_e2b_sid(r), pid, data, len, false, &res, err);
  free(data);
  return empty_reply(out, rc, res);
}

int sbx_h_e2b_proc_close_stdin(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *res = NULL;
  char pid[16];
  if (!msg)
    return -1;
  int rc = selected_pid(msg, pid, err);
  json_decref(msg);
  if (rc == 0)
    rc = sbx_process_stdin(r->core, &r->who, sbx_e2b_sid(r), pid, "", 0, true, &res, err);
  return empty_reply(out, rc, res);
}

/* Signal is an enum: its name or its number (SIGNAL_SIGKILL = 9). */
static const char *signal_name(json_t *s)
{
  const char *n = json_string_value(s);
  if (n && !strncmp(n, "SIGNAL_", 7))
    return n + 7;
  if (json_is_integer(s))
    return json_integer_value(s) == 9    ? "SIGKILL"
           : json_integer_value(s) == 15 ? "SIGTERM"
                                         : NULL;
  return NULL;
}

int sbx_h_e2b_proc_signal(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *res = NULL;
  char pid[16];
  if (!msg)
    return -1;
  int rc = selected_pid(msg, pid, err);
  const char *sig = signal_name(json_object_get(msg, "signal"));
  if (rc == 0 && !sig)
    rc = sbx_err_field(err, "signal", "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
  json_t *body = rc == 0 ? json_pack("{s:s}", "signal", sig) : NULL;
  json_decref(msg);
  if (rc == 0)
    rc = sbx_process_signal(r->core, &r->who, sbx_e2b_sid(r), pid, body, &res, err);
  json_decref(body);
  return empty_reply(out, rc, res);
}

int sbx_h_e2b_proc_update(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  json_t *msg = sbx_e2b_connect_msg(r, err), *res = NULL;
  char pid[16];
  if (!msg)
    return -1;
  int rc = selected_pid(msg, pid, err);
  json_t *size = json_object_get(json_object_get(msg, "pty"), "size");
  json_t *body =
      json_pack("{s:I, s:I}", "cols", json_integer_value(json_object_get(size, "cols")), "rows",
                json_integer_value(json_object_get(size, "rows")));
  json_decref(msg);
  if (rc == 0)
    rc = sbx_process_resize(r->core, &r->who, sbx_e2b_sid(r), pid, body, &res, err);
  json_decref(body);
  return empty_reply(out, rc, res);
}

int sbx_h_e2b_proc_stream_input(struct sbx_req *r, struct sbx_resp *out, struct sbx_error *err)
{
  (void)out, (void)r;
  sbx_err_set(err, SBX_E_METHOD, 0,
              "StreamInput (client streaming) is not supported: use "
              "SendInput, as the SDKs do");
  return sbx_err_fr(err, "StreamInput n'est pas pris en charge : utilisez SendInput");
}
