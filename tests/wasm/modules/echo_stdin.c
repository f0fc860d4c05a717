/* Copies stdin to stdout until EOF, then prints the byte count on stderr. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
  static char buf[65536]; /* not on the stack: wasm-ld gives 64 KiB of stack */
  long total = 0;
  ssize_t n;

  while ((n = read(0, buf, sizeof buf)) > 0) {
    ssize_t off = 0;
    while (off < n) {
      ssize_t w = write(1, buf + off, (size_t)(n - off));
      if (w < 0) {
        perror("write");
        return 1;
      }
      off += w;
    }
    total += n;
  }
  if (n < 0) {
    perror("read");
    return 1;
  }
  fprintf(stderr, "echoed %ld bytes\n", total);
  return 0;
}
