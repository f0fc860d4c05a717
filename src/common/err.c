/* err.c — see err.h. */
#include "common/err.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Fills err with code, errnum, field ("" for none) and the message fmt/ap
 * (then ": strerror(errnum)" if sys). */
static int fill(struct sbx_error *err, enum sbx_errcode code, int errnum, const char *field,
                bool sys, const char *fmt, va_list ap)
{
  if (!err)
    return -1;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  if (sys) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
  }
  err->code = code;
  err->errnum = errnum;
  snprintf(err->field, sizeof err->field, "%s", field);
  err->msg_fr[0] = '\0';
  return -1;
}

int sbx_err_set(struct sbx_error *err, enum sbx_errcode code, int errnum, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fill(err, code, errnum, "", false, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_err_field(struct sbx_error *err, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fill(err, SBX_E_INVALID, 0, field ? field : "", false, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_err_sys(struct sbx_error *err, int errnum, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fill(err, SBX_E_INTERNAL, errnum, "", true, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_err_prefix(struct sbx_error *err, const char *fmt, ...)
{
  if (!err)
    return -1;
  char head[256], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  /* Truncation is fine here: the message is for humans. */
  size_t hl = strlen(head);
  if (hl + 2 >= sizeof err->msg)
    hl = sizeof err->msg - 3;
  memcpy(err->msg, head, hl);
  memcpy(err->msg + hl, ": ", 2);
  size_t room = sizeof err->msg - hl - 3;
  size_t ol = strnlen(old, room);
  memcpy(err->msg + hl + 2, old, ol);
  err->msg[hl + 2 + ol] = '\0';
  return -1;
}

void sbx_err_clear(struct sbx_error *err)
{
  if (err)
    memset(err, 0, sizeof *err);
}

int sbx_err_fr(struct sbx_error *err, const char *fmt, ...)
{
  if (!err)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg_fr, sizeof err->msg_fr, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_err_bad_type(struct sbx_error *err, const char *field, const char *want_en,
                     const char *want_fr)
{
  sbx_err_field(err, field, "%s must be %s", field, want_en);
  return sbx_err_fr(err, "Requête invalide : %s doit être %s", field, want_fr);
}

int sbx_err_bad_value(struct sbx_error *err, const char *field, const char *why_en,
                      const char *why_fr)
{
  sbx_err_field(err, field, "%s: %s", field, why_en);
  return sbx_err_fr(err, "Requête invalide : %s : %s", field, why_fr);
}
