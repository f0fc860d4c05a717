/* err.h — errors as values with context (crun's libcrun_error_t habit).
 *
 * A fallible function returns int (< 0 on failure) and fills a trailing
 * `struct sbx_error *err`.  The error carries a stable machine code (mapped
 * to an HTTP status and envelope in exactly one place: api/envelope.c), the
 * errno that caused it (0 if none), the JSON field at fault for validation
 * errors, and a human message in English.  Context is prepended on the way up
 * with sbx_err_prefix().  The struct is plain storage: nothing to free. */
#ifndef SBX_COMMON_ERR_H
#define SBX_COMMON_ERR_H

#include <errno.h>
#include <stddef.h>

enum sbx_errcode {
  SBX_E_NONE = 0,
  SBX_E_INVALID,             /* 400 invalid_request */
  SBX_E_UNAUTHENTICATED,     /* 401 */
  SBX_E_FORBIDDEN,           /* 403 */
  SBX_E_NOT_FOUND,           /* 404 */
  SBX_E_METHOD,              /* 405 method_not_allowed */
  SBX_E_CONFLICT,            /* 409 */
  SBX_E_TOO_LARGE,           /* 413 payload_too_large */
  SBX_E_QUOTA,               /* 429 quota_exceeded */
  SBX_E_RATE,                /* 429 rate_limited */
  SBX_E_INTERNAL,            /* 500 */
  SBX_E_RUNTIME_UNAVAILABLE, /* 503 */
  SBX_E_NOT_READY,           /* 503 */
  SBX_E_BAD_GATEWAY,         /* 502: the ports proxy could not reach the sandbox's server */
};

struct sbx_error {
  enum sbx_errcode code;
  int errnum;       /* errno behind the failure, 0 if none */
  char field[64];   /* JSON field at fault (SBX_E_INVALID), "" if none */
  char msg[512];    /* English, human readable */
  char msg_fr[512]; /* French, if the raiser wrote one ("" → envelope.c
                        * builds one from a per-code sentence + msg) */
};

/* Fill err (may be NULL) and return -1.  printf-style message. */
int sbx_err_set(struct sbx_error *err, enum sbx_errcode code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Same, naming the JSON field at fault (code is SBX_E_INVALID). */
int sbx_err_field(struct sbx_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like sbx_err_set with SBX_E_INTERNAL and ": strerror(errnum)" appended. */
int sbx_err_sys(struct sbx_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepend "context: " to the message, keeping code and errno. Returns -1. */
int sbx_err_prefix(struct sbx_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sbx_err_clear(struct sbx_error *err);
/* Sets the French message of an error already filled.  Returns -1. */
int sbx_err_fr(struct sbx_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A request field of the wrong JSON type / with a bad value: 400
 * invalid_request naming field, one English and one French sentence
 * ("field must be <want>", "field: <why>").  Return -1. */
int sbx_err_bad_type(struct sbx_error *err, const char *field, const char *want_en,
                     const char *want_fr);
int sbx_err_bad_value(struct sbx_error *err, const char *field, const char *why_en,
                      const char *why_fr);

#endif
