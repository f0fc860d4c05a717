/* test_http_check.c — api/http_check.c: percent-decoding and UTF-8 checks
 * of the request-target, the framing verdict, and the route parameter an
 * error names (api/router.c). */
#include <stdio.h>
#include <string.h>

#include "api/http_check.h"
#include "api/router.h"
#include "check.h"

static const char *fault(const char *target, bool utf8, struct sbx_target_fault *f)
{
  return sbx_http_check_target(target, utf8, f) == 0 ? NULL : f->kind;
}

static void test_target(void)
{
  struct sbx_target_fault f;
  CHECK(!fault("/v1/sandbox/sessions?status=ready&limit=5", true, &f));
  CHECK(!fault("/v1/x/caf%C3%A9?path=/work/caf%c3%a9+x&flag", true, &f));
  CHECK(!fault("/", true, &f));
  CHECK(!fault("/a?", true, &f));
  CHECK(!fault("/a?=&&x=", true, &f));
  CHECK_STR(fault("/a?path=%ff%fe", true, &f), "invalid UTF-8");
  CHECK(f.in_query);
  CHECK_STR(f.name, "path");
  CHECK(!fault("/a?path=%ff%fe", false, &f)); /* the proxy forwards bytes */
  CHECK_STR(fault("/a?x=1&status=a%00b", false, &f), "an encoded NUL byte");
  CHECK_STR(f.name, "status");
  CHECK_STR(fault("/a?x=%zz", true, &f), "a malformed %-escape");
  CHECK_STR(fault("/a?x=%4", true, &f), "a malformed %-escape");
  CHECK_STR(fault("/a?x=%", true, &f), "a malformed %-escape");
  CHECK_STR(fault("/a?p%ffth=1", true, &f), "invalid UTF-8");
  CHECK(f.in_query && f.name[0] == '\0');
  CHECK_STR(fault("/v1/sandbox/sessions/%ff/files", true, &f), "invalid UTF-8");
  CHECK(!f.in_query && f.segment == 3);
  CHECK_STR(fault("//x/%00", true, &f), "an encoded NUL byte");
  CHECK(f.segment == 2); /* "", "x", "%00" */
  /* overlong '/', a surrogate, past U+10FFFF, a truncated sequence */
  CHECK(fault("/a?x=%c0%af", true, &f));
  CHECK(fault("/a?x=%ed%a0%80", true, &f));
  CHECK(fault("/a?x=%f4%90%80%80", true, &f));
  CHECK(fault("/a?x=%e2%82", true, &f));
  CHECK(!fault("/a?x=%f0%9f%98%80", true, &f)); /* U+1F600 */
}

static const char *verdict(const char *const *hdrs, const char **field)
{
  struct sbx_framing fr = {0};
  for (size_t i = 0; hdrs[i]; i += 2)
    sbx_http_framing_add(&fr, hdrs[i], hdrs[i + 1]);
  return sbx_http_framing_verdict(&fr, field);
}

static void test_framing(void)
{
  const char *field;
  const char *ok[] = {"Host", "x", "Content-Length", "5", "Content-Length", "5", NULL};
  CHECK(!verdict(ok, &field));
  const char *chunked[] = {"Transfer-Encoding", "Chunked", NULL};
  CHECK(!verdict(chunked, &field));
  const char *both[] = {"Content-Length", "5", "transfer-encoding", "chunked", NULL};
  CHECK(verdict(both, &field));
  CHECK_STR(field, "Transfer-Encoding");
  const char *gzip[] = {"Transfer-Encoding", "gzip, chunked", NULL};
  CHECK(verdict(gzip, &field));
  const char *twice[] = {"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked", NULL};
  CHECK(verdict(twice, &field));
  const char *lengths[] = {"Content-Length", "5", "Content-Length", "6", NULL};
  CHECK(verdict(lengths, &field));
  CHECK_STR(field, "Content-Length");
  const char *space[] = {"Transfer-Encoding ", "chunked", NULL};
  CHECK(verdict(space, &field));
  CHECK_STR(field, "headers");
}

static void test_segment_names(void)
{
  char name[64];
  CHECK(sbx_route_segment_name("/v1/sandbox/sessions/%ff", 3, name, sizeof name));
  CHECK_STR(name, "id");
  CHECK(sbx_route_segment_name("/v1/sandbox/sessions/s/processes/%ff/output", 5, name,
                               sizeof name));
  CHECK_STR(name, "pid");
  CHECK(sbx_route_segment_name("/v1/sandbox/sessions/s/ports/80/a/%ff", 7, name, sizeof name));
  CHECK_STR(name, "rest");
  CHECK(!sbx_route_segment_name("/v1/nowhere/%ff", 2, name, sizeof name));
  CHECK(!sbx_route_segment_name("/v1/sandbox/sessions/s", 1, name, sizeof name));
}

int main(void)
{
  CHECK_CASE(test_target);
  CHECK_CASE(test_framing);
  CHECK_CASE(test_segment_names);
  return check_finish("http_check");
}
