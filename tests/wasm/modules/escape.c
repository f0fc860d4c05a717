/* Tries to read files outside the preopens (/work, /tmp); prints the WASI
 * error for each and, should one open, its first bytes (which must never
 * happen). Exits 0 when every attempt failed, 1 otherwise. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int try_open(const char *path)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("%s: %s\n", path, strerror(errno));
    return 0;
  }
  char buf[64];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  printf("%s: OPENED: %s\n", path, buf);
  return 1;
}

int main(int argc, char **argv)
{
  int leaked = 0;

  leaked += try_open("/etc/passwd");
  leaked += try_open("/work/../etc/passwd");
  leaked += try_open("/tmp/../../etc/passwd");
  leaked += try_open("../etc/passwd");
  for (int i = 1; i < argc; i++)
    leaked += try_open(argv[i]);
  return leaked ? 1 : 0;
}
