/* Spins for ever (until its worker is terminated). */
#include <stdio.h>

int main(void)
{
  volatile unsigned long n = 0;

  printf("looping\n");
  fflush(stdout);
  for (;;)
    n++;
}
