/* store_check.h — the assertion macros of the store unit tests (SQLite and
 * PostgreSQL): CHECK, CHECK_OK (an op that must succeed, printing the
 * store's error) and CHECK_ERR (an op that must fail with a code).  Each
 * failure is printed with file:line and counted in `failures`. */
#ifndef SBX_TEST_STORE_CHECK_H
#define SBX_TEST_STORE_CHECK_H

#include <stdio.h>

#include "common/err.h"

static int failures;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                  \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)
/* An op that must succeed; prints the store's error otherwise. */
#define CHECK_OK(call)                                                                          \
  do {                                                                                          \
    struct sbx_error e_ = {0};                                                                  \
    struct sbx_error *err = &e_;                                                                \
    if ((call) != 0) {                                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, e_.msg);             \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)
/* An op that must fail with code. */
#define CHECK_ERR(call, want)                                                                   \
  do {                                                                                          \
    struct sbx_error e_ = {0};                                                                  \
    struct sbx_error *err = &e_;                                                                \
    if ((call) == 0 || e_.code != (want)) {                                                     \
      fprintf(stderr, "%s:%d: %s: wanted code %d, got %d (%s)\n", __FILE__, __LINE__, #call,    \
              (int)(want), (int)e_.code, e_.msg);                                               \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)

#endif
