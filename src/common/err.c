/* err.c — see err.h. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sbx_err_set(struct sbx_error *err, enum sbx_errcode code, int errnum, const char *fmt, ...)
{
  if (!err)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->code = code;
  err->errnum = errnum;
  err->field[0] = '\0';
  return -1;
}

int sbx_err_field(struct sbx_error *err, const char *field, const char *fmt, ...)
{
  if (!err)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->code = SBX_E_INVALID;
  err->errnum = 0;
  snprintf(err->field, sizeof err->field, "%s", field ? field : "");
  return -1;
}

int sbx_err_sys(struct sbx_error *err, int errnum, const char *fmt, ...)
{
  if (!err)
    return -1;
  char head[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  snprintf(err->msg, sizeof err->msg, "%s: %s", head, strerror(errnum));
  err->code = SBX_E_INTERNAL;
  err->errnum = errnum;
  err->field[0] = '\0';
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
  snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
  return -1;
}

void sbx_err_clear(struct sbx_error *err)
{
  if (err)
    memset(err, 0, sizeof *err);
}
