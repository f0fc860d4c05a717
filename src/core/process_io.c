/* process_io.c — everything a client does with a running or ended
 * background process: list and inspect it, read its kept output
 * from a byte offset (JSON, or chunk by chunk for a follower), write its
 * stdin, signal it by name, resize its terminal. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "core/process_int.h"
#include "core/resources.h"

#define STDIN_WAIT_MS 2000 /* a full pipe answers 409 after this */
#define CHUNK_MAX (64 * 1024)

static json_t *time_json(int64_t t)
{
  if (t <= 0)
    return json_null();
  char buf[40];
  sbx_format_time(t, buf, sizeof buf);
  return json_string(buf);
}

/* The kept output is not copied into the stored result: it would double
 * what an ended process holds.  sbx_proc_result_full_locked adds it. */
json_t *sbx_proc_result_locked(struct sbx_proc *p, const struct sbx_exec_result *res)
{
  json_t *o = sbx_result_json(res);
  for (int i = 0; i < 2 && o; i++) {
    const char *name = i ? "stderr" : "stdout";
    json_object_del(o, name);
    char key[32];
    snprintf(key, sizeof key, "%s_base64", name);
    json_object_del(o, key);
    snprintf(key, sizeof key, "%s_truncated", name);
    json_object_set_new(o, key, json_boolean(sbx_capture_truncated(&p->cap[i])));
    snprintf(key, sizeof key, "%s_dropped_bytes", name);
    json_object_set_new(o, key, json_integer((json_int_t)sbx_capture_dropped(&p->cap[i])));
  }
  return o;
}

json_t *sbx_proc_result_full_locked(struct sbx_proc *p)
{
  if (!p->result)
    return NULL;
  json_t *o = json_deep_copy(p->result);
  for (int i = 0; i < 2 && o; i++) {
    size_t len = 0;
    char *buf = sbx_capture_flatten(&p->cap[i], &len);
    sbx_json_set_output(o, i ? "stderr" : "stdout", buf, buf ? len : 0);
    free(buf);
    char key[32];
    snprintf(key, sizeof key, "%s_truncated", i ? "stderr" : "stdout");
    json_object_set_new(o, key, json_boolean(sbx_capture_truncated(&p->cap[i])));
    snprintf(key, sizeof key, "%s_dropped_bytes", i ? "stderr" : "stdout");
    json_object_set_new(o, key, json_integer((json_int_t)sbx_capture_dropped(&p->cap[i])));
  }
  return o;
}

uint64_t sbx_proc_drop_output_locked(struct sbx_proc *p)
{
  if (!p->done || !p->mem)
    return 0;
  sbx_capture_release(&p->cap[0]);
  sbx_capture_release(&p->cap[1]);
  uint64_t n = p->mem;
  sbx_res_mem_give(p->tenant, n);
  p->mem = 0;
  return n;
}

json_t *sbx_proc_json_locked(struct sbx_proc *p, bool full)
{
  json_t *r = p->result;
  json_t *o =
      json_pack("{s:i, s:O, s:s, s:O, s:O, s:o, s:o, s:o}", "pid", (int)p->pid, "command",
                p->command, "status", p->done ? "exited" : "running", "exit_code",
                r ? json_object_get(r, "exit_code") : json_null(), "signal",
                r ? json_object_get(r, "signal") : json_null(), "started_at",
                time_json(p->started_at), "finished_at", time_json(p->finished_at), "pty",
                p->pty ? json_pack("{s:i, s:i}", "cols", p->cols, "rows", p->rows)
                       : json_false());
  if (!o || !full)
    return o;
  json_object_set(o, "result_status", r ? json_object_get(r, "status") : json_null());
  json_object_set(o, "reason", r ? json_object_get(r, "reason") : json_null());
  json_object_set(o, "usage", r ? json_object_get(r, "usage") : json_null());
  json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)p->cap[0].total));
  json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)p->cap[1].total));
  return o;
}

int sbx_process_list(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                     json_t **out, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_acquire(core, who, sid, err);
  if (!ls)
    return -1;
  json_t *arr = json_array();
  pthread_mutex_lock(&core->sess_lock);
  struct sbx_proc_table *t = ls->procs;
  pthread_mutex_unlock(&core->sess_lock);
  if (t) {
    pthread_mutex_lock(&t->lock);
    for (struct sbx_proc *p = t->head; p; p = p->next) {
      pthread_mutex_lock(&p->lock);
      if (p->started)
        json_array_append_new(arr, sbx_proc_json_locked(p, false));
      pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&t->lock);
  }
  sbx_session_release(core, ls);
  *out = json_pack("{s:o}", "processes", arr);
  return 0;
}

