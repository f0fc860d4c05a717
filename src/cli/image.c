/* image.c — `sbx image pull|ls|rm|gc`: the daemon's image store
 * (/v1/sandbox/images).  pull streams the daemon's progress events
 * (POST …/images/pull with Accept: text/event-stream) on its own libcurl
 * handle, like term.c's follower, because cli/http.c keeps whole answers
 * in memory; it draws a progress bar on a terminal and one plain line per
 * blob otherwise.  pull, rm and gc need an admin key. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "common/buf.h"
#include "common/cleanup.h"

#define MAX_ERR_BODY (64u << 10) /* an error envelope, not a stream */
#define MAX_LINE (64u << 10)     /* one SSE line; progress events are ~150 bytes */
#define MAX_BLOBS 256            /* progress rows kept; more are still counted */

static const char help[] =
    "Usage: sbx image pull REF\n"
    "       sbx image ls [--json]\n"
    "       sbx image rm REF\n"
    "       sbx image gc [--json]\n"
    "\n"
    "  pull   have sandboxd pull REF (name[:tag] or name@sha256:…) from its\n"
    "         registry; shows a progress bar on a terminal (each blob and the\n"
    "         total bytes), one line per downloaded blob otherwise, then the\n"
    "         canonical reference and the manifest digest\n"
    "  ls     list the stored images: REF DIGEST SIZE LAYERS (--json prints\n"
    "         the JSON array of image objects)\n"
    "  rm     forget REF (its layers go at the next gc unless shared)\n"
    "  gc     remove blobs and layers no image uses (never a layer in use)\n"
    "\n"
    "pull, rm and gc need an admin key; ls works with any key.  Interrupting\n"
    "a pull (Ctrl-C) stops the display only: sandboxd finishes the pull.\n"
    "\n"
    "Options: --url URL, --api-key KEY (see `sbx --help`), -h/--help.\n"
    "Exit status: 0 on success, 1 for an API or network error (e.g. the\n"
    "registry refused the pull), 2 for a usage error, 130 if interrupted.\n";

static const struct option longopts[] = {
    SBX_CLI_COMMON_LONGOPTS,
    {"json", no_argument, NULL, SBX_OPT_SUB_JSON},
    {NULL, 0, NULL, 0},
};

