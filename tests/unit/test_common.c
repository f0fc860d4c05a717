/* test_common.c — quantities, head+tail capture, the error envelope and
 * language choice. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/envelope.h"
#include "check.h"
#include "common/capture.h"
#include "common/quantity.h"

static void test_cpu(void)
{
  uint64_t v;
  CHECK(sbx_parse_cpu_millis("500m", &v) == 0 && v == 500);
  CHECK(sbx_parse_cpu_millis("2", &v) == 0 && v == 2000);
  CHECK(sbx_parse_cpu_millis("0.5", &v) == 0 && v == 500);
  CHECK(sbx_parse_cpu_millis("1.25", &v) == 0 && v == 1250);
  CHECK(sbx_parse_cpu_millis("lots", &v) < 0);
  CHECK(sbx_parse_cpu_millis("", &v) < 0);
  CHECK(sbx_parse_cpu_millis("-1", &v) < 0);
  CHECK(sbx_parse_cpu_millis("0.0001", &v) < 0); /* finer than a millicore */
  CHECK(sbx_parse_cpu_millis("5mm", &v) < 0);
  CHECK(sbx_parse_cpu_millis("99999999999999999999", &v) < 0);
  char buf[32];
  sbx_format_cpu(500, buf, sizeof buf);
  CHECK_STR(buf, "500m");
  sbx_format_cpu(2000, buf, sizeof buf);
  CHECK_STR(buf, "2");
}

static void test_bytes(void)
{
  uint64_t v;
  CHECK(sbx_parse_bytes("256Mi", &v) == 0 && v == 256ULL << 20);
  CHECK(sbx_parse_bytes("1Gi", &v) == 0 && v == 1ULL << 30);
  CHECK(sbx_parse_bytes("1G", &v) == 0 && v == 1000000000ULL);
  CHECK(sbx_parse_bytes("512", &v) == 0 && v == 512);
  CHECK(sbx_parse_bytes("1k", &v) == 0 && v == 1000);
  CHECK(sbx_parse_bytes("lots", &v) < 0);
  CHECK(sbx_parse_bytes("12Zi", &v) < 0);
  CHECK(sbx_parse_bytes("1.5Gi", &v) < 0); /* fractions of bytes are ambiguous: refused */
  CHECK(sbx_parse_bytes("", &v) < 0);
  CHECK(sbx_parse_bytes("-5Mi", &v) < 0);
  CHECK(sbx_parse_bytes("16Ei", &v) < 0); /* 2^64: overflows */
  CHECK(sbx_parse_bytes("18446744073709551615", &v) == 0 && v == UINT64_MAX);
  CHECK(sbx_parse_bytes("18446744073709551616", &v) < 0);
  CHECK(sbx_parse_bytes("20000000Ti", &v) < 0);
  char buf[32];
  sbx_format_bytes(256ULL << 20, buf, sizeof buf);
  CHECK_STR(buf, "256Mi");
  sbx_format_bytes(1500, buf, sizeof buf);
  CHECK_STR(buf, "1500");
}

