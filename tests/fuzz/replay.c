/* replay.c — a plain main() for a harness: runs every file of the given
 * corpus directories (or the given files) through LLVMFuzzerTestOneInput
 * once, so the corpus — seeds and every reproducer of a fixed finding — is
 * exercised by `meson test --suite fuzz` without clang, and under
 * ASan+UBSan in build-asan.  A crash fails the test; so does an empty
 * corpus (a harness that replays nothing proves nothing). */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX_INPUT (8u << 20) /* larger than any -max_len we fuzz with */

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *buf = malloc(REPLAY_MAX_INPUT);
  size_t n = buf ? fread(buf, 1, REPLAY_MAX_INPUT, f) : 0;
  bool bad = !buf || ferror(f) || !feof(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "replay: %s: unreadable or larger than %u bytes\n", path, REPLAY_MAX_INPUT);
    free(buf);
    return -1;
  }
  /* An exact-size copy, so ASan sees a read past the input's end. */
  uint8_t *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int cmp_names(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, in name order (a stable replay). */
static int run_dir(const char *dir, size_t *count)
{
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof *names);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(path) < 0)
        rc = -1;
      else
        (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv)
{
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  size_t count = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
      rc |= run_dir(argv[i], &count);
    else if (run_file(argv[i]) == 0)
      count++;
    else
      rc = -1;
  }
  printf("replayed %zu inputs\n", count);
  if (count == 0) {
    fprintf(stderr, "replay: no input replayed\n");
    return 1;
  }
  return rc < 0 ? 1 : 0;
}
