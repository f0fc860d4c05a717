/* forkexec.c — the bare baseline for `make bench`: N x fork + execve("/bin/true")
 * + waitpid, timing each one. Prints one sample per line in microseconds.
 * usage: forkexec N WARMUP */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

extern char **environ;

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int one(void)
{
  char *argv[] = {"true", NULL};
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execve("/bin/true", argv, environ);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return -1;
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: forkexec N WARMUP\n");
    return 2;
  }
  long n = atol(argv[1]), warm = atol(argv[2]);
  for (long i = 0; i < warm; i++)
    if (one() < 0) {
      perror("forkexec: warm-up");
      return 1;
    }
  for (long i = 0; i < n; i++) {
    double t0 = now_us();
    if (one() < 0) {
      fprintf(stderr, "forkexec: iteration %ld failed\n", i);
      return 1;
    }
    printf("%.1f\n", now_us() - t0);
  }
  return 0;
}