static void test_capture(void)
{
  struct sbx_capture c;
  CHECK(sbx_capture_init(&c, 10) == 0);
  sbx_capture_feed(&c, "0123", 4);
  size_t n;
  char *s = sbx_capture_flatten(&c, &n);
  CHECK(n == 4 && memcmp(s, "0123", 4) == 0);
  CHECK(!sbx_capture_truncated(&c));
  free(s);
  /* head keeps 5, tail the last 5 */
  sbx_capture_feed(&c, "456789abcdefghij", 16);
  s = sbx_capture_flatten(&c, &n);
  CHECK(n == 10);
  CHECK(memcmp(s, "01234fghij", 10) == 0);
  CHECK(sbx_capture_truncated(&c));
  CHECK(sbx_capture_dropped(&c) == 10);
  free(s);
  /* many small writes wrap the ring */
  for (int i = 0; i < 1000; i++)
    sbx_capture_feed(&c, "x", 1);
  sbx_capture_feed(&c, "END", 3);
  s = sbx_capture_flatten(&c, &n);
  CHECK(n == 10 && memcmp(s, "01234xxEND", 10) == 0);
  CHECK(c.total == 20 + 1003);
  free(s);
  /* released: nothing kept, the count stays, feeding keeps nothing */
  sbx_capture_release(&c);
  s = sbx_capture_flatten(&c, &n);
  CHECK(s && n == 0 && s[0] == '\0');
  free(s);
  CHECK(c.total == 1023 && sbx_capture_dropped(&c) == 1023 && sbx_capture_truncated(&c));
  sbx_capture_feed(&c, "more", 4);
  CHECK(c.total == 1027 && sbx_capture_dropped(&c) == 1027);
  sbx_capture_free(&c);

  /* 60 MB through a 1 MiB capture: memory stays at the cap */
  CHECK(sbx_capture_init(&c, 1 << 20) == 0);
  char *chunk = malloc(65536);
  for (int i = 0; i < 65536; i++)
    chunk[i] = (char)('a' + i % 26);
  uint64_t fed = 0;
  while (fed < 60000000) {
    size_t k = 60000000 - fed < 65536 ? (size_t)(60000000 - fed) : 65536;
    sbx_capture_feed(&c, chunk, k);
    fed += k;
  }
  s = sbx_capture_flatten(&c, &n);
  CHECK(n == 1 << 20);
  CHECK(sbx_capture_dropped(&c) == 60000000 - (1 << 20));
  CHECK(s[0] == 'a' && s[(1 << 19) - 1] == (char)('a' + ((1 << 19) - 1) % 65536 % 26));
  CHECK(s[n - 1] == (char)('a' + (60000000 - 1) % 65536 % 26));
  free(s);
  free(chunk);
  sbx_capture_free(&c);
}

static void test_envelope(void)
{
  char lang[3];
  sbx_envelope_lang(NULL, lang);
  CHECK_STR(lang, "en");
  sbx_envelope_lang("fr-FR,fr;q=0.9,en;q=0.8", lang);
  CHECK_STR(lang, "fr");
  sbx_envelope_lang("en-US,fr;q=0.5", lang);
  CHECK_STR(lang, "en");
  sbx_envelope_lang("de-DE, fr;q=0.5", lang);
  CHECK_STR(lang, "fr");
  sbx_envelope_lang("french", lang);
  CHECK_STR(lang, "en");

  struct sbx_error err = {0};
  sbx_err_field(&err, "limits.memory", "limits.memory: not a quantity");
  sbx_err_fr(&err, "limits.memory : pas une quantité");
  CHECK(sbx_envelope_status(err.code) == 400);
  json_t *e = sbx_envelope_build(&err, "fr", "req_1");
  json_t *inner = json_object_get(e, "error");
  CHECK_STR(json_string_value(json_object_get(inner, "code")), "invalid_request");
  CHECK_STR(json_string_value(json_object_get(inner, "message")),
            "limits.memory : pas une quantité");
  CHECK_STR(json_string_value(json_object_get(json_object_get(inner, "message_i18n"), "en")),
            "limits.memory: not a quantity");
  CHECK_STR(json_string_value(json_object_get(json_object_get(inner, "details"), "field")),
            "limits.memory");
  CHECK_STR(json_string_value(json_object_get(inner, "request_id")), "req_1");
  json_decref(e);

  sbx_err_set(&err, SBX_E_RUNTIME_UNAVAILABLE, 0, "no runsc");
  CHECK(sbx_envelope_status(err.code) == 503);
  e = sbx_envelope_build(&err, "en", "r");
  inner = json_object_get(e, "error");
  CHECK_STR(json_string_value(json_object_get(inner, "code")), "runtime_unavailable");
  CHECK_STR(json_string_value(json_object_get(inner, "message")), "no runsc");
  /* no French text given: a French sentence for the code prefixes the detail */
  const char *fr =
      json_string_value(json_object_get(json_object_get(inner, "message_i18n"), "fr"));
  CHECK(fr && strstr(fr, "indisponible") != NULL);
  json_decref(e);
  CHECK(sbx_envelope_status(SBX_E_NOT_FOUND) == 404);
  CHECK(sbx_envelope_status(SBX_E_TOO_LARGE) == 413);
  CHECK(sbx_envelope_status(SBX_E_QUOTA) == 429);
  CHECK_STR(sbx_envelope_code_name(SBX_E_NOT_READY), "not_ready");
}

int main(void)
{
  CHECK_CASE(test_cpu);
  CHECK_CASE(test_bytes);
  CHECK_CASE(test_capture);
  CHECK_CASE(test_envelope);
  return check_finish("test_common");
}
