/* term.c — `sbx exec -t`: a real interactive terminal on a session.
 *
 * Starts the command as a background process with a pty the size of the
 * local window, puts the local tty in raw mode (restored on every way out:
 * return, exit, fatal signal), and then runs two loops:
 *   - a follower thread: GET …/processes/{pid}/output as SSE (its own curl
 *     handle), writing each stdout event's bytes to fd 1, re-attaching from
 *     the last offset if the stream breaks, until the `exit` event;
 *   - the main thread: keystrokes from fd 0 → POST …/stdin (raw bytes, so
 *     Ctrl-C, Ctrl-D and escape sequences reach the remote terminal as
 *     typed), SIGWINCH → POST …/resize; EOF on a non-tty stdin closes the
 *     remote input.
 * The exit status is the process's (as `sbx exec`). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/util.h"

/* One SSE line of the terminal stream (an output chunk, base64): far above
 * what the daemon sends, a bound on what a broken server can make us hold. */
#define SSE_LINE_MAX (16u << 20)

struct term {
  struct sbx_cli *cli;
  char *base;  /* …/sessions/{id}/processes/{pid} (absolute URL) */
  char *auth;  /* "Authorization: Bearer …" or NULL */
  int wake[2]; /* follower → main: the process ended */
  pthread_mutex_t lock;
  json_t *result;  /* from the exit event */
  uint64_t offset; /* next stdout byte to print */
  bool done;
  /* SSE parsing */
  struct sbx_buf line; /* bounded by SSE_LINE_MAX */
  char event[32];
  char *data;
};

static struct termios saved_tio;
static bool raw_on;
static int winch_pipe[2] = {-1, -1};

static void restore_tty(void)
{
  if (raw_on) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
    raw_on = false;
  }
}

static void on_fatal(int sig)
{
  restore_tty();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_winch(int sig)
{
  (void)sig;
  int e = errno;
  if (winch_pipe[1] >= 0)
    (void)!write(winch_pipe[1], "w", 1);
  errno = e;
}

static void raw_mode(void)
{
  if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) < 0)
    return;
  struct termios t = saved_tio;
  cfmakeraw(&t);
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) {
    raw_on = true;
    atexit(restore_tty);
    int fatal[] = {SIGTERM, SIGHUP, SIGQUIT, SIGINT};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
      signal(fatal[i], on_fatal);
  }
}

