/* apiloop.c — the benchmark's HTTP client (libcurl, one easy handle per
 * thread, keep-alive), so that bench.py measures the daemon and not Python.
 *
 * usage: apiloop -u BASEURL -k KEY [-n N] [-w WARMUP] [-p PAUSE_MS]
 *                [-t THREADS] [-d SECONDS] [-b EXEC_BODY [-f LOCAL=PATH]] MODE ARG
 * modes (each timed request prints one sample per line, in microseconds):
 *   get PATH        GET PATH, expects 200
 *   exec SESSION    POST /v1/sandbox/sessions/SESSION/exec EXEC_BODY (default
 *                   {"command":["true"]}), expects 200 and status succeeded
 *   create BODY     POST /v1/sandbox/sessions BODY (timed, expects 201), then
 *                   DELETE it (untimed), then sleeps PAUSE_MS; with -b, the
 *                   new session's first exec of EXEC_BODY is timed with the
 *                   create (a cold start up to the first result), and with
 *                   -f the upload of file LOCAL to PATH in the session
 *                   (PUT …/files?path=PATH) between the two
 *   hold BODY       POST /v1/sandbox/sessions BODY N times; prints the ids
 *   oneshot BODY    POST /v1/sandbox/executions BODY, then GET ?wait_s=30 until
 *                   the status is final (timed together); expects succeeded
 *   rps PATH        THREADS threads GET PATH for SECONDS; prints
 *                   "requests N errors E seconds S"
 * Any unexpected answer prints the code and body on stderr and exits 1. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct buf {
  char *p;
  size_t len, cap;
};

struct client {
  CURL *h;
  struct curl_slist *hdrs;
  struct buf body;
};

static const char *g_url, *g_key, *g_exec_body = "{\"command\":[\"true\"]}";
static bool g_create_exec;     /* -b given: create mode also runs the first exec */
static const char *g_put_path; /* -f: a file uploaded before that exec */
static char *g_put_data;
static size_t g_put_len;
static long g_n = 1000, g_warm = 0, g_pause_ms = 0, g_threads = 2;
static double g_secs = 5;

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (ms > 0 && nanosleep(&ts, &ts) < 0)
    ;
}

static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
  struct buf *b = ud;
  size_t n = sz * nm;
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->len + n + 1) * 2;
    char *p = realloc(b->p, cap);
    if (!p)
      return 0;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
  b->p[b->len] = 0;
  return n;
}

static void client_init(struct client *c)
{
  char auth[512];
  c->h = curl_easy_init();
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", g_key);
  c->hdrs = curl_slist_append(NULL, auth);
  c->hdrs = curl_slist_append(c->hdrs, "Content-Type: application/json");
  c->hdrs = curl_slist_append(c->hdrs, "Expect:");
  curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
  curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->body);
  curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 120L);
  c->body = (struct buf){0};
}

/* One request; method NULL means GET, body NULL means no body (else len
 * bytes of it). Returns the HTTP code, or -1 on a transport error (message
 * on stderr). */
static long request_len(struct client *c, const char *method, const char *path, const char *body,
                        size_t len)
{
  char url[2048];
  snprintf(url, sizeof url, "%s%s", g_url, path);
  c->body.len = 0;
  if (c->body.p)
    c->body.p[0] = 0;
  curl_easy_setopt(c->h, CURLOPT_URL, url);
  curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
  if (body) {
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)len);
  } else {
    curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
  }
  CURLcode rc = curl_easy_perform(c->h);
  if (rc != CURLE_OK) {
    fprintf(stderr, "apiloop: %s %s: %s\n", method ? method : "GET", path,
            curl_easy_strerror(rc));
    return -1;
  }
  long code = 0;
  curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

static long request(struct client *c, const char *method, const char *path, const char *body)
{
  return request_len(c, method, path, body, body ? strlen(body) : 0);
}

