/* Traps: `unreachable` (abort) by default, or an out-of-bounds access
 * (`trap oob`) or a division by zero (`trap div`). */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
  printf("about to trap\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "oob") == 0) {
    volatile int *p = (int *)0xfffffff0u;
    return *p;
  }
  if (argc > 1 && strcmp(argv[1], "div") == 0) {
    volatile int z = 0;
    volatile int a = 7;
    return a / z;
  }
  __builtin_trap();
}
