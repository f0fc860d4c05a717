/* spawnloop.c — times N x posix_spawnp(argv) + waitpid for the benchmark's
 * peers (bwrap, firejail, runsc do ...). stdin/stdout/stderr go to /dev/null;
 * bench.py runs the peer once beforehand to capture any error message.
 * Prints one sample per line in microseconds; exits 1 at the first failure.
 * usage: spawnloop N WARMUP PROGRAM [ARGS...] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
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

static int one(char **argv, posix_spawn_file_actions_t *fa)
{
  pid_t pid;
  int st;
  if (posix_spawnp(&pid, argv[0], fa, NULL, argv, environ) != 0)
    return -1;
  if (waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: spawnloop N WARMUP PROGRAM [ARGS...]\n");
    return 2;
  }
  long n = atol(argv[1]), warm = atol(argv[2]);
  char **cmd = argv + 3;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd = 0; fd < 3; fd++)
    posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
  for (long i = 0; i < warm + n; i++) {
    double t0 = now_us();
    int rc = one(cmd, &fa);
    double dt = now_us() - t0;
    if (rc != 0) {
      fprintf(stderr, "spawnloop: %s: iteration %ld exited %d\n", cmd[0], i, rc);
      return 1;
    }
    if (i >= warm)
      printf("%.1f\n", dt);
  }
  return 0;
}