static void die_answer(struct client *c, const char *what, long i, long code)
{
  fprintf(stderr, "apiloop: %s (iteration %ld): HTTP %ld: %.400s\n", what, i, code,
          c->body.p ? c->body.p : "");
  exit(1);
}

/* Copies the string value of "key" from a flat JSON object into out. */
static bool json_str(const char *js, const char *key, char *out, size_t n)
{
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = js ? strstr(js, pat) : NULL;
  if (!p)
    return false;
  p += strlen(pat);
  const char *e = strchr(p, '"');
  if (!e || (size_t)(e - p) >= n)
    return false;
  memcpy(out, p, (size_t)(e - p));
  out[e - p] = 0;
  return true;
}

static void do_get(struct client *c, const char *path, long i, bool print)
{
  double t0 = now_us();
  long code = request(c, NULL, path, NULL);
  double dt = now_us() - t0;
  if (code != 200)
    die_answer(c, "get", i, code);
  if (print)
    printf("%.1f\n", dt);
}

/* One exec of g_exec_body in session sid, checked; its time in µs. */
static double exec_once(struct client *c, const char *sid, long i)
{
  char path[512];
  snprintf(path, sizeof path, "/v1/sandbox/sessions/%s/exec", sid);
  double t0 = now_us();
  long code = request(c, "POST", path, g_exec_body);
  double dt = now_us() - t0;
  char st[32];
  if (code != 200 || !json_str(c->body.p, "status", st, sizeof st) || strcmp(st, "succeeded"))
    die_answer(c, "exec", i, code);
  return dt;
}

static void do_exec(struct client *c, const char *sid, long i, bool print)
{
  double dt = exec_once(c, sid, i);
  if (print)
    printf("%.1f\n", dt);
}

static void do_create(struct client *c, const char *body, long i, bool print, bool del)
{
  char id[128], path[1024];
  double t0 = now_us();
  long code = request(c, "POST", "/v1/sandbox/sessions", body);
  double dt = now_us() - t0;
  if (code != 201 || !json_str(c->body.p, "id", id, sizeof id))
    die_answer(c, "create", i, code);
  if (del && g_create_exec) {
    if (g_put_path) {
      snprintf(path, sizeof path, "/v1/sandbox/sessions/%s/files?path=%s", id, g_put_path);
      code = request_len(c, "PUT", path, g_put_data, g_put_len);
      if (code != 200 && code != 201)
        die_answer(c, "upload", i, code);
    }
    exec_once(c, id, i);
    dt = now_us() - t0; /* create and first exec, back to back */
  }
  if (!del) {
    printf("%s\n", id);
    return;
  }
  if (print)
    printf("%.1f\n", dt);
  snprintf(path, sizeof path, "/v1/sandbox/sessions/%s", id);
  code = request(c, "DELETE", path, NULL);
  if (code != 204)
    die_answer(c, "delete", i, code);
}

static bool final_status(const char *st)
{
  return strcmp(st, "queued") && strcmp(st, "running");
}

static void do_oneshot(struct client *c, const char *body, long i, bool print)
{
  char id[128], st[32], path[256];
  double t0 = now_us();
  long code = request(c, "POST", "/v1/sandbox/executions", body);
  if (code != 202 || !json_str(c->body.p, "id", id, sizeof id) ||
      !json_str(c->body.p, "status", st, sizeof st))
    die_answer(c, "oneshot create", i, code);
  snprintf(path, sizeof path, "/v1/sandbox/executions/%s?wait_s=30", id);
  while (!final_status(st)) {
    code = request(c, NULL, path, NULL);
    if (code != 200 || !json_str(c->body.p, "status", st, sizeof st))
      die_answer(c, "oneshot wait", i, code);
  }
  double dt = now_us() - t0;
  if (strcmp(st, "succeeded"))
    die_answer(c, "oneshot result", i, code);
  if (print)
    printf("%.1f\n", dt);
}

struct rps_arg {
  const char *path;
  double end;
  long ok, errors;
};

