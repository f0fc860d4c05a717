/* test_check.c — the unit kit's own promise (check.h): a case that
 * crashes is reported as such and ends alone; the cases after it still
 * run, and their checks count. */
#include <stdlib.h>

#include "check.h"

static void crashes(void)
{
  CHECK(1);
  abort();
}

static void passes(void)
{
  CHECK(1);
  CHECK(2 > 1);
}

static void fails_once(void) { CHECK(1 == 2); }

int main(void)
{
  CHECK_CASE(crashes);
  CHECK_CASE(passes);
  CHECK_CASE(fails_once);
  /* crashes: 1 failure (its CHECK count is lost with it); passes: 2
   * checks, none failed; fails_once: 1 check, 1 failed. */
  int total = check_total, failed = check_failed_count;
  printf("kit: %d checks, %d failed (want 4, 2)\n", total, failed);
  return total == 4 && failed == 2 ? 0 : 1;
}