static void window_size(unsigned *cols, unsigned *rows)
{
  struct winsize ws = {0};
  *cols = 80;
  *rows = 24;
  int fds[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  for (size_t i = 0; i < 3; i++)
    if (ioctl(fds[i], TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
      *cols = ws.ws_col;
      *rows = ws.ws_row;
      return;
    }
}

/* ---- small raw requests of our own (the main handle is not shared) ---- */

static size_t discard(char *d, size_t s, size_t n, void *u)
{
  (void)d;
  (void)u;
  return s * n;
}

static long post(struct term *t, const char *suffix, const char *ctype, const void *data,
                 size_t len)
{
  CURL *c = curl_easy_init();
  if (!c)
    return 0;
  char *url = NULL;
  if (asprintf(&url, "%s%s", t->base, suffix) < 0)
    abort();
  struct curl_slist *h = NULL;
  char ct[64];
  snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
  h = curl_slist_append(h, ct);
  h = curl_slist_append(h, "Expect:");
  if (t->auth)
    h = curl_slist_append(h, t->auth);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  long code = 0;
  if (curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  free(url);
  return code;
}

static void send_resize(struct term *t)
{
  unsigned cols, rows;
  window_size(&cols, &rows);
  char body[64];
  int n = snprintf(body, sizeof body, "{\"cols\":%u,\"rows\":%u}", cols, rows);
  post(t, "/resize", "application/json", body, (size_t)n);
}

/* ---- the follower ---- */

static void write_out(const char *p, size_t n)
{
  if (sbx_write_all(STDOUT_FILENO, p, n) < 0)
    return; /* nowhere to report it: the terminal itself is gone */
}

static void on_event(struct term *t)
{
  json_t *d = t->data ? json_loads(t->data, 0, NULL) : NULL;
  if (!d)
    return;
  if (!strcmp(t->event, "stdout") || !strcmp(t->event, "stderr")) {
    json_t *txt = json_object_get(d, "data"), *b64 = json_object_get(d, "data_base64");
    uint64_t off = (uint64_t)json_integer_value(json_object_get(d, "offset"));
    size_t n = 0;
    if (json_is_string(txt)) {
      n = json_string_length(txt);
      write_out(json_string_value(txt), n);
    } else if (json_is_string(b64)) {
      size_t cap = json_string_length(b64);
      unsigned char *bin = malloc(cap + 1);
      if (bin && sodium_base642bin(bin, cap, json_string_value(b64), cap, NULL, &n, NULL,
                                   sodium_base64_VARIANT_ORIGINAL) == 0)
        write_out((const char *)bin, n);
      free(bin);
    }
    if (!strcmp(t->event, "stdout")) {
      pthread_mutex_lock(&t->lock);
      t->offset = off + n;
      pthread_mutex_unlock(&t->lock);
    }
  } else if (!strcmp(t->event, "exit")) {
    pthread_mutex_lock(&t->lock);
    t->result = json_incref(d);
    t->done = true;
    pthread_mutex_unlock(&t->lock);
  }
  json_decref(d);
}

static void on_line(struct term *t, char *line)
{
  if (!*line) { /* blank line: the event is complete */
    on_event(t);
    free(t->data);
    t->data = NULL;
    t->event[0] = '\0';
  } else if (!strncmp(line, "event: ", 7)) {
    snprintf(t->event, sizeof t->event, "%s", line + 7);
  } else if (!strncmp(line, "data: ", 6)) {
    free(t->data);
    t->data = strdup(line + 6);
  }
}

static size_t on_sse(char *p, size_t s, size_t n, void *u)
{
  struct term *t = u;
  for (size_t i = 0; i < s * n; i++) {
    if (p[i] == '\n') {
      on_line(t, t->line.data ? t->line.data : "");
      sbx_buf_clear(&t->line);
    } else if (p[i] != '\r' && sbx_buf_append(&t->line, &p[i], 1) < 0) {
      return 0; /* a line past SSE_LINE_MAX, or out of memory: end the stream */
    }
  }
  return s * n;
}

/* One attach from the current offset; true if the server said 4xx (give up). */
static bool follow_once(struct term *t)
{
  CURL *c = curl_easy_init();
  if (!c)
    return true;
  char *url = NULL;
  pthread_mutex_lock(&t->lock);
  uint64_t off = t->offset;
  pthread_mutex_unlock(&t->lock);
  if (asprintf(&url, "%s/output?stdout_offset=%llu", t->base, (unsigned long long)off) < 0)
    abort();
  struct curl_slist *h = curl_slist_append(NULL, "Accept: text/event-stream");
  if (t->auth)
    h = curl_slist_append(h, t->auth);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  sbx_buf_clear(&t->line);
  curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  free(url);
  return code >= 400 && code < 500;
}

static void *follower(void *arg)
{
  struct term *t = arg;
  for (int tries = 0; tries < 20; tries++) {
    bool give_up = follow_once(t);
    pthread_mutex_lock(&t->lock);
    bool done = t->done;
    pthread_mutex_unlock(&t->lock);
    if (done || give_up)
      break;
    usleep(200 * 1000);
  }
  (void)!write(t->wake[1], "x", 1);
  return NULL;
}

/* ---- the main loop ---- */

static void pump_input(struct term *t)
{
  bool in_open = true;
  char buf[4096];
  for (;;) {
    struct pollfd p[3] = {{.fd = t->wake[0], .events = POLLIN},
                          {.fd = winch_pipe[0], .events = POLLIN},
                          {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (p[0].revents)
      return;
    if (p[1].revents) {
      (void)!read(winch_pipe[0], buf, sizeof buf);
      send_resize(t);
    }
    if (p[2].revents) {
      ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) { /* local EOF (a pipe): the remote input ends too */
        post(t, "/stdin?eof=true", "application/octet-stream", "", 0);
        in_open = false;
        continue;
      }
      post(t, "/stdin", "application/octet-stream", buf, (size_t)n);
    }
  }
}

static int start(struct sbx_cli *cli, const char *sid, json_t *body, long long *pid)
{
  unsigned cols, rows;
  window_size(&cols, &rows);
  json_object_set_new(body, "background", json_true());
  json_object_set_new(body, "pty", json_pack("{s:i, s:i}", "cols", cols, "rows", rows));
  char *esc = sbx_http_escape(sid), *path = NULL;
  if (asprintf(&path, "/v1/sandbox/sessions/%s/exec", esc) < 0)
    abort();
  struct sbx_error err = {0};
  json_t *res = NULL;
  int r = sbx_http_json(cli->http, "POST", path, body, &res, &err);
  free(path);
  free(esc);
  if (r < 0)
    return sbx_cli_fail_call(cli, &err);
  *pid = json_integer_value(json_object_get(res, "pid"));
  json_decref(res);
  return -1;
}

int sbx_cli_term_run(struct sbx_cli *cli, const char *sid, json_t *body)
{
  long long pid = 0;
  int rc = start(cli, sid, body, &pid);
  if (rc >= 0)
    return rc;
  struct term t = {.cli = cli, .wake = {-1, -1}, .line = SBX_BUF_INIT(SSE_LINE_MAX)};
  pthread_mutex_init(&t.lock, NULL);
  char *esc = sbx_http_escape(sid);
  const char *url = cli->url;
  size_t ul = strlen(url);
  while (ul && url[ul - 1] == '/')
    ul--;
  if (asprintf(&t.base, "%.*s/v1/sandbox/sessions/%s/processes/%lld", (int)ul, url, esc, pid) <
          0 ||
      (cli->api_key && *cli->api_key &&
       asprintf(&t.auth, "Authorization: Bearer %s", cli->api_key) < 0))
    abort();
  free(esc);
  if (pipe2(t.wake, O_CLOEXEC) < 0 || pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
    perror("sbx exec: pipe");
    return SBX_EXIT_API;
  }
  signal(SIGWINCH, on_winch);
  raw_mode();
  pthread_t th;
  if (pthread_create(&th, NULL, follower, &t) != 0) {
    restore_tty();
    fputs("sbx exec: cannot start the output thread\n", stderr);
    return SBX_EXIT_API;
  }
  pump_input(&t);
  pthread_join(th, NULL);
  restore_tty();
  if (!t.result) {
    fprintf(stderr, "sbx exec: lost the terminal's output stream (process %lld)\n", pid);
    rc = SBX_EXIT_API;
  } else
    rc = sbx_cli_result_exit_code(t.result);
  json_decref(t.result);
  sbx_buf_free(&t.line);
  free(t.data);
  free(t.base);
  free(t.auth);
  return rc;
}