int sbx_process_get(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                    const char *pid, json_t **out, struct sbx_error *err)
{
  struct sbx_proc *p = sbx_proc_find(core, who, sid, pid, err);
  if (!p)
    return -1;
  pthread_mutex_lock(&p->lock);
  *out = sbx_proc_json_locked(p, true);
  pthread_mutex_unlock(&p->lock);
  sbx_proc_unref(p);
  return 0;
}

/* ---- output ---- */

/* Copies kept bytes of c from offset *off on, at most max, into buf
 * (contiguous: head, or tail).  An offset in the dropped middle moves to
 * the first kept byte after it (*gap set).  Returns the bytes copied and
 * leaves *off at the first one's offset. */
static size_t cap_read(const struct sbx_capture *c, uint64_t *off, char *buf, size_t max,
                       bool *gap)
{
  uint64_t tail_from = c->total - c->tail_len;
  *gap = false;
  if (*off >= c->total)
    return 0;
  if (*off < c->head_len) {
    size_t n = (size_t)(c->head_len - *off) < max ? (size_t)(c->head_len - *off) : max;
    memcpy(buf, c->head + *off, n);
    return n;
  }
  if (*off < tail_from) {
    *off = tail_from;
    *gap = true;
  }
  size_t skip = (size_t)(*off - tail_from), left = c->tail_len - skip;
  size_t n = left < max ? left : max;
  for (size_t i = 0; i < n;) { /* the ring may wrap once */
    size_t idx = (c->tail_start + skip + i) % c->tail_cap;
    size_t run = c->tail_cap - idx < n - i ? c->tail_cap - idx : n - i;
    memcpy(buf + i, c->tail + idx, run);
    i += run;
  }
  return n;
}

/* All kept bytes from *off on (head, then tail), for the JSON read. */
static char *cap_read_all(const struct sbx_capture *c, uint64_t *off, size_t *len,
                          int64_t *gap_at)
{
  char *buf = malloc(c->head_len + c->tail_len + 1);
  size_t n = 0;
  uint64_t first = *off;
  bool started = false;
  *gap_at = -1;
  while (buf) {
    bool gap;
    uint64_t at = *off;
    size_t k = cap_read(c, &at, buf + n, c->head_len + c->tail_len - n, &gap);
    if (k == 0)
      break;
    if (!started)
      first = at;
    else if (gap)
      *gap_at = (int64_t)n;
    started = true;
    n += k;
    *off = at + k;
  }
  if (buf)
    buf[n] = '\0';
  *off = started ? first : (*off < c->total ? *off : c->total);
  *len = n;
  return buf;
}

int sbx_process_output(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, const uint64_t from[2], json_t **out,
                       struct sbx_error *err)
{
  struct sbx_proc *p = sbx_proc_find(core, who, sid, pid, err);
  if (!p)
    return -1;
  json_t *o = json_object();
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < 2 && o; i++) {
    const char *name = i ? "stderr" : "stdout";
    char key[40];
    uint64_t off = from[i];
    size_t len = 0;
    int64_t gap_at;
    char *buf = cap_read_all(&p->cap[i], &off, &len, &gap_at);
    sbx_json_set_output(o, name, buf, len);
    free(buf);
    snprintf(key, sizeof key, "%s_offset", name);
    json_object_set_new(o, key, json_integer((json_int_t)off));
    snprintf(key, sizeof key, "%s_next_offset", name);
    json_object_set_new(o, key, json_integer((json_int_t)p->cap[i].total));
    snprintf(key, sizeof key, "%s_dropped_bytes", name);
    json_object_set_new(o, key, json_integer((json_int_t)sbx_capture_dropped(&p->cap[i])));
    snprintf(key, sizeof key, "%s_skipped", name); /* asked offset was not kept */
    json_object_set_new(o, key, json_boolean(off > from[i] && from[i] < p->cap[i].total));
    snprintf(key, sizeof key, "%s_gap_at", name);
    json_object_set_new(o, key, gap_at >= 0 ? json_integer(gap_at) : json_null());
  }
  json_object_set_new(o, "status", json_string(p->done ? "exited" : "running"));
  json_t *full = sbx_proc_result_full_locked(p);
  json_object_set_new(o, "result", full ? full : json_null());
  pthread_mutex_unlock(&p->lock);
  sbx_proc_unref(p);
  *out = o;
  return 0;
}

