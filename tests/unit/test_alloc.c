/* test_alloc.c — the allocation-failure policy (docs/architecture.md,
 * "Allocation failure"): a bounded buffer refuses past its ceiling with
 * E2BIG and on a failed allocation with ENOMEM, leaving what it held; a
 * JSON builder that jansson cannot allocate for returns NULL or a whole
 * value, never a partial one, and leaks nothing (ASan build). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/envelope.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/err.h"
#include "check.h"

/* Under ASan a request the allocator cannot meet must come back NULL (as
 * from libc's malloc), not abort the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void test_ceiling(void)
{
  _cleanup_buf_ struct sbx_buf b = SBX_BUF_INIT(8);
  CHECK(sbx_buf_append(&b, "abcde", 5) == 0);
  CHECK(b.len == 5 && strcmp(b.data, "abcde") == 0);
  errno = 0;
  CHECK(sbx_buf_append(&b, "fghi", 4) < 0 && errno == E2BIG);
  CHECK(b.len == 5 && strcmp(b.data, "abcde") == 0);      /* nothing appended */
  CHECK(sbx_buf_append(&b, "fgh", 3) == 0 && b.len == 8); /* up to the ceiling exactly */
  CHECK(strcmp(b.data, "abcdefgh") == 0);
  CHECK(sbx_buf_append(&b, "", 0) == 0);
  CHECK(sbx_buf_append(&b, "x", 1) < 0 && errno == E2BIG);
  size_t n;
  _cleanup_free_ char *s = sbx_buf_steal(&b, &n);
  CHECK(n == 8 && s && strcmp(s, "abcdefgh") == 0);
  CHECK(b.data == NULL && b.len == 0 && b.max == 8);
}

static void test_enomem(void)
{
  /* A ceiling the allocator cannot meet: the failure is ENOMEM and the
   * buffer keeps its bytes. */
  _cleanup_buf_ struct sbx_buf b = SBX_BUF_INIT(SIZE_MAX / 2);
  CHECK(sbx_buf_append(&b, "kept", 4) == 0);
  errno = 0;
  CHECK(sbx_buf_reserve(&b, (size_t)1 << 60) < 0 && errno == ENOMEM);
  CHECK(b.len == 4 && strcmp(b.data, "kept") == 0);
}

static void test_array(void)
{
  _cleanup_free_ int *v = NULL;
  size_t cap = 0;
  CHECK(sbx_array_grow(&v, &cap, 1, sizeof *v, 20) == 0 && cap == 16);
  CHECK(sbx_array_grow(&v, &cap, 17, sizeof *v, 20) == 0 && cap == 20);
  v[19] = 7;
  errno = 0;
  CHECK(sbx_array_grow(&v, &cap, 21, sizeof *v, 20) < 0 && errno == E2BIG && cap == 20);
  CHECK(v[19] == 7);
  void *w = NULL;
  size_t wcap = 0; /* elements too large to count up to the ceiling in bytes */
  CHECK(sbx_array_grow(&w, &wcap, 2, SIZE_MAX / 2, 4) < 0 && errno == E2BIG && !w && !wcap);
}

static void test_steal(void)
{
  _cleanup_free_ char *p = strdup("x");
  char *q = steal_pointer(&p); /* typed: no cast, and p is NULL after */
  CHECK(p == NULL && q && q[0] == 'x');
  free(q);
  _cleanup_strv_ char **v = calloc(3, sizeof *v);
  CHECK(v != NULL);
  if (v) {
    v[0] = strdup("a");
    v[1] = strdup("b");
  }
  _cleanup_json_ json_t *j = json_pack("{s:i}", "a", 1);
  CHECK(j != NULL);
}

/* jansson's allocator, failing from the fail_at-th call on. */
static long calls, fail_at;
static void *failing_malloc(size_t n)
{
  if (fail_at >= 0 && calls++ >= fail_at)
    return NULL;
  return malloc(n);
}

static void test_json_oom(void)
{
  struct sbx_error err;
  sbx_err_set(&err, SBX_E_INVALID, 0, "limits.memory must be a quantity");
  snprintf(err.field, sizeof err.field, "limits.memory");
  json_set_alloc_funcs(failing_malloc, free);
  long whole = 0, null = 0;
  for (fail_at = 0; fail_at < 400; fail_at++) {
    calls = 0;
    json_t *e = sbx_envelope_build(&err, "en", "req_1");
    if (!e) {
      null++;
      continue;
    }
    /* Not NULL: the whole envelope (the fallback drops only details). */
    json_t *in = json_object_get(e, "error");
    CHECK(json_is_string(json_object_get(in, "code")));
    CHECK(json_is_string(json_object_get(in, "message")));
    CHECK(json_is_object(json_object_get(in, "details")));
    whole++;
    json_decref(e);
  }
  fail_at = -1;
  json_set_alloc_funcs(malloc, free);
  CHECK(null > 0);  /* the failures were reached … */
  CHECK(whole > 0); /* … and past them the envelope is built */
}

int main(void)
{
  test_ceiling();
  test_enomem();
  test_array();
  test_steal();
  test_json_oom();
  return check_finish("test_alloc");
}