/* "1.5 MB" style, powers of 1000 like docker. */
static const char *human(uint64_t n, char *buf, size_t len)
{
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = (double)n;
  size_t u = 0;
  while (v >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1000;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%" PRIu64 " B", n);
  else
    snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

/* "sha256:0123456789ab…" → "0123456789ab" (what docker shows). */
static const char *short_digest(const char *d, char *buf, size_t len)
{
  const char *colon = d ? strchr(d, ':') : NULL;
  snprintf(buf, len, "%.12s", colon ? colon + 1 : (d ? d : "-"));
  return buf;
}

/* ---- pull: the event stream ---- */

struct blob {
  char digest[80];
  uint64_t done, total;
  bool finished;
};

struct pull {
  CURL *curl;
  long status; /* 0 until the first body byte */
  bool tty;
  /* a non-200 answer's body (the error envelope) */
  struct sbx_buf body; /* bounded by MAX_ERR_BODY */
  /* the SSE parser */
  char *line;
  size_t line_len;
  bool line_overflow;
  char event[32];
  char *data;
  /* progress */
  struct blob blobs[MAX_BLOBS];
  size_t nblobs;
  bool bar_shown;
  /* the outcome */
  json_t *done;  /* the `done` event's data */
  json_t *error; /* the `error` event's data */
};

static int term_width(void)
{
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
    return ws.ws_col;
  return 80;
}

static void clear_bar(struct pull *p)
{
  if (p->bar_shown)
    fputs("\r\033[K", stderr);
  p->bar_shown = false;
}

/* The terminal's one live line: the current blob's bar, then the totals
 * over every blob seen so far (the daemon names blobs as it fetches them). */
static void draw_bar(struct pull *p, const struct blob *b)
{
  uint64_t done = 0, total = 0;
  for (size_t i = 0; i < p->nblobs; i++) {
    done += p->blobs[i].done;
    total += p->blobs[i].total;
  }
  char d1[16], t1[16], d2[16], t2[16], sd[16];
  int width = term_width() - 70;
  width = width < 10 ? 10 : width > 40 ? 40 : width;
  int fill = b->total ? (int)((double)b->done / (double)b->total * width) : 0;
  fill = fill > width ? width : fill;
  fprintf(stderr, "\r\033[K%s [%.*s%*s] %s/%s  total %s/%s",
          short_digest(b->digest, sd, sizeof sd), fill,
          "########################################", width - fill, "",
          human(b->done, d1, sizeof d1), human(b->total, t1, sizeof t1),
          human(done, d2, sizeof d2), human(total, t2, sizeof t2));
  p->bar_shown = true;
}

static struct blob *find_blob(struct pull *p, const char *digest)
{
  for (size_t i = 0; i < p->nblobs; i++)
    if (!strcmp(p->blobs[i].digest, digest))
      return &p->blobs[i];
  if (p->nblobs == MAX_BLOBS)
    return NULL;
  struct blob *b = &p->blobs[p->nblobs++];
  snprintf(b->digest, sizeof b->digest, "%s", digest);
  return b;
}

static void on_progress(struct pull *p, json_t *d)
{
  const char *digest = json_string_value(json_object_get(d, "blob"));
  json_t *jd = json_object_get(d, "done"), *jt = json_object_get(d, "total");
  if (!digest || !json_is_integer(jd) || !json_is_integer(jt))
    return;
  struct blob *b = find_blob(p, digest);
  if (!b || b->finished)
    return;
  b->done = (uint64_t)json_integer_value(jd);
  b->total = (uint64_t)json_integer_value(jt);
  bool final = b->total && b->done >= b->total;
  char sz[16];
  if (final) {
    b->finished = true;
    clear_bar(p);
    fprintf(stderr, "%s: downloaded %s\n", b->digest, human(b->total, sz, sizeof sz));
  } else if (p->tty) {
    draw_bar(p, b);
  }
  fflush(stderr);
}

static void on_event(struct pull *p)
{
  if (!p->data)
    return;
  json_t *d = json_loads(p->data, 0, NULL);
  if (!json_is_object(d)) {
    json_decref(d);
    return;
  }
  if (!strcmp(p->event, "progress")) {
    on_progress(p, d);
  } else if (!strcmp(p->event, "done") && !p->done && !p->error) {
    p->done = json_incref(d);
  } else if (!strcmp(p->event, "error") && !p->done && !p->error) {
    p->error = json_incref(d);
  }
  json_decref(d);
}

static void on_line(struct pull *p, const char *line)
{
  if (!*line) { /* a blank line ends the event */
    on_event(p);
    free(p->data);
    p->data = NULL;
    p->event[0] = '\0';
  } else if (!strncmp(line, "event:", 6)) {
    line += 6;
    snprintf(p->event, sizeof p->event, "%s", line + (*line == ' '));
  } else if (!strncmp(line, "data:", 5)) {
    line += 5;
    free(p->data); /* our events carry one data line */
    p->data = strdup(line + (*line == ' '));
  } /* comments (": keep-alive") and unknown fields are ignored */
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
  struct pull *p = ud;
  size_t n = size * nmemb;
  if (!p->status)
    curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &p->status);
  if (p->status != 200) { /* an error envelope: keep it (bounded) */
    size_t keep = p->body.max - p->body.len < n ? p->body.max - p->body.len : n;
    return sbx_buf_append(&p->body, ptr, keep) < 0 ? 0 : n;
  }
  for (size_t i = 0; i < n; i++) {
    if (ptr[i] == '\n') {
      if (!p->line_overflow) {
        p->line[p->line_len] = '\0';
        on_line(p, p->line);
      }
      p->line_len = 0;
      p->line_overflow = false;
    } else if (ptr[i] != '\r') {
      if (p->line_len + 1 < MAX_LINE)
        p->line[p->line_len++] = ptr[i];
      else
        p->line_overflow = true; /* not one of ours: skipped whole */
    }
  }
  return n;
}

static int on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
  (void)ud, (void)dt, (void)dn, (void)ut, (void)un;
  return sbx_cli_interrupted ? 1 : 0;
}