int sbx_process_next(struct sbx_proc *p, uint64_t off[2], struct sbx_proc_chunk *c,
                     unsigned timeout_ms, json_t **result)
{
  struct timespec until;
  sbx_timespec_in(CLOCK_MONOTONIC, timeout_ms, &until);
  int rc = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (p->end_reason) { /* the session is gone: nothing more will come */
      *result = json_pack("{s:s}", "reason", p->end_reason);
      rc = -2;
      goto out;
    }
    for (int i = 0; i < 2; i++) {
      uint64_t at = off[i];
      bool gap;
      size_t n = cap_read(&p->cap[i], &at, c->data, sizeof c->data, &gap);
      if (n == 0 && !(gap && at > off[i])) /* a released log: only the gap is left */
        continue;
      c->stream = i + 1;
      c->len = n;
      c->offset = at;
      c->gap_from = gap ? off[i] : at;
      off[i] = at + n;
      rc = 1;
      goto out;
    }
    if (p->done) {
      *result = sbx_proc_result_full_locked(p);
      rc = -1;
      goto out;
    }
    if (pthread_cond_timedwait(&p->cond, &p->lock, &until) != 0)
      goto out;
  }
out:
  pthread_mutex_unlock(&p->lock);
  return rc;
}

struct sbx_proc *sbx_process_attach(struct sbx_core *core, const struct sbx_principal *who,
                                    const char *sid, const char *pid, struct sbx_error *err)
{
  return sbx_proc_find(core, who, sid, pid, err);
}

void sbx_process_detach(struct sbx_proc *p) { sbx_proc_unref(p); }

/* ---- stdin ---- */

static int exited(struct sbx_error *err)
{
  sbx_err_set(err, SBX_E_CONFLICT, 0, "the process has exited");
  return sbx_err_fr(err, "Le processus s'est terminé");
}

/* Writes all of data to fd (non-blocking) within STDIN_WAIT_MS. */
static size_t write_bounded(int fd, const char *data, size_t len)
{
  size_t done = 0;
  uint64_t deadline = sbx_now_ms() + STDIN_WAIT_MS;
  while (done < len) {
    ssize_t n = write(fd, data + done, len - done);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    uint64_t now = sbx_now_ms();
    if (n == 0 || errno != EAGAIN || now >= deadline)
      break;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    poll(&pf, 1, (int)(deadline - now));
  }
  return done;
}

/* A dup of where stdin goes (pipe or terminal), or -1 if it is closed. */
static int stdin_target(struct sbx_proc *p, bool *pty)
{
  pthread_mutex_lock(&p->lock);
  *pty = p->pty;
  int src = p->done ? -1 : p->pty ? p->pty_fd : p->stdin_w;
  int fd = src >= 0 ? fcntl(src, F_DUPFD_CLOEXEC, 3) : -1;
  pthread_mutex_unlock(&p->lock);
  return fd;
}

static int stdin_full(struct sbx_error *err, size_t done, size_t len)
{
  sbx_err_set(err, SBX_E_CONFLICT, 0,
              "the process's stdin is full (it is not reading): "
              "%zu of %zu bytes were written; retry the rest later",
              done, len);
  return sbx_err_fr(err,
                    "L'entrée standard du processus est pleine (il ne lit pas) : %zu "
                    "octets sur %zu écrits ; réessayez plus tard",
                    done, len);
}

int sbx_process_stdin(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                      const char *pid, const char *data, size_t len, bool eof, json_t **out,
                      struct sbx_error *err)
{
  struct sbx_proc *p = sbx_proc_find(core, who, sid, pid, err);
  if (!p)
    return -1;
  int rc = -1;
  size_t done = 0;
  pthread_mutex_lock(&p->in_lock);
  bool pty;
  int fd = stdin_target(p, &pty);
  if (fd < 0) {
    exited(err);
    goto out;
  }
  done = write_bounded(fd, data, len);
  /* A terminal's end of input is its EOF character (^D), as typed. */
  bool eof_lost = done == len && eof && pty && write_bounded(fd, "\x04", 1) != 1;
  close(fd);
  if (done < len || eof_lost) {
    stdin_full(err, done, len);
    goto out;
  }
  if (eof && !pty) { /* the daemon needs the pipe no more: its fd goes back too */
    pthread_mutex_lock(&p->lock);
    close(p->stdin_w);
    p->stdin_w = -1;
    bool give = p->fds > 0;
    p->fds -= give;
    pthread_mutex_unlock(&p->lock);
    if (give)
      sbx_res_fds_give(p->tenant, sid, 1);
  }
  *out = json_pack("{s:I, s:b}", "written", (json_int_t)done, "eof", eof);
  rc = 0;
out:
  pthread_mutex_unlock(&p->in_lock);
  sbx_proc_unref(p);
  return rc;
}

