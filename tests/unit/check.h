/* check.h — the tiny assertion kit of the C unit tests: CHECK prints
 * file:line and the failed expression, counts, and the test goes on;
 * main returns check_finish() so meson sees a non-zero exit.
 *
 * CHECK_CASE(fn) runs one case in a child of its own and reports it (ok,
 * FAIL, or CRASH with the signal): a case that crashes, aborts or trips a
 * sanitizer ends alone, and the module's other cases still run and say
 * how they went.  A case sees what main set up before it, never what an
 * earlier case changed — modules whose cases share live state (threads,
 * sandboxes that are children of the test) keep them in one process.
 *
 * check_skip(why): the exit code of a suite that cannot run here — 77
 * (meson's "skipped"), but under CI=true a failure: CI that cannot build
 * the wall must not pass with no attack tried. */
#ifndef SBX_TEST_CHECK_H
#define SBX_TEST_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int check_failed_count;
static int check_total;

#define CHECK(expr)                                                                             \
  do {                                                                                          \
    check_total++;                                                                              \
    if (!(expr)) {                                                                              \
      check_failed_count++;                                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr);                  \
    }                                                                                           \
  } while (0)
#define CHECK_STR(a, b)                                                                         \
  do {                                                                                          \
    const char *a_ = (a), *b_ = (b);                                                            \
    check_total++;                                                                              \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                    \
      check_failed_count++;                                                                     \
      fprintf(stderr, "%s:%d: CHECK_STR failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__,        \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                          \
    }                                                                                           \
  } while (0)

static inline bool check_in_ci(void)
{
  const char *ci = getenv("CI");
  return ci && !strcmp(ci, "true");
}

static inline int check_skip(const char *why)
{
  printf("%s%s\n", why, check_in_ci() ? " — a failure under CI=true" : "; skipped");
  return check_in_ci() ? 1 : 77;
}

/* Part of a module that cannot run here: a failed check under CI=true. */
static inline void check_skip_part(const char *why)
{
  printf("%s%s\n", why, check_in_ci() ? " — a failure under CI=true" : "; skipped");
  check_total++;
  if (check_in_ci())
    check_failed_count++;
}

/* The child's counts come back over a pipe: two ints. */
static inline void check_case_child(int wfd, void (*fn)(void))
{
  check_total = check_failed_count = 0; /* this case's own counts */
  fn();
  int counts[2] = {check_total, check_failed_count};
  ssize_t w = write(wfd, counts, sizeof counts);
  (void)w;
  fflush(NULL);
  exit(check_failed_count ? 1 : 0); /* exit, not _exit: LeakSanitizer runs */
}

static inline void check_case(const char *name, void (*fn)(void))
{
  int p[2];
  fflush(NULL);
  pid_t pid = pipe(p) < 0 ? -1 : fork();
  if (pid < 0) {
    fprintf(stderr, "CRASH %s: cannot fork: %s\n", name, strerror(errno));
    check_total++, check_failed_count++;
    return;
  }
  if (pid == 0) {
    close(p[0]);
    check_case_child(p[1], fn);
  }
  close(p[1]);
  int counts[2] = {0, 0}, st = 0;
  ssize_t got = read(p[0], counts, sizeof counts);
  close(p[0]);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  check_total += got == (ssize_t)sizeof counts ? counts[0] : 1;
  if (got == (ssize_t)sizeof counts)
    check_failed_count += counts[1];
  bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!ok && (got != (ssize_t)sizeof counts || counts[1] == 0))
    check_failed_count++; /* a crash, or a failure after the last CHECK (a sanitizer) */
  if (WIFSIGNALED(st))
    fprintf(stderr, "CRASH %s: %s\n", name, strsignal(WTERMSIG(st)));
  else
    fprintf(stderr, "%s %s\n", ok ? "ok   " : "FAIL ", name);
}
#define CHECK_CASE(fn) check_case(#fn, fn)

static inline int check_finish(const char *name)
{
  printf("%s: %d checks, %d failed\n", name, check_total, check_failed_count);
  return check_failed_count ? 1 : 0;
}

#endif
