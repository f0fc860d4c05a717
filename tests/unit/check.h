/* check.h — the tiny assertion kit of the C unit tests: CHECK prints
 * file:line and the failed expression, counts, and the test goes on;
 * main returns check_failures() so meson sees a non-zero exit. */
#ifndef SBX_TEST_CHECK_H
#define SBX_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failed_count;
static int check_total;

#define CHECK(expr)                                                                          \
  do {                                                                                       \
    check_total++;                                                                           \
    if (!(expr)) {                                                                           \
      check_failed_count++;                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr);               \
    }                                                                                        \
  } while (0)
#define CHECK_STR(a, b)                                                                      \
  do {                                                                                       \
    const char *a_ = (a), *b_ = (b);                                                         \
    check_total++;                                                                           \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                 \
      check_failed_count++;                                                                  \
      fprintf(stderr, "%s:%d: CHECK_STR failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__,     \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                       \
    }                                                                                        \
  } while (0)

static inline int check_finish(const char *name)
{
  printf("%s: %d checks, %d failed\n", name, check_total, check_failed_count);
  return check_failed_count ? 1 : 0;
}

#endif
