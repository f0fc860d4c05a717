/* quantity.c — see quantity.h. */
#include "common/quantity.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* v = v*10 + d, refusing overflow. */
static int mul10_add(uint64_t *v, unsigned d)
{
  if (*v > UINT64_MAX / 10 || (*v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
    return -1;
  *v = *v * 10 + d;
  return 0;
}

/* Parses "digits[.digits]" into an integer scaled by 10^scale_digits
 * (so "0.5" with scale 3 → 500).  Rejects extra fractional precision. */
static int parse_decimal(const char **sp, unsigned scale_digits, uint64_t *out)
{
  const char *s = *sp;
  uint64_t v = 0;
  int digits = 0;
  while (isdigit((unsigned char)*s)) {
    if (mul10_add(&v, (unsigned)(*s++ - '0')) < 0)
      return -1;
    digits++;
  }
  unsigned frac = 0;
  if (*s == '.') {
    s++;
    while (isdigit((unsigned char)*s)) {
      if (frac >= scale_digits)
        return -1;
      if (mul10_add(&v, (unsigned)(*s++ - '0')) < 0)
        return -1;
      frac++;
      digits++;
    }
  }
  if (digits == 0)
    return -1;
  for (; frac < scale_digits; frac++) {
    if (v > UINT64_MAX / 10)
      return -1;
    v *= 10;
  }
  *sp = s;
  *out = v;
  return 0;
}

int sbx_parse_cpu_millis(const char *s, uint64_t *out)
{
  if (!s || !*s)
    return -1;
  uint64_t v;
  if (strchr(s, '.') == NULL && s[strlen(s) - 1] == 'm') {
    if (parse_decimal(&s, 0, &v) < 0 || strcmp(s, "m") != 0)
      return -1;
    *out = v;
    return 0;
  }
  if (parse_decimal(&s, 3, &v) < 0 || *s)
    return -1;
  *out = v;
  return 0;
}

static const struct {
  const char *suffix;
  uint64_t mult;
} byte_suffixes[] = {
    {"Ki", 1ULL << 10},
    {"Mi", 1ULL << 20},
    {"Gi", 1ULL << 30},
    {"Ti", 1ULL << 40},
    {"Pi", 1ULL << 50},
    {"Ei", 1ULL << 60},
    {"k", 1000ULL},
    {"K", 1000ULL},
    {"M", 1000000ULL},
    {"G", 1000000000ULL},
    {"T", 1000000000000ULL},
    {"P", 1000000000000000ULL},
    {"E", 1000000000000000000ULL},
    {"", 1},
};

int sbx_parse_bytes(const char *s, uint64_t *out)
{
  if (!s || !*s)
    return -1;
  uint64_t v;
  if (parse_decimal(&s, 0, &v) < 0)
    return -1;
  for (size_t i = 0; i < sizeof byte_suffixes / sizeof byte_suffixes[0]; i++) {
    if (strcmp(s, byte_suffixes[i].suffix) == 0) {
      if (v != 0 && byte_suffixes[i].mult > UINT64_MAX / v)
        return -1;
      *out = v * byte_suffixes[i].mult;
      return 0;
    }
  }
  return -1;
}

void sbx_format_bytes(uint64_t v, char *buf, int len)
{
  static const char *const units[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
  for (int i = 0; i < 6; i++) {
    uint64_t m = 1ULL << (10 * (6 - i));
    if (v != 0 && v % m == 0) {
      snprintf(buf, (size_t)len, "%llu%s", (unsigned long long)(v / m), units[i]);
      return;
    }
  }
  snprintf(buf, (size_t)len, "%llu", (unsigned long long)v);
}

void sbx_format_cpu(uint64_t millis, char *buf, int len)
{
  if (millis % 1000 == 0)
    snprintf(buf, (size_t)len, "%llu", (unsigned long long)(millis / 1000));
  else
    snprintf(buf, (size_t)len, "%llum", (unsigned long long)millis);
}
