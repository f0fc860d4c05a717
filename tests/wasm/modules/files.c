/* files PATH TEXT: writes TEXT to PATH (under a preopen such as /work),
 * reads it back and prints it; then lists the directory of PATH. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: files PATH TEXT\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "w");
  if (!f) {
    fprintf(stderr, "open %s for writing: %s\n", argv[1], strerror(errno));
    return 1;
  }
  fprintf(f, "%s\n", argv[2]);
  fclose(f);

  char buf[4096];
  f = fopen(argv[1], "r");
  if (!f) {
    fprintf(stderr, "open %s for reading: %s\n", argv[1], strerror(errno));
    return 1;
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  printf("read back: %s", buf);

  char dirbuf[4096];
  snprintf(dirbuf, sizeof dirbuf, "%s", argv[1]);
  DIR *d = opendir(dirname(dirbuf));
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)))
      if (de->d_name[0] != '.')
        printf("entry %s\n", de->d_name);
    closedir(d);
  }
  return 0;
}
