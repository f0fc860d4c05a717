/* Allocates (and touches) 1 MiB blocks until malloc fails; prints how far it
 * got. A module whose memory may not grow further sees malloc return NULL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
  long limit = argc > 1 ? atol(argv[1]) : 1L << 30; /* MiB */
  long mib = 0;
  void **head = NULL; /* keeps every block reachable: no allocation elided */

  while (mib < limit) {
    void **p = malloc(1 << 20);
    if (!p) {
      printf("malloc returned NULL after %ld MiB\n", mib);
      break;
    }
    memset(p, 0xa5, 1 << 20);
    *p = head;
    head = p;
    mib++;
  }
  if (mib == limit)
    printf("allocated %ld MiB without failure\n", mib);
  long blocks = 0;
  for (void **p = head; p; p = *p)
    blocks++;
  return blocks == mib ? 0 : 1;
}
