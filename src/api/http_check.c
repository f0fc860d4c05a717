/* http_check.c — see http_check.h. */
#include "api/http_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool sbx_http_utf8_valid(const unsigned char *s, size_t n)
{
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

static int hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decodes s[0..n) into out (room for n bytes); NULL or the fault. */
static const char *decode(const char *s, size_t n, bool plus, bool utf8, unsigned char *out,
                          size_t *out_len)
{
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
      int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        return "a malformed %-escape";
      if (hi == 0 && lo == 0)
        return "an encoded NUL byte";
      out[o++] = (unsigned char)(hi << 4 | lo);
      i += 2;
    } else {
      out[o++] = plus && s[i] == '+' ? ' ' : (unsigned char)s[i];
    }
  }
  *out_len = o;
  if (utf8 && !sbx_http_utf8_valid(out, o))
    return "invalid UTF-8";
  return NULL;
}

static int check_path(const char *p, size_t n, bool utf8, unsigned char *buf,
                      struct sbx_target_fault *f)
{
  size_t seg = 0, i = 0, len;
  while (i < n) {
    if (p[i] == '/') {
      i++;
      if (i > 1)
        seg++;
      continue;
    }
    size_t e = i;
    while (e < n && p[e] != '/')
      e++;
    const char *kind = decode(p + i, e - i, false, utf8, buf, &len);
    if (kind) {
      f->kind = kind, f->in_query = false, f->segment = seg;
      return -1;
    }
    i = e;
  }
  return 0;
}

/* One "name[=value]" of the query. */
static int check_param(const char *s, size_t n, bool utf8, unsigned char *buf,
                       struct sbx_target_fault *f)
{
  const char *eq = memchr(s, '=', n);
  size_t nl = eq ? (size_t)(eq - s) : n, len;
  f->in_query = true;
  f->kind = decode(s, nl, true, utf8, buf, &len);
  if (f->kind)
    return -1; /* the name itself: f->name stays "" */
  snprintf(f->name, sizeof f->name, "%.*s", (int)len, (const char *)buf);
  if (eq && (f->kind = decode(eq + 1, n - nl - 1, true, utf8, buf, &len)))
    return -1;
  f->name[0] = '\0';
  return 0;
}

int sbx_http_check_target(const char *target, bool utf8, struct sbx_target_fault *f)
{
  memset(f, 0, sizeof *f);
  size_t n = strlen(target);
  unsigned char *buf = malloc(n + 1);
  if (!buf) {
    f->kind = "out of memory";
    return -1;
  }
  const char *q = strchr(target, '?');
  size_t pl = q ? (size_t)(q - target) : n;
  int rc = check_path(target, pl, utf8, buf, f);
  for (const char *s = q ? q + 1 : NULL; rc == 0 && s && *s;) {
    const char *amp = strchrnul(s, '&');
    rc = check_param(s, (size_t)(amp - s), utf8, buf, f);
    s = *amp ? amp + 1 : NULL;
  }
  free(buf);
  return rc;
}

static bool is_tchar(unsigned char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

void sbx_http_framing_add(struct sbx_framing *fr, const char *name, const char *value)
{
  if (!name[0])
    fr->bad_name = true;
  for (const char *p = name; *p; p++)
    if (!is_tchar((unsigned char)*p)) /* "Transfer-Encoding : x" is a name with a space */
      fr->bad_name = true;
  value = value ? value : "";
  if (!strcasecmp(name, "Content-Length")) {
    if (fr->content_lengths++ == 0)
      snprintf(fr->first_length, sizeof fr->first_length, "%s", value);
    else if (strcmp(fr->first_length, value) != 0 || strlen(value) >= sizeof fr->first_length)
      fr->lengths_differ = true;
  } else if (!strcasecmp(name, "Transfer-Encoding")) {
    fr->transfer_encodings++;
    if (strcasecmp(value, "chunked") != 0)
      fr->not_chunked = true;
  }
}

const char *sbx_http_framing_verdict(const struct sbx_framing *fr, const char **field)
{
  *field = NULL;
  if (fr->bad_name) {
    *field = "headers";
    return "a header field name holds a space or another character a name may not have";
  }
  if (fr->content_lengths && fr->transfer_encodings) {
    *field = "Transfer-Encoding";
    return "both Content-Length and Transfer-Encoding: the body's length would be ambiguous";
  }
  if (fr->transfer_encodings > 1 || fr->not_chunked) {
    *field = "Transfer-Encoding";
    return "the only transfer coding accepted is a single \"chunked\"";
  }
  if (fr->lengths_differ) {
    *field = "Content-Length";
    return "Content-Length is given more than once with different values";
  }
  return NULL;
}
