/* fuzz_router.c — the API's first contact with an HTTP request: the raw
 * bytes go through libmicrohttpd exactly as the daemon configures it to
 * parse them (request line, headers, percent-decoding of the path and of
 * the query arguments), then through the daemon's own code: the route
 * matcher (api/router.c, with its {param} and {rest*} segments), the query
 * accessors and pagination (api/server.c, api/pagination.c), the `path`
 * argument's shape check (core/schema.c) and Accept-Language
 * (api/envelope.c).  MHD runs without a listening socket or thread: the
 * request comes in over a socketpair, served by MHD_run() here.
 * Input: the bytes a client sends. */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/envelope.h"
#include "api/pagination.h"
#include "api/router.h"
#include "api/server.h"
#include "core/schema.h"
#include "fuzz.h"

static struct MHD_Daemon *mhd;
static bool closed;

static void each_query(void *ctx, const char *name, const char *value)
{
  size_t *n = ctx;
  *n += strlen(name) + (value ? strlen(value) : 0);
}

/* What dispatch() and the handlers do with a request, up to the handler. */
static void examine(struct MHD_Connection *c, const char *url, const char *method)
{
  static struct sbx_req r;
  memset(&r, 0, sizeof r);
  r.conn = c;
  snprintf(r.method, sizeof r.method, "%s", method);
  snprintf(r.path, sizeof r.path, "%s", url);
  bool wrong_method;
  const struct sbx_route *rt = sbx_route_match(r.method, r.path, &r, &wrong_method);
  if (rt) {
    if (r.nparams < 0 || r.nparams > SBX_MAX_PARAMS)
      abort();
    for (int i = 0; i < r.nparams; i++)
      if (!r.params[i][0] || memchr(r.params[i], '/', strlen(r.params[i])))
        abort(); /* a {param} is one non-empty segment */
    if (r.rest && (r.rest < r.path || r.rest > r.path + strlen(r.path)))
      abort(); /* rest points into the path */
  }
  sbx_envelope_lang(sbx_req_header(&r, "Accept-Language"), r.lang);
  int limit;
  const char *cursor;
  struct sbx_error err = {0};
  if (sbx_api_page(&r, &limit, &cursor, &err) == 0 && (limit < 1 || limit > 200))
    abort();
  const char *path = sbx_req_query(&r, "path");
  memset(&err, 0, sizeof err);
  if (path)
    sbx_schema_path(path, "path", &err);
  size_t total = 0;
  sbx_req_each_query(&r, each_query, &total);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
  static int marker;
  (void)cls, (void)version, (void)upload_data;
  if (!*con_cls) {
    *con_cls = &marker;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  examine(c, url, method);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
  enum MHD_Result ret = MHD_queue_response(c, 204, resp);
  MHD_destroy_response(resp);
  return ret;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
  (void)cls, (void)c, (void)socket_context;
  if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
    closed = true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  /* As the daemon's server.c: default parsing options, no error log (the
   * fuzzer's inputs are meant to be malformed). */
  mhd = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, on_request, NULL,
                         MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5, MHD_OPTION_END);
  if (!mhd)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
      fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0)
    abort();
  /* The request fits the socket buffer (max_len is far below it). */
  if (size && write(sv[0], data, size) != (ssize_t)size)
    abort();
  shutdown(sv[0], SHUT_WR);
  struct sockaddr_in peer = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  closed = false;
  if (MHD_add_connection(mhd, sv[1], (struct sockaddr *)&peer, sizeof peer) != MHD_YES)
    abort();
  char sink[4096];
  for (int i = 0; i < 64 && !closed; i++) {
    MHD_run(mhd);
    while (read(sv[0], sink, sizeof sink) > 0) /* the response: drained, unread */
      ;
  }
  close(sv[0]);
  for (int i = 0; i < 8 && !closed; i++)
    MHD_run(mhd);
  if (!closed)
    abort(); /* a connection MHD never let go of */
  return 0;
}