/* A non-200 answer: the envelope's "code: message" (as cli/http.c says it). */
static int answer_error(struct sbx_cli *cli, struct pull *p)
{
  struct sbx_error err = {0};
  json_t *root = p->body.data ? json_loads(p->body.data, 0, NULL) : NULL;
  json_t *e = json_object_get(root, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  const char *field = json_string_value(json_object_get(json_object_get(e, "details"), "field"));
  enum sbx_errcode ec = p->status == 401   ? SBX_E_UNAUTHENTICATED
                        : p->status >= 500 ? SBX_E_INTERNAL
                                           : SBX_E_INVALID;
  if (code)
    sbx_err_set(&err, ec, 0, "%s: %s", code, msg ? msg : "(no message)");
  else
    sbx_err_set(&err, ec, 0, "HTTP %ld from sandboxd: %.200s", p->status,
                p->body.len ? p->body.data : "(empty body)");
  if (field)
    snprintf(err.field, sizeof err.field, "%s", field);
  json_decref(root);
  return sbx_cli_fail_api(cli, &err);
}

static int transport_error(struct sbx_cli *cli, CURLcode rc, const char *errbuf)
{
  const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  if (rc == CURLE_ABORTED_BY_CALLBACK && sbx_cli_interrupted) {
    fputs("sbx: interrupted (sandboxd goes on with the pull)\n", stderr);
    return SBX_EXIT_INTERRUPTED;
  }
  if (rc == CURLE_COULDNT_CONNECT)
    fprintf(stderr, "sbx: cannot reach sandboxd at %s: %s — is `sandboxd serve` running?\n",
            cli->url, why);
  else
    fprintf(stderr, "sbx: request to sandboxd at %s failed: %s\n", cli->url, why);
  return SBX_EXIT_API;
}

static int outcome(struct sbx_cli *cli, struct pull *p)
{
  if (p->status != 200)
    return answer_error(cli, p);
  if (p->error) {
    const char *code = json_string_value(json_object_get(p->error, "code"));
    const char *msg = json_string_value(json_object_get(p->error, "message"));
    fprintf(stderr, "sbx: %s: %s\n", code ? code : "error", msg ? msg : "(no message)");
    return SBX_EXIT_API;
  }
  const char *ref = json_string_value(json_object_get(p->done, "ref"));
  const char *digest = json_string_value(json_object_get(p->done, "digest"));
  if (!ref || !digest) {
    fprintf(stderr, "sbx: the stream from sandboxd at %s ended before the pull did\n", cli->url);
    return SBX_EXIT_API;
  }
  printf("Pulled %s\nDigest: %s\n", ref, digest);
  return SBX_EXIT_OK;
}

static int do_pull(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  if (o->nargs != 1)
    return sbx_cli_usage("image pull", "wants exactly one image REF");
  json_t *body = json_pack("{s:s}", "ref", o->args[0]);
  if (!body)
    return sbx_cli_usage("image pull", "REF is not valid UTF-8");
  _cleanup_free_ char *data = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  _cleanup_free_ char *url = NULL, *auth = NULL;
  size_t ulen = strlen(cli->url);
  while (ulen && cli->url[ulen - 1] == '/')
    ulen--;
  if (!data || asprintf(&url, "%.*s/v1/sandbox/images/pull", (int)ulen, cli->url) < 0 ||
      (cli->api_key && asprintf(&auth, "Authorization: Bearer %s", cli->api_key) < 0))
    abort();
  struct pull p = {.body = SBX_BUF_INIT(MAX_ERR_BODY),
                   .tty = isatty(STDERR_FILENO) == 1,
                   .line = malloc(MAX_LINE)};
  if (!p.line || !(p.curl = curl_easy_init())) {
    free(p.line);
    fputs("sbx: cannot initialise libcurl\n", stderr);
    return SBX_EXIT_API;
  }
  struct curl_slist *h = curl_slist_append(NULL, "Accept: text/event-stream");
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, "Expect:");
  if (sbx_http_wants_french())
    h = curl_slist_append(h, "Accept-Language: fr");
  if (auth)
    h = curl_slist_append(h, auth);
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(p.curl, CURLOPT_URL, url);
  curl_easy_setopt(p.curl, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(p.curl, CURLOPT_USERAGENT, "sbx/0.1");
  curl_easy_setopt(p.curl, CURLOPT_POSTFIELDS, data);
  curl_easy_setopt(p.curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(data));
  curl_easy_setopt(p.curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(p.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(p.curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(p.curl, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(p.curl, CURLOPT_WRITEDATA, &p);
  curl_easy_setopt(p.curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(p.curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
  sbx_cli_trap_signals();
  CURLcode rc = curl_easy_perform(p.curl);
  if (!p.status)
    curl_easy_getinfo(p.curl, CURLINFO_RESPONSE_CODE, &p.status);
  clear_bar(&p);
  int exit_code = rc == CURLE_OK ? outcome(cli, &p) : transport_error(cli, rc, errbuf);
  curl_slist_free_all(h);
  curl_easy_cleanup(p.curl);
  free(p.line);
  free(p.data);
  sbx_buf_free(&p.body);
  json_decref(p.done);
  json_decref(p.error);
  return exit_code;
}

/* ---- ls, rm, gc ---- */

static json_t *image_row(json_t *img)
{
  char dig[16], size[16], layers[16];
  json_t *jl = json_object_get(img, "layers");
  json_t *js = json_object_get(img, "size");
  snprintf(layers, sizeof layers, "%zu", json_array_size(jl));
  json_t *row = json_array();
  json_array_append_new(row, json_string(json_string_value(json_object_get(img, "ref")) ?: "-"));
  json_array_append_new(row, json_string(
                                 short_digest(json_string_value(json_object_get(img, "digest")),
                                              dig, sizeof dig)));
  json_array_append_new(row,
                        json_string(json_is_integer(js) ? human((uint64_t)json_integer_value(js),
                                                                size, sizeof size)
                                                        : "-"));
  json_array_append_new(row, json_string(json_is_array(jl) ? layers : "-"));
  return row;
}

static int do_ls(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  static const char *const headers[] = {"REF", "DIGEST", "SIZE", "LAYERS"};
  if (o->nargs)
    return sbx_cli_usage("image ls", "unexpected argument '%s'", o->args[0]);
  return sbx_cli_ls(cli, "/v1/sandbox/images", "images", o->json, headers, 4, image_row);
}

/* The route takes the reference as the rest of the path, verbatim: only
 * the characters a reference can hold go there (no '?', '#', '%'). */
static bool ref_chars_ok(const char *ref)
{
  if (!*ref || ref[0] == '/')
    return false;
  for (const char *c = ref; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          strchr("._-:/@+", *c)))
      return false;
  return true;
}

static int do_rm(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  if (o->nargs != 1)
    return sbx_cli_usage("image rm", "wants exactly one image REF (see `sbx image ls`)");
  if (!ref_chars_ok(o->args[0]))
    return sbx_cli_usage("image rm", "'%s' is not an image reference", o->args[0]);
  struct sbx_error err = {0};
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/v1/sandbox/images/%s", o->args[0]) < 0)
    abort();
  if (sbx_http_json(cli->http, "DELETE", path, NULL, NULL, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  printf("Removed %s\n", o->args[0]);
  return SBX_EXIT_OK;
}

static int do_gc(struct sbx_cli *cli, struct sbx_cli_sub_opts *o)
{
  if (o->nargs)
    return sbx_cli_usage("image gc", "unexpected argument '%s'", o->args[0]);
  struct sbx_error err = {0};
  json_t *st = NULL;
  if (sbx_http_json(cli->http, "POST", "/v1/sandbox/images/gc", NULL, &st, &err) < 0)
    return sbx_cli_fail_api(cli, &err);
  if (o->json) {
    sbx_cli_print_json(st);
  } else {
    char freed[16];
    json_int_t bytes = json_integer_value(json_object_get(st, "bytes_freed"));
    printf("removed %" JSON_INTEGER_FORMAT " blobs and %" JSON_INTEGER_FORMAT
           " layers, freed %s; %" JSON_INTEGER_FORMAT " unused layers still in use kept\n",
           json_integer_value(json_object_get(st, "blobs_removed")),
           json_integer_value(json_object_get(st, "layers_removed")),
           human(bytes > 0 ? (uint64_t)bytes : 0, freed, sizeof freed),
           json_integer_value(json_object_get(st, "layers_in_use")));
  }
  json_decref(st);
  return SBX_EXIT_OK;
}

int sbx_cmd_image(struct sbx_cli *cli, int argc, char **argv)
{
  static const struct sbx_cli_sub subs[] = {{"pull", "fetch", do_pull},
                                            {"ls", "list", do_ls},
                                            {"rm", "remove", do_rm},
                                            {"gc", "prune", do_gc}};
  return sbx_cli_subcommands(cli, argc, argv, "image", help, longopts, subs,
                             sizeof subs / sizeof subs[0], "pull, ls, rm, gc");
}