static void *rps_thread(void *ud)
{
  struct rps_arg *a = ud;
  struct client c;
  client_init(&c);
  while (now_us() < a->end) {
    if (request(&c, NULL, a->path, NULL) == 200)
      a->ok++;
    else
      a->errors++;
  }
  curl_easy_cleanup(c.h);
  return NULL;
}

static int do_rps(const char *path)
{
  pthread_t th[64];
  struct rps_arg args[64];
  long nt = g_threads > 64 ? 64 : g_threads;
  double t0 = now_us();
  for (long i = 0; i < nt; i++) {
    args[i] = (struct rps_arg){.path = path, .end = t0 + g_secs * 1e6};
    pthread_create(&th[i], NULL, rps_thread, &args[i]);
  }
  long ok = 0, errors = 0;
  for (long i = 0; i < nt; i++) {
    pthread_join(th[i], NULL);
    ok += args[i].ok;
    errors += args[i].errors;
  }
  printf("requests %ld errors %ld seconds %.3f\n", ok, errors, (now_us() - t0) / 1e6);
  return 0;
}

/* -f LOCAL=PATH: LOCAL's bytes, uploaded to PATH. */
static int load_put(char *spec)
{
  char *eq = strchr(spec, '=');
  if (!eq || eq == spec || eq[1] != '/')
    return -1;
  *eq = 0;
  g_put_path = eq + 1;
  FILE *f = fopen(spec, "rb");
  if (!f)
    return -1;
  struct buf b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (on_data(chunk, 1, n, &b) != n) {
      fclose(f);
      return -1;
    }
  fclose(f);
  g_put_data = b.p ? b.p : "";
  g_put_len = b.len;
  return 0;
}

static int run(const char *mode, const char *arg)
{
  struct client c;
  if (!strcmp(mode, "rps"))
    return do_rps(arg);
  client_init(&c);
  for (long i = 0; i < g_warm + g_n; i++) {
    bool print = i >= g_warm;
    if (!strcmp(mode, "get"))
      do_get(&c, arg, i, print);
    else if (!strcmp(mode, "exec"))
      do_exec(&c, arg, i, print);
    else if (!strcmp(mode, "create"))
      do_create(&c, arg, i, print, true);
    else if (!strcmp(mode, "hold"))
      do_create(&c, arg, i, print, false);
    else if (!strcmp(mode, "oneshot"))
      do_oneshot(&c, arg, i, print);
    else {
      fprintf(stderr, "apiloop: unknown mode %s\n", mode);
      return 2;
    }
    fflush(stdout);
    if (g_pause_ms > 0)
      sleep_ms(g_pause_ms);
  }
  curl_easy_cleanup(c.h);
  curl_slist_free_all(c.hdrs);
  free(c.body.p);
  return 0;
}

int main(int argc, char **argv)
{
  int o;
  while ((o = getopt(argc, argv, "u:k:n:w:p:t:d:b:f:")) != -1) {
    switch (o) {
    case 'u':
      g_url = optarg;
      break;
    case 'k':
      g_key = optarg;
      break;
    case 'n':
      g_n = atol(optarg);
      break;
    case 'w':
      g_warm = atol(optarg);
      break;
    case 'p':
      g_pause_ms = atol(optarg);
      break;
    case 't':
      g_threads = atol(optarg);
      break;
    case 'd':
      g_secs = atof(optarg);
      break;
    case 'b':
      g_exec_body = optarg;
      g_create_exec = true;
      break;
    case 'f':
      if (load_put(optarg) < 0) {
        fprintf(stderr, "apiloop: -f %s: not LOCAL=/PATH with LOCAL readable\n", optarg);
        return 2;
      }
      break;
    default:
      return 2;
    }
  }
  if (!g_url || !g_key || argc - optind != 2) {
    fprintf(
        stderr,
        "usage: apiloop -u URL -k KEY [-n N] [-w W] [-p MS] [-t T] [-d S] [-b BODY [-f F=P]] MODE ARG\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run(argv[optind], argv[optind + 1]);
  curl_global_cleanup();
  return rc;
}
