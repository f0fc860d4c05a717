/* http.h — the CLI's only way to the daemon: a small libcurl wrapper.
 *
 * Owns: the base URL, the bearer key, Accept-Language (fr when LC_ALL /
 * LC_MESSAGES / LANG start with "fr"), turning the daemon's error envelope
 * into a `struct sbx_error` whose message reads "<code>: <message>", and
 * turning transport failures into one clear sentence naming the URL.
 *
 * Paths passed in are relative to the base URL, start with '/', and are
 * already escaped (sbx_http_escape).  One handle serves one thread. */
#ifndef SBX_CLI_HTTP_H
#define SBX_CLI_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/err.h"

struct sbx_http;

/* Largest response body kept in memory (JSON answers, error bodies).
 * Exec results carry up to two capped streams, possibly base64. */
#define SBX_HTTP_MAX_BODY (256u * 1024 * 1024)

/* base_url and api_key are copied; api_key may be NULL. */
/* Whether the user's locale (LC_ALL, LC_MESSAGES, LANG) asks for French
 * (sent as Accept-Language). */
bool sbx_http_wants_french(void);
struct sbx_http *sbx_http_new(const char *base_url, const char *api_key, struct sbx_error *err);
void sbx_http_free(struct sbx_http *h);

/* HTTP status of the last answer, 0 if the last call got no answer. */
long sbx_http_last_status(const struct sbx_http *h);
/* Machine code of the last error envelope ("" if none), e.g. "not_found". */
const char *sbx_http_last_code(const struct sbx_http *h);

/* Escapes s for a path segment or query value; malloc'd, never NULL
 * (aborts on allocation failure like the rest of the CLI would). */
char *sbx_http_escape(const char *s);

/* method + JSON body (borrowed, may be NULL) → parsed JSON answer in *out
 * (new reference; NULL for an empty body such as 204; out may be NULL).
 * A non-2xx answer is an error carrying the envelope's code and message. */
int sbx_http_json(struct sbx_http *h, const char *method, const char *path, json_t *body,
                  json_t **out, struct sbx_error *err);

/* PUT the `size` bytes readable from fd as a raw body. */
int sbx_http_put_fd(struct sbx_http *h, const char *path, int fd, off_t size,
                    struct sbx_error *err);

/* GET a raw body into local_path (created/truncated with `mode` only once a
 * 2xx answer starts, so an error never clobbers an existing file), or into
 * stdout when local_path is NULL. */
int sbx_http_get_to_file(struct sbx_http *h, const char *path, const char *local_path,
                         unsigned mode, struct sbx_error *err);

#endif
