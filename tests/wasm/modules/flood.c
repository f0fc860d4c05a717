/* flood MIB: writes MIB MiB of 'x' lines to stdout in 64 KiB writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  static char buf[65536];
  long mib = argc > 1 ? atol(argv[1]) : 100;
  long chunks = mib * 16;

  memset(buf, 'x', sizeof buf);
  for (size_t i = 63; i < sizeof buf; i += 64)
    buf[i] = '\n';
  for (long i = 0; i < chunks; i++) {
    size_t off = 0;
    while (off < sizeof buf) {
      ssize_t w = write(1, buf + off, sizeof buf - off);
      if (w < 0) {
        perror("write");
        return 1;
      }
      off += (size_t)w;
    }
  }
  return 0;
}