/* ---- signals, resize ---- */

static const struct {
  const char *name;
  int signo;
} signals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

/* "SIGINT", "INT", "sigint" → SIGINT; -1 if unknown. */
int sbx_signal_parse(const char *name)
{
  if (strncasecmp(name, "SIG", 3) == 0)
    name += 3;
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
    if (strcasecmp(signals[i].name, name) == 0)
      return signals[i].signo;
  return -1;
}

static int parse_signal(json_t *body, int *signo, struct sbx_error *err)
{
  static const char *const allowed[] = {"signal", NULL};
  json_t *v = json_object_get(body, "signal");
  if (sbx_schema_only(body, "", allowed, err) < 0)
    return -1;
  if (!json_is_string(v) || (*signo = sbx_signal_parse(json_string_value(v))) < 0) {
    sbx_err_field(err, "signal",
                  "signal must be a signal name such as \"SIGINT\", \"TERM\", "
                  "\"KILL\", \"HUP\" or \"USR1\"");
    return sbx_err_fr(err, "Requête invalide : signal doit être un nom de signal comme "
                           "« SIGINT », « TERM », « KILL », « HUP » ou « USR1 »");
  }
  return 0;
}

int sbx_process_signal(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, json_t *body, json_t **out, struct sbx_error *err)
{
  int signo = -1;
  if (parse_signal(body, &signo, err) < 0)
    return -1;
  struct sbx_proc *p = sbx_proc_find(core, who, sid, pid, err);
  if (!p)
    return -1;
  pthread_mutex_lock(&p->lock);
  int rc = p->done || p->ctl_fd < 0 ? exited(err) : sbx_exec_signal(p->ctl_fd, signo, err);
  pthread_mutex_unlock(&p->lock);
  if (rc == 0)
    *out = json_pack("{s:i, s:i}", "pid", atoi(pid), "signal", signo);
  else if (err->code == SBX_E_CONFLICT)
    exited(err);
  sbx_proc_unref(p);
  return rc;
}

static int parse_size(json_t *body, unsigned *cols, unsigned *rows, struct sbx_error *err)
{
  static const char *const allowed[] = {"cols", "rows", NULL};
  if (sbx_schema_only(body, "", allowed, err) < 0)
    return -1;
  const char *names[2] = {"cols", "rows"};
  unsigned *dst[2] = {cols, rows};
  for (int i = 0; i < 2; i++) {
    json_t *v = json_object_get(body, names[i]);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096) {
      sbx_err_field(err, names[i], "%s must be an integer from 1 to 4096", names[i]);
      return sbx_err_fr(err, "Requête invalide : %s doit être un entier de 1 à 4096", names[i]);
    }
    *dst[i] = (unsigned)json_integer_value(v);
  }
  return 0;
}

int sbx_process_resize(struct sbx_core *core, const struct sbx_principal *who, const char *sid,
                       const char *pid, json_t *body, json_t **out, struct sbx_error *err)
{
  unsigned cols, rows;
  if (parse_size(body, &cols, &rows, err) < 0)
    return -1;
  struct sbx_proc *p = sbx_proc_find(core, who, sid, pid, err);
  if (!p)
    return -1;
  int rc = -1;
  pthread_mutex_lock(&p->lock);
  if (!p->pty) {
    sbx_err_set(err, SBX_E_CONFLICT, 0, "process %s has no terminal (start it with pty)", pid);
    sbx_err_fr(err, "Le processus %s n'a pas de terminal (démarrez-le avec pty)", pid);
  } else if (p->done || p->pty_fd < 0) {
    exited(err);
  } else if ((rc = sbx_exec_resize(p->pty_fd, cols, rows, err)) == 0) {
    p->cols = cols;
    p->rows = rows;
    *out = json_pack("{s:i, s:i}", "cols", cols, "rows", rows);
  }
  pthread_mutex_unlock(&p->lock);
  sbx_proc_unref(p);
  return rc;
}
